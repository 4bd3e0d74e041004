// numa/affinity: the relation the topology report prints and the guest check holds a guest to.
#include <doctest/doctest.h>

#include "hostagent/discovery/discovery.hpp"
#include "hostagent/numa/affinity.hpp"
#include "hostagent/simhost/sim_host.hpp"
#include "test_support.hpp"

namespace hostagent::numa {
namespace {

HostModel discover_vela1(const testing::TempDir& dir) {
  const auto spec = simhost::builtin_host("vela1");
  REQUIRE(spec.ok());
  REQUIRE(simhost::write_sysfs_tree(*spec, dir.path()).ok());
  auto model = discover_from_sysfs(dir.path());
  REQUIRE_MESSAGE(model.ok(), model.error().message);
  return std::move(*model);
}

TEST_CASE("affinity: a shared switch, then the NUMA node, then across nodes") {
  testing::TempDir dir;
  const auto model = discover_vela1(dir);
  std::vector<const PciFunction*> gpus, nics;
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

PciFunction function(uint8_t bus, PciRole role, std::vector<PciAddress> chain) {
  PciFunction f;
  f.address = PciAddress{0, bus, 0, 0};
  f.role = role;
  f.numa_node = 0;
  f.bridge_chain = std::move(chain);
  return f;
}

TEST_CASE("affinity: two GPUs under different switches below one parent switch share the parent") {
  // root port 01 -> parent switch 02 (up) -> 03 (down) -> child switch 04 (up) -> 05 (down) -> GPU 06
  //                                       -> 07 (down) -> child switch 08 (up) -> 09 (down) -> GPU 0a
  const PciAddress root{0, 1, 0, 0}, parent{0, 2, 0, 0}, child_a{0, 4, 0, 0}, child_b{0, 8, 0, 0};
  HostModel model;
  model.pci_devices = {
      function(1, PciRole::root_port, {}),
      function(2, PciRole::switch_upstream, {root}),
      function(4, PciRole::switch_upstream, {PciAddress{0, 3, 0, 0}, parent, root}),
      function(6, PciRole::gpu, {PciAddress{0, 5, 0, 0}, child_a, PciAddress{0, 3, 0, 0}, parent, root}),
      function(8, PciRole::switch_upstream, {PciAddress{0, 7, 0, 0}, parent, root}),
      function(0x0a, PciRole::gpu, {PciAddress{0, 9, 0, 0}, child_b, PciAddress{0, 7, 0, 0}, parent, root}),
      function(0x0b, PciRole::gpu, {PciAddress{0, 0x0c, 0, 0}}),  // another root port: only the node is shared
  };
  const auto& gpu_a = model.pci_devices[3];
  const auto& gpu_b = model.pci_devices[5];
  const auto& lone = model.pci_devices[6];
  CHECK(affinity(model, gpu_a, gpu_b) == Affinity::same_switch);
  CHECK(affinity(model, gpu_a, lone) == Affinity::same_node);
  model.pci_devices[6].numa_node = 1;
  CHECK(affinity(model, gpu_a, model.pci_devices[6]) == Affinity::across_nodes);
}

TEST_CASE("affinity without a NUMA node is unknown, not guessed") {
  HostModel model;
  PciFunction a, b;
  a.address = PciAddress{0, 1, 0, 0};
  b.address = PciAddress{0, 2, 0, 0};
  a.numa_node = 0;
  model.pci_devices = {a, b};
  CHECK(affinity(model, a, b) == Affinity::unknown);
  CHECK(std::string(affinity_label(Affinity::unknown)) == "?");
}

}  // namespace
}  // namespace hostagent::numa
