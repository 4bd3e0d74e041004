// ServiceMetrics::render: every scrape shows what changed before it (the sections it reuses are
// rendered again when their source changes); under concurrent scrapes one computation at a time,
// shared by the scrapes that arrived while the one before ran, each computed after its own request.
#include <doctest/doctest.h>

#include <algorithm>
#include <atomic>
#include <string>
#include <thread>
#include <vector>

#include "fake_vm_service.hpp"
#include "hostagent/numa/capacity.hpp"
#include "hostagent/vmtemplates/vm_template.hpp"
#include "service_metrics.hpp"
#include "simulated_hosts.hpp"

namespace hostagent::testing {
namespace {

// The value of the sample whose name and labels are `series` ("name{labels}"), or -1 when absent.
double sample_value(const std::string& text, const std::string& series) {
  const auto at = text.find("\n" + series + " ");
  if (at == std::string::npos) return -1;
  return std::stod(text.substr(at + series.size() + 2));
}

TEST_CASE("a scrape shows what changed before it: capacity, device health and VM states") {
  FakeVmService service{discover_shared("vela2"), {}};
  api::detail::ServiceMetrics metrics;
  const auto usage = service.usage();
  REQUIRE(usage.host != nullptr);
  REQUIRE(usage.host->numa_nodes.at(0).id == 0);
  const auto free_cpus = [&] { return sample_value(metrics.render(service), "hostagent_free_cpus{node=\"0\"}"); };
  const double before = free_cpus();
  CHECK(before == numa::capacity(*usage.host, {}, usage.policy).nodes.at(0).cpus.free);
  CHECK(free_cpus() == before);  // unchanged, from the section kept

  // A VM takes four CPUs of node 0: the next scrape counts them.
  const auto& node0 = usage.host->numa_nodes.at(0).cpus;
  REQUIRE(node0.size() >= 4);
  numa::Allocation vm;
  vm.vm = "held-0";
  vm.cpus.assign(node0.begin(), node0.begin() + 4);
  service.set_held({vm});
  CHECK(free_cpus() == before - 4);
  service.set_held({});
  CHECK(free_cpus() == before);

  // A new health reading: a link that trained low, then retrained.
  const auto gpu = std::find_if(usage.host->pci_devices.begin(), usage.host->pci_devices.end(),
                                [](const numa::PciFunction& f) { return f.role == numa::PciRole::gpu; });
  REQUIRE(gpu != usage.host->pci_devices.end());
  const std::string degraded =
      "hostagent_device_link_degraded{device=\"" + gpu->address.to_string() + "\",role=\"gpu\"}";
  numa::DeviceHealth health;
  health.address = gpu->address;
  health.role = numa::PciRole::gpu;
  health.link_degraded = true;
  service.set_device_health({health});
  CHECK(sample_value(metrics.render(service), degraded) == 1);
  health.link_degraded = false;
  service.set_device_health({health});
  CHECK(sample_value(metrics.render(service), degraded) == 0);

  service::VmView running;
  running.name = "vm-0";
  running.state = "running";
  service.put_vm(running);
  CHECK(sample_value(metrics.render(service), "hostagent_vms{state=\"running\"}") == 1);
  running.state = "shut_off";
  service.put_vm(running);
  const auto text = metrics.render(service);
  CHECK(sample_value(text, "hostagent_vms{state=\"shut_off\"}") == 1);
  CHECK(sample_value(text, "hostagent_vms{state=\"running\"}") == -1);
}

// The guest's phases (kernel, up) are added to an operation after it ended: each is observed once,
// as it comes, and the operation's duration once.
TEST_CASE("phases added after an operation ended are observed once each") {
  FakeVmService service{discover_shared("vela2"), {}};
  api::detail::ServiceMetrics metrics;
  service::OperationView create;
  create.id = "op-1";
  create.kind = "create";
  create.template_name = "t";
  create.state = "succeeded";
  create.duration_seconds = 2;
  create.timeline = {{"launch", "2026-12-05T10:00:01Z", 1.5, ""}, {"resume", "2026-12-05T10:00:01Z", 0.01, ""}};
  const auto publish = [&] {
    service::ServiceEvent event;
    event.kind = service::ServiceEvent::Kind::operation;
    event.operation = create;
    metrics.on_event(event);
  };
  const auto count = [&](const std::string& phase) {
    return sample_value(metrics.render(service), "hostagent_vm_start_phase_seconds_count{kind=\"create\",phase=\"" +
                                                     phase + "\",template=\"t\"}");
  };
  publish();
  publish();  // the same end again (a second subscriber's copy): nothing new
  CHECK(count("launch") == 1);
  CHECK(count("kernel") == -1);
  create.timeline.push_back({"kernel", "2026-12-05T10:00:03Z", 2, "console showed \"Linux version\""});
  publish();
  create.timeline.push_back({"up", "2026-12-05T10:00:09Z", 6, "guest agent answered"});
  publish();
  CHECK(count("launch") == 1);
  CHECK(count("kernel") == 1);
  CHECK(count("up") == 1);
  CHECK(sample_value(metrics.render(service),
                     "hostagent_operation_duration_seconds_count{kind=\"create\",result=\"succeeded\"}") == 1);
}

// What ended is kept rendered between scrapes: each kind of observation must show in the next.
TEST_CASE("a scrape shows what ended since the one before: an operation, a cleaning, a release, and each request") {
  FakeVmService service{discover_shared("vela2"), {}};
  api::detail::ServiceMetrics metrics;
  const auto value = [&](const std::string& series) { return sample_value(metrics.render(service), series); };
  const std::string stops = R"(hostagent_operation_duration_seconds_count{kind="stop",result="succeeded"})";
  const std::string cleaned = R"(hostagent_device_cleanings_total{outcome="clean"})";
  const std::string releases = "hostagent_device_release_cleaning_seconds_count";
  const std::string gets = R"(hostagent_http_requests_total{method="GET",code="200"})";
  CHECK(value(stops) == -1);
  CHECK(value(cleaned) == -1);
  CHECK(value(releases) == 0);
  CHECK(value(gets) == -1);

  service::ServiceEvent stop;
  stop.kind = service::ServiceEvent::Kind::operation;
  stop.operation = service::OperationView{};
  stop.operation->id = "op-2";
  stop.operation->kind = "stop";
  stop.operation->state = "succeeded";
  metrics.on_event(stop);
  CHECK(value(stops) == 1);

  service::ServiceEvent cleaning;
  cleaning.kind = service::ServiceEvent::Kind::cleaning;
  cleaning.cleaned = service::CleaningRecordView{};
  cleaning.cleaned->sequence = 1;
  cleaning.cleaned->role = "gpu";
  cleaning.cleaned->outcome = "clean";
  cleaning.cleaned->steps = {{"reset", "passed", "", "", "", 0.5}};
  metrics.on_event(cleaning);
  CHECK(value(cleaned) == 1);
  CHECK(value(R"(hostagent_device_cleaning_step_seconds_count{step="reset",role="gpu"})") == 1);

  service::ServiceEvent release;
  release.kind = service::ServiceEvent::Kind::device;
  release.release = service::ReleaseCleaningView{2, 1.5, 1.0};
  metrics.on_event(release);
  CHECK(value(releases) == 1);
  CHECK(value(stops) == 1);  // unchanged, from the text kept

  metrics.on_request("GET", 200, std::chrono::milliseconds(1));
  CHECK(value(gets) == 1);
  metrics.on_request("GET", 200, std::chrono::milliseconds(1));
  CHECK(value(gets) == 2);
}

TEST_CASE("concurrent scrapes share computations, one at a time, and none answers with a count older than itself") {
  FakeVmService service{discover_shared("vela2"), {}};
  api::detail::ServiceMetrics metrics;
  std::atomic<int> computing{0};
  std::atomic<int> most_at_once{0};
  std::atomic<int> computations{0};
  service.on_status([&] {
    const int now = ++computing;
    int seen = most_at_once.load();
    while (now > seen && !most_at_once.compare_exchange_weak(seen, now)) {
    }
    ++computations;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));  // widens the overlap a shared scrape needs
    --computing;
  });

  constexpr int kThreads = 8;
  constexpr int kScrapes = 25;
  std::atomic<int> stale{0};
  std::vector<std::thread> scrapers;
  scrapers.reserve(kThreads);
  for (int t = 0; t < kThreads; ++t) {
    scrapers.emplace_back([&, t] {
      // Each thread counts requests under a status code of its own: its scrape must show its own count.
      const unsigned code = 700 + static_cast<unsigned>(t);
      for (int i = 1; i <= kScrapes; ++i) {
        metrics.on_request("GET", code, std::chrono::milliseconds(1));
        const std::string line = "hostagent_http_requests_total{method=\"GET\",code=\"" + std::to_string(code) +
                                 "\"} " + std::to_string(i) + "\n";
        if (metrics.render(service).find(line) == std::string::npos) ++stale;
      }
    });
  }
  for (auto& scraper : scrapers) scraper.join();
  CHECK(stale == 0);
  CHECK(most_at_once == 1);
  CHECK(computations < kThreads * kScrapes);  // shared: fewer computations than scrapes
  const std::string summary =
      std::to_string(kThreads * kScrapes) + " scrapes, " + std::to_string(computations.load()) + " computations";
  MESSAGE(summary);
}

}  // namespace
}  // namespace hostagent::testing
