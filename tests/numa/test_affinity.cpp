// numa/affinity: the relation the topology report prints and the guest check holds a guest to.
#include <doctest/doctest.h>

#include "hostagent/numa/affinity.hpp"
#include "simulated_hosts.hpp"

namespace hostagent::numa {
namespace {

TEST_CASE("affinity: PIX under a shared switch, NODE across root complexes, SYS across nodes") {
  const auto model = testing::discover_shared("vela1");
  std::vector<const PciFunction*> gpus, nics;
  for (const auto& f : model.pci_devices) {
    if (f.role == PciRole::gpu) gpus.push_back(&f);
    if (f.role == PciRole::nic && !f.physfn) nics.push_back(&f);
  }
  REQUIRE(gpus.size() == 8);
  for (const auto* gpu : gpus) {
    CHECK(affinity(model, *gpu, *gpu) == Affinity::self);
    int pix = 0;
    for (const auto* nic : nics) {
      const auto a = affinity(model, *gpu, *nic);
      if (gpu->pcie_switch == nic->pcie_switch) {
        CHECK(a == Affinity::pix);
        ++pix;
      } else {
        // vela1 gives each switch a root complex of its own.
        CHECK(a == (gpu->numa_node == nic->numa_node ? Affinity::node : Affinity::sys));
      }
    }
    CHECK(pix == 2);  // both ports of the ConnectX-6 Dx under its switch
  }
  CHECK(affinity_subjects(model).size() == gpus.size() + nics.size());
}

PciFunction function(uint8_t bus, PciRole role, std::vector<PciAddress> chain) {
  PciFunction f;
  f.address = PciAddress{0, bus, 0, 0};
  f.role = role;
  f.numa_node = 0;
  f.bridge_chain = std::move(chain);
  return f;
}

TEST_CASE("affinity: a leaf switch below a top switch is PIX within the leaf and PXB through the top") {
  // root port 00:01 -> top switch 02 (up) -> 03 (down) -> GPU a 0x30
  //                                       -> 07 (down) -> leaf switch 08 (up) -> 09 (down) -> GPU b 0x0a
  //                                                                           -> 0c (down) -> HCA 0x0d
  const PciAddress root{0, 0, 1, 0}, top{0, 2, 0, 0}, leaf{0, 8, 0, 0};
  const PciAddress top_a{0, 3, 0, 0}, top_b{0, 7, 0, 0};
  HostModel model;
  model.pci_devices = {
      function(0, PciRole::root_port, {}),
      function(2, PciRole::switch_upstream, {root}),
      function(8, PciRole::switch_upstream, {top_b, top, root}),
      function(0x0a, PciRole::gpu, {PciAddress{0, 9, 0, 0}, leaf, top_b, top, root}),
      function(0x0d, PciRole::nic, {PciAddress{0, 0x0c, 0, 0}, leaf, top_b, top, root}),
      function(0x30, PciRole::gpu, {top_a, top, root}),
  };
  model.pci_devices[0].address = root;  // HostModel::find needs them in address order
  const auto& gpu_a = model.pci_devices[5];
  const auto& gpu_b = model.pci_devices[3];
  const auto& hca = model.pci_devices[4];
  CHECK(affinity(model, gpu_b, hca) == Affinity::pix);
  CHECK(affinity(model, gpu_a, hca) == Affinity::pxb);
  CHECK(affinity(model, gpu_a, gpu_b) == Affinity::pxb);
  CHECK(std::string(affinity_label(Affinity::pix)) == "PIX");
  CHECK(std::string(affinity_label(Affinity::pxb)) == "PXB");
}

TEST_CASE("affinity without a switch: PHB on one root bus, NODE across root buses of a node, SYS across nodes") {
  HostModel model;
  model.pci_devices = {
      function(0x17, PciRole::gpu, {PciAddress{0, 0x16, 1, 0}}),  // root bus 0x16
      function(0x18, PciRole::nic, {PciAddress{0, 0x16, 2, 0}}),  // root bus 0x16, another root port
      function(0x41, PciRole::gpu, {PciAddress{0, 0x40, 1, 0}}),  // root bus 0x40, same node
      function(0x02, PciRole::gpu, {}),                           // on root bus 0x02 itself
  };
  const auto& m = model.pci_devices;
  CHECK(affinity(model, m[0], m[1]) == Affinity::phb);
  CHECK(affinity(model, m[0], m[2]) == Affinity::node);
  CHECK(affinity(model, m[0], m[3]) == Affinity::node);
  model.pci_devices[2].numa_node = 1;
  CHECK(affinity(model, m[0], m[2]) == Affinity::sys);
  CHECK(std::string(affinity_label(Affinity::phb)) == "PHB");
}

TEST_CASE("affinity without a NUMA node is unknown unless a switch is shared") {
  HostModel model;
  PciFunction a, b;
  a.address = PciAddress{0, 1, 0, 0};
  b.address = PciAddress{0, 2, 0, 0};
  a.numa_node = 0;
  model.pci_devices = {a, b};
  CHECK(affinity(model, a, b) == Affinity::unknown);
  CHECK(std::string(affinity_label(Affinity::unknown)) == "?");
  PciReach ra{a.address, {PciAddress{0, 9, 0, 0}}, {}, std::nullopt};
  PciReach rb{b.address, {PciAddress{0, 9, 0, 0}}, {}, std::nullopt};
  CHECK(relate(ra, rb) == Affinity::pix);
}

}  // namespace
}  // namespace hostagent::numa
