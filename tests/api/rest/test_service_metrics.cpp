// ServiceMetrics::render under concurrent scrapes: one computation at a time, shared by the scrapes
// that arrived while the one before ran, and every answer computed after its own request arrived.
#include <doctest/doctest.h>

#include <atomic>
#include <string>
#include <thread>
#include <vector>

#include "fake_vm_service.hpp"
#include "hostagent/vmtemplates/vm_template.hpp"
#include "service_metrics.hpp"
#include "simulated_hosts.hpp"

namespace hostagent::testing {
namespace {

TEST_CASE("concurrent scrapes share computations, one at a time, and none answers with a count older than itself") {
  TempDir host_dir;
  FakeVmService service{discover_simulated("vela2", host_dir), {}};
  api::detail::ServiceMetrics metrics;
  std::atomic<int> computing{0};
  std::atomic<int> most_at_once{0};
  std::atomic<int> computations{0};
  service.on_list_vms([&] {
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
