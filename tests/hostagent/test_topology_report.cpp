// The human view of hostagentctl topology: golden text per simulated host, and the affinity rules.
#include <doctest/doctest.h>

#include "hostagent/simhost/sim_host.hpp"
#include "simulated_hosts.hpp"
#include "test_support.hpp"
#include "topology_report.hpp"

namespace hostagent::ctl {
namespace {

using numa::PciRole;

TEST_CASE("golden topology report for every simulated host") {
  for (const auto& name : simhost::builtin_host_names()) {
    CAPTURE(name);
    testing::TempDir dir;
    const auto diff = testing::compare_golden("topology/" + name + ".txt",
                                              render_topology_report(testing::discover_simulated(name, dir)));
    CHECK_MESSAGE(diff.empty(), diff);
  }
}

TEST_CASE("affinity: a shared switch, then the NUMA node, then across nodes") {
  testing::TempDir dir;
  const auto model = testing::discover_simulated("vela1", dir);
  std::vector<const numa::PciFunction*> gpus, nics;
  for (const auto& f : model.pci_devices) {
    if (f.role == PciRole::gpu) gpus.push_back(&f);
    if (f.role == PciRole::nic && !f.physfn) nics.push_back(&f);
  }
  REQUIRE(gpus.size() == 8);
  for (const auto* gpu : gpus) {
    CHECK(affinity(model, *gpu, *gpu) == Affinity::self);
    int same_switch = 0;
    for (const auto* nic : nics) {
      const auto a = affinity(model, *gpu, *nic);
      if (gpu->pcie_switch == nic->pcie_switch) {
        CHECK(a == Affinity::same_switch);
        ++same_switch;
      } else {
        CHECK(a == (gpu->numa_node == nic->numa_node ? Affinity::same_node : Affinity::across_nodes));
      }
    }
    CHECK(same_switch == 2);  // both ports of the ConnectX-6 Dx under its switch
  }
}

TEST_CASE("affinity without a NUMA node is unknown, not guessed") {
  numa::HostModel model;
  numa::PciFunction a, b;
  a.address = numa::PciAddress{0, 1, 0, 0};
  b.address = numa::PciAddress{0, 2, 0, 0};
  a.numa_node = 0;
  model.pci_devices = {a, b};
  CHECK(affinity(model, a, b) == Affinity::unknown);
  CHECK(std::string(affinity_label(Affinity::unknown)) == "?");
}

TEST_CASE("a link trained below its capability is flagged in the report") {
  testing::TempDir dir;
  const auto report = render_topology_report(testing::discover_simulated("quirks", dir));
  CHECK(report.find("8 GT/s x8 (DEGRADED: capable of 16 GT/s x16)") != std::string::npos);
  CHECK(report.find("no CPUs") != std::string::npos);
}

}  // namespace
}  // namespace hostagent::ctl
