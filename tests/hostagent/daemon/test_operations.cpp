// The service's API-facing members on test:/// and the simulated Vela 2 host: operations followed
// from queued to their end, idempotent creates by request id within a run (test_request_ids: across
// deletes and restarts), the event feed, and the reads (usage, domain XML, NCCL topology, device
// health, readiness).
#include <doctest/doctest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <thread>

#include "daemon_fixture.hpp"
#include "exec_commands.hpp"
#include "hostagent/numa/capacity.hpp"

namespace hostagent::testing {
namespace {

// Collects every event the service publishes while it lives.
class EventLog {
 public:
  explicit EventLog(service::VmService& service)
      : service_(service), id_(service.subscribe([this](const service::ServiceEvent& event) {
          std::lock_guard lock(mutex_);
          events_.push_back(event);
        })) {}
  ~EventLog() { service_.unsubscribe(id_); }
  EventLog(const EventLog&) = delete;
  EventLog& operator=(const EventLog&) = delete;

  std::vector<service::ServiceEvent> events() {
    std::lock_guard lock(mutex_);
    return events_;
  }

  // Polls for up to 10 s: libvirt delivers lifecycle events on its own thread, so the event of a
  // step may land after the operation that caused it has ended.
  bool eventually(const std::function<bool(const service::ServiceEvent&)>& match) {
    for (int i = 0; i < 1000; ++i) {
      for (const auto& event : events()) {
        if (match(event)) return true;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    return false;
  }

 private:
  service::VmService& service_;
  std::mutex mutex_;
  std::vector<service::ServiceEvent> events_;
  uint64_t id_;
};

}  // namespace

TEST_CASE("a create answers at once with an operation that runs step by step to its end") {
  DaemonFixture fixture;
  auto service = started(fixture);
  EventLog log(*service);
  auto begun = service->begin_create(fixture.request("op-0", kOneGpu));
  REQUIRE_MESSAGE(begun.ok(), begun.error().message);
  CHECK(begun->kind == "create");
  CHECK(begun->vm == "op-0");
  CHECK(begun->template_name == kOneGpu);
  CHECK(!begun->submitted_at.empty());

  const auto ended = wait_for(*service, begun->id);
  CHECK(ended.state == "succeeded");
  CHECK_FALSE(ended.error.has_value());
  // disk, seed, prepare_devices, define, start and commit: the fixture's request has a boot image,
  // and the template (base-h100's) has cloud-init user data for the seed.
  CHECK(ended.step == "commit");
  CHECK(ended.step_count == 6);
  CHECK(ended.step_number == ended.step_count);
  CHECK(!ended.finished_at.empty());
  CHECK(ended.duration_seconds > 0);

  // The operation's events came in order, each step once, numbered 1..6.
  std::vector<int> steps;
  std::vector<std::string> states;
  bool devices_held = false;
  for (const auto& event : log.events()) {
    if (event.kind == service::ServiceEvent::Kind::operation && event.operation->id == begun->id) {
      states.push_back(event.operation->state);
      // A step's event, and its phase's ending (the timeline) with the same step number.
      const int step = event.operation->step_number;
      if (event.operation->state == "running" && step > 0 && (steps.empty() || steps.back() != step)) {
        steps.push_back(step);
      }
    }
    if (event.kind == service::ServiceEvent::Kind::device && event.vm == "op-0" && event.held) {
      devices_held = !event.devices.empty();
    }
  }
  CHECK(steps == std::vector<int>{1, 2, 3, 4, 5, 6});
  REQUIRE(!states.empty());
  CHECK(states.front() == "queued");
  CHECK(states.back() == "succeeded");
  CHECK(devices_held);
  CHECK(log.eventually([](const service::ServiceEvent& event) {
    return event.kind == service::ServiceEvent::Kind::vm && event.vm == "op-0" && event.vm_state == "running";
  }));

  auto listed = service->operations();
  REQUIRE(!listed.empty());
  CHECK(listed.front().id == begun->id);
}

TEST_CASE("a failed operation says why, and a delete releases the devices it held") {
  DaemonFixture fixture;
  auto service = started(fixture);
  auto create = service->begin_create(fixture.request("gone-0", kOneGpu));
  REQUIRE(create.ok());
  REQUIRE(wait_for(*service, create->id).state == "succeeded");

  EventLog log(*service);
  auto removal = service->begin_delete("gone-0");
  REQUIRE_MESSAGE(removal.ok(), removal.error().message);
  const auto deleted = wait_for(*service, removal->id);
  CHECK(deleted.state == "succeeded");
  bool released = false;
  for (const auto& event : log.events()) {
    if (event.kind == service::ServiceEvent::Kind::device && event.vm == "gone-0" && !event.held) released = true;
  }
  CHECK(released);

  // Vela 2 has eight GPUs: of nine 1-GPU creates, one does not fit.
  std::vector<std::string> ids;
  for (int i = 0; i < 9; ++i) {
    auto begun = service->begin_create(fixture.request("fill-" + std::to_string(i), kOneGpu));
    REQUIRE(begun.ok());
    ids.push_back(begun->id);
  }
  int failed = 0;
  for (const auto& id : ids) {
    const auto ended = wait_for(*service, id);
    if (ended.state != "failed") continue;
    ++failed;
    REQUIRE(ended.error.has_value());
    CHECK(ended.error->code == ErrorCode::does_not_fit);
  }
  CHECK(failed == 1);
}

TEST_CASE("begin_ calls refuse what they can tell at once, before any operation exists") {
  DaemonFixture fixture;
  auto service = started(fixture);
  auto relative = fixture.request("vm", kOneGpu);
  relative.boot_image = "images/x.qcow2";
  auto bad_path = service->begin_create(relative);
  REQUIRE_FALSE(bad_path.ok());
  CHECK(bad_path.error().code == ErrorCode::invalid_argument);
  CHECK(bad_path.error().field == "boot_image");
  for (const auto& result : {service->begin_start("nobody"), service->begin_stop("nobody", true),
                             service->begin_reboot("nobody"), service->begin_delete("nobody")}) {
    REQUIRE_FALSE(result.ok());
    CHECK(result.error().code == ErrorCode::not_found);
  }
  CHECK(service->operations().empty());
  auto unknown = service->operation("op-999");
  REQUIRE_FALSE(unknown.ok());
  CHECK(unknown.error().code == ErrorCode::not_found);
}

// Issue 43, defects 14 and 17: a MAC another VM has was given twice; a UUID another VM has, or a
// claim the host cannot read, was answered 202 and then failed, where the API documents 409 and 400.
TEST_CASE("a create whose UUID or MACs another VM has, or whose claim the host cannot read, is refused at once") {
  DaemonFixture fixture;
  auto service = started(fixture);
  auto first = fixture.request("ident-a", kOneGpu);
  first.uuid = "2b0d7c1e-3f4a-4b5c-8d6e-7f8091a2b3c4";
  first.macs = {MacAddress::parse("52:54:00:ab:cd:ef", "macs[0]").value()};
  REQUIRE(create_vm(*service, first).ok());

  const auto refused = [&](const service::CreateVmRequest& request, ErrorCode code, const std::string& field) {
    const auto operations = service->operations().size();
    auto begun = service->begin_create(request);
    REQUIRE_FALSE(begun.ok());
    CHECK(begun.error().code == code);
    CHECK(begun.error().field == field);
    CHECK(service->operations().size() == operations);  // nothing queued
    return begun.error().message;
  };
  auto same_uuid = fixture.request("ident-b", kOneGpu);
  same_uuid.uuid = first.uuid;
  CHECK(refused(same_uuid, ErrorCode::conflict, "uuid") ==
        "uuid: 2b0d7c1e-3f4a-4b5c-8d6e-7f8091a2b3c4 is ident-a's: a VM's UUID names one VM");
  auto same_mac = fixture.request("ident-b", kOneGpu);
  same_mac.macs = {MacAddress::parse("52:54:00:AB:CD:EF", "macs[0]").value()};  // in either case, one MAC
  CHECK(refused(same_mac, ErrorCode::conflict, "macs[0]") ==
        "macs[0]: 52:54:00:ab:cd:ef is ident-a's: a MAC names one NIC; choose another");
  auto twice = fixture.request("ident-b", kTwoGpus);
  twice.macs = {MacAddress::parse("52:54:00:00:00:0a", "macs[0]").value(),
                MacAddress::parse("52:54:00:00:00:0A", "macs[1]").value()};
  CHECK(refused(twice, ErrorCode::invalid_argument, "macs[1]") ==
        "macs[1]: 52:54:00:00:00:0a is macs[0] too: each VF needs a MAC of its own");
  REQUIRE(delete_vm(*service, "ident-a").ok());
  // Gone, they are free again.
  CHECK(create_vm(*service, same_uuid).ok());
  REQUIRE(delete_vm(*service, "ident-b").ok());
}

// A request's boot image becomes the backing file of the guest's disk: only files in
// images.directories may, whatever the path or its links say, and the VM records the real file.
TEST_CASE("a create's boot image must lie in images.directories, and the record keeps the file it resolved to") {
  DaemonFixture fixture;
  auto service = started(fixture);
  const auto images = fixture.config().image_directories.front();
  const auto held_before = service->usage().held.size();
  const auto refused = [&](const std::string& path) {
    auto request = fixture.request("img-0", kOneGpu);
    request.boot_image = path;
    auto begun = service->begin_create(request);
    REQUIRE_FALSE(begun.ok());
    CHECK(begun.error().code == ErrorCode::invalid_argument);
    CHECK(begun.error().field == "boot_image");
    return begun.error().message;
  };
  CHECK(refused("/etc/passwd").find("outside the allowed directories; files may lie in " + images.string()) !=
        std::string::npos);
  std::filesystem::create_symlink("/etc/passwd", images / "passwd.raw");
  const auto linked = refused((images / "passwd.raw").string());
  CHECK(linked.find("leads outside " + images.string() + " (a symlink out of it)") != std::string::npos);
  CHECK(linked.find("/etc/passwd") == std::string::npos);
  CHECK(refused((images / "missing.qcow2").string()).find("does not exist") != std::string::npos);
  CHECK(service->operations().empty());  // refused before any operation existed
  CHECK(service->usage().held.size() == held_before);

  // Through a link inside: accepted, and the record names the file, not the link.
  const auto real = std::filesystem::canonical(fixture.request("img-0", kOneGpu).boot_image);
  std::filesystem::create_symlink(real, images / "current.raw");
  auto request = fixture.request("img-0", kOneGpu);
  request.boot_image = (images / "current.raw").string();
  auto vm = create_vm(*service, request);
  REQUIRE_MESSAGE(vm.ok(), vm.error().message);
  REQUIRE(vm->record.has_value());
  CHECK(vm->record->boot_image == real.string());
  REQUIRE(delete_vm(*service, "img-0").ok());
}

// hostagentd --exec is an edge too: it builds the checked names from its words, so a bad one is
// refused there, naming the field, before the service is asked anything.
TEST_CASE("--exec refuses a bad VM or template name, naming the field") {
  DaemonFixture fixture;
  auto service = started(fixture);
  for (const auto& refusal :
       std::vector<std::pair<std::string, std::string>>{{"create ../etc gx3-16x128x1h100", "name"},
                                                        {"create vm ../t", "template"},
                                                        {"show no/such", "name"},
                                                        {"stop .hidden force", "name"},
                                                        {"delete a;b", "name"}}) {
    CAPTURE(refusal.first);  // not a structured binding: clang's CAPTURE cannot take one
    const auto refused = cli::run_exec_command(*service, refusal.first);
    REQUIRE_FALSE(refused.ok());
    CHECK(refused.error().field == refusal.second);
    CHECK(refused.error().code == ErrorCode::invalid_argument);
  }
  CHECK(service->operations().empty());
  const auto unknown_verb = cli::run_exec_command(*service, "frob a/b");
  REQUIRE_FALSE(unknown_verb.ok());
  CHECK(unknown_verb.error().message.find("unknown command") != std::string::npos);
  const auto shown = cli::run_exec_command(*service, "show nobody");
  REQUIRE_FALSE(shown.ok());
  CHECK(shown.error().code == ErrorCode::not_found);
}

TEST_CASE("a create replayed with its request id gets the same operation, and a different one a conflict") {
  DaemonFixture fixture;
  auto service = started(fixture);
  auto request = fixture.request("idem-0", kOneGpu);
  request.request_id = "req-1";
  auto first = service->begin_create(request);
  REQUIRE(first.ok());
  auto replay = service->begin_create(request);
  REQUIRE(replay.ok());
  CHECK(replay->id == first->id);

  auto other_name = request;
  other_name.name = "idem-1";
  auto conflict = service->begin_create(other_name);
  REQUIRE_FALSE(conflict.ok());
  CHECK(conflict.error().code == ErrorCode::conflict);
  CHECK(conflict.error().message.find("idem-0") != std::string::npos);

  auto other_template = request;
  other_template.template_name = kTwoGpus;
  CHECK(service->begin_create(other_template).error().code == ErrorCode::conflict);
  REQUIRE(wait_for(*service, first->id).state == "succeeded");
  const auto ended_replay = service->begin_create(request);
  REQUIRE(ended_replay.ok());
  CHECK(ended_replay->id == first->id);
  CHECK(ended_replay->state == "succeeded");
  REQUIRE(delete_vm(*service, "idem-0").ok());
}

TEST_CASE("usage, domain XML, NCCL topology and readiness describe the running VM") {
  DaemonFixture fixture;
  auto service = started(fixture);
  CHECK(service->status().ready);
  auto vm = create_vm(*service, fixture.request("read-0", kOneGpu));
  REQUIRE_MESSAGE(vm.ok(), vm.error().message);

  const auto usage = service->usage();
  REQUIRE(usage.host != nullptr);
  CHECK(usage.host->numa_nodes.size() == 2);
  REQUIRE(usage.held.size() == 1);
  CHECK(usage.held.front().devices == vm->record->allocation.devices);
  CHECK(service->templates().count(kOneGpu) == 1);

  auto xml = service->domain_xml("read-0");
  REQUIRE_MESSAGE(xml.ok(), xml.error().message);
  CHECK(xml->find("<name>read-0</name>") != std::string::npos);

  auto topology = service->nccl_topology("read-0");
  REQUIRE_MESSAGE(topology.ok(), topology.error().message);
  // NCCL's file, with the GPU (class 0x0302) at its guest bus id.
  CHECK(topology->find("<system") != std::string::npos);
  CHECK(topology->find("class=\"0x030200\"") != std::string::npos);

  // The topology lives in the domain's metadata: a restarted service hands out the same file.
  service.reset();
  service = started(fixture);
  auto again = service->nccl_topology("read-0");
  REQUIRE(again.ok());
  CHECK(*again == *topology);
  CHECK(service->nccl_topology("nobody").error().code == ErrorCode::not_found);
  REQUIRE(delete_vm(*service, "read-0").ok());
}

// What a scrape reads instead of copying the VMs: counts that agree with list_vms(), and a version
// of what is held that moves when a VM takes or gives something, and only then.
TEST_CASE("status counts VMs by state as list_vms words them, and usage's version moves with what is held") {
  DaemonFixture fixture;
  auto service = started(fixture);
  const auto counted = [&] {
    std::map<std::string, int> by_state;
    for (const auto& vm : service->list_vms()) ++by_state[vm.state];
    return by_state;
  };
  CHECK(service->status().vms_by_state == counted());  // libvirt's own "test" domain, running
  const auto empty = service->usage().version;

  REQUIRE(create_vm(*service, fixture.request("count-0", kOneGpu)).ok());
  const auto holding = service->usage();
  CHECK(holding.version != empty);
  CHECK(holding.held.size() == 1);
  CHECK(service->status().vms_by_state == std::map<std::string, int>{{"running", 2}});

  REQUIRE(stop_vm(*service, "count-0", true).ok());
  CHECK(service->status().vms_by_state == counted());
  CHECK(service->status().vms_by_state.at("shut_off") == 1);
  CHECK(service->usage().version == holding.version);  // stopped, it holds what it held

  REQUIRE(delete_vm(*service, "count-0").ok());
  const auto released = service->usage();
  CHECK(released.version != holding.version);
  CHECK(released.held.empty());
  CHECK(service->status().vms_by_state == counted());
}

// A control plane polls the list; the service builds it again only when something listed moved.
TEST_CASE("list_vms keeps its list while nothing changed, and its version moves with a VM's life") {
  DaemonFixture fixture;
  auto service = started(fixture);
  const auto first = service->list_vms();
  const auto again = service->list_vms();
  CHECK(again.version == first.version);
  CHECK(again.vms == first.vms);  // the same list, not built again

  REQUIRE(create_vm(*service, fixture.request("list-0", kOneGpu)).ok());
  const auto created = service->list_vms();
  CHECK(created.version != first.version);
  const auto listed = [](const service::VmList& list, const std::string& name) -> std::optional<service::VmView> {
    for (const auto& vm : list) {
      if (vm.name == name) return vm;
    }
    return std::nullopt;
  };
  REQUIRE(listed(created, "list-0"));
  CHECK(listed(created, "list-0")->state == "running");

  REQUIRE(stop_vm(*service, "list-0", true).ok());
  const auto stopped = service->list_vms();
  CHECK(stopped.version != created.version);
  REQUIRE(listed(stopped, "list-0"));
  CHECK(listed(stopped, "list-0")->state == "shut_off");

  REQUIRE(delete_vm(*service, "list-0").ok());
  const auto deleted = service->list_vms();
  CHECK(deleted.version != stopped.version);
  CHECK_FALSE(listed(deleted, "list-0"));
  CHECK(deleted.size() == first.size());
}

TEST_CASE("device health is read from the simulated host's sysfs") {
  DaemonFixture fixture;
  auto service = started(fixture);
  auto health = service->device_health();
  REQUIRE_MESSAGE(health.ok(), health.error().message);
  REQUIRE(*health != nullptr);
  int gpus = 0;
  for (const auto& device : **health) {
    CHECK(device.present);
    if (device.role == numa::PciRole::gpu) ++gpus;
  }
  CHECK(gpus == 8);
}

TEST_CASE("device health is kept and read again in the background: a link that drops shows without a read") {
  DaemonFixture fixture;
  const auto tree = fixture.own_host_tree();
  auto clock = std::make_shared<ManualClock>();
  auto service = started(fixture, nullptr, clock);
  auto before = service->device_health();
  REQUIRE_MESSAGE(before.ok(), before.error().message);
  const auto& devices = **before;
  const auto gpu = std::find_if(devices.begin(), devices.end(),
                                [](const numa::DeviceHealth& d) { return d.role == numa::PciRole::gpu; });
  REQUIRE(gpu != devices.end());
  CHECK_FALSE(gpu->link_degraded);
  // The link retrains at x4 (the simulated host's tree, as the kernel would show it).
  const auto width = tree / "sys" / "bus" / "pci" / "devices" / gpu->address.to_string() / "current_link_width";
  REQUIRE(std::filesystem::exists(width));
  write_text_file(width, "4\n");
  REQUIRE(clock->advance_and_settle(fixture.device_health_interval));
  const auto now = service->device_health();
  REQUIRE(now.ok());
  CHECK(*now != *before);  // a new reading
  bool degraded = false;
  for (const auto& device : **now) {
    if (device.address == gpu->address) degraded = device.link_degraded;
  }
  CHECK(degraded);
}

TEST_CASE(
    "capacity counts the kernel's free hugepages as last read, lower than the accounting when pages went elsewhere") {
  DaemonFixture fixture;
  const auto tree = fixture.own_host_tree();
  auto clock = std::make_shared<ManualClock>();
  auto service = started(fixture, nullptr, clock);
  const auto node0_free = [&] {
    const auto usage = service->usage();
    const auto capacity = numa::capacity(*usage.host, usage.held, usage.policy);
    for (const auto& pool : capacity.nodes.at(0).hugepages) {
      if (pool.page_size_bytes == 1ULL << 30) return pool.free;
    }
    FAIL("node 0 has no 1 GiB pool");
    return uint64_t{0};
  };
  const uint64_t before = node0_free();
  REQUIRE(before > 3);
  // Something outside hostagent (a process on hugetlbfs) took all but 3 of node 0's 1 GiB pages.
  const auto file =
      tree / "sys" / "devices" / "system" / "node" / "node0" / "hugepages" / "hugepages-1048576kB" / "free_hugepages";
  REQUIRE(std::filesystem::exists(file));
  write_text_file(file, "3\n");
  CHECK(node0_free() == before);  // read with the devices' health, at its next reading
  REQUIRE(clock->advance_and_settle(fixture.device_health_interval));
  CHECK(node0_free() == 3);
}

TEST_CASE(
    "what the daemon reads of the host is the reader it was given: free hugepages from a reader, no sysfs "
    "written") {
  DaemonFixture fixture;
  std::atomic<uint64_t> reads{0};
  fixture.change_readers = [&reads](daemon::HostReaders& readers) {
    readers.free_hugepages = [sysfs = readers.free_hugepages, &reads](const numa::HostModel& host) {
      ++reads;
      auto free = sysfs(host);
      if (free.ok()) {
        for (auto& [pool, pages] : *free) {
          if (pool.first == 0 && pool.second == 1ULL << 30) pages = 2;  // all but two taken outside hostagent
        }
      }
      return free;
    };
  };
  auto service = started(fixture, nullptr, std::make_shared<ManualClock>());
  const auto usage = service->usage();
  const auto capacity = numa::capacity(*usage.host, usage.held, usage.policy);
  const auto& pools = capacity.nodes.at(0).hugepages;
  const auto gib =
      std::find_if(pools.begin(), pools.end(), [](const auto& pool) { return pool.page_size_bytes == 1ULL << 30; });
  REQUIRE(gib != pools.end());
  CHECK(gib->free == 2);
  CHECK(reads >= 1);
}

TEST_CASE("a console log is asked of a VM hostagent made, and a test:/// guest's is empty") {
  DaemonFixture fixture;
  auto service = started(fixture);
  auto vm = create_vm(*service, fixture.request("quiet", kOneGpu));
  REQUIRE_MESSAGE(vm.ok(), vm.error().message);
  const auto none = service->console_log(vm_name("quiet"), 10);
  REQUIRE_MESSAGE(none.ok(), none.error().message);
  CHECK(none->text.empty());
  CHECK(none->whole);
  const auto unknown = service->console_log(vm_name("nobody"), 10);
  REQUIRE_FALSE(unknown.ok());
  CHECK(unknown.error().code == ErrorCode::not_found);
}

}  // namespace hostagent::testing
