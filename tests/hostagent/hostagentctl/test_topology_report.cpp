// The human view of hostagentctl topology: golden text per simulated host (the affinity rules are
// tested with numa, tests/numa/test_affinity.cpp).
#include <doctest/doctest.h>

#include "hostagent/simhost/sim_host.hpp"
#include "simulated_hosts.hpp"
#include "test_support.hpp"
#include "topology_report.hpp"

namespace hostagent::ctl {
namespace {

TEST_CASE("golden topology report for every simulated host") {
  for (const auto& name : simhost::builtin_host_names()) {
    CAPTURE(name);
    const auto diff =
        testing::compare_golden("topology/" + name + ".txt", render_topology_report(testing::discover_shared(name)));
    CHECK_MESSAGE(diff.empty(), diff);
  }
}

TEST_CASE("a link trained below its capability is flagged in the report") {
  const auto report = render_topology_report(testing::discover_shared("quirks"));
  CHECK(report.find("8 GT/s x8 (DEGRADED: capable of 16 GT/s x16)") != std::string::npos);
  CHECK(report.find("no CPUs") != std::string::npos);
}

}  // namespace
}  // namespace hostagent::ctl
