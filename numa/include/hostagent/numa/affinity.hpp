// numa/affinity: how two PCI functions reach each other, in the words of `nvidia-smi topo -m`,
// which operators read and which NCCL's path types (src/graph/topo.h, PATH_PIX..PATH_SYS) follow:
//   X     the function itself
//   PIX   through one PCIe switch: both sit below the same nearest switch
//   PXB   through several switches, no host bridge: they share a switch further up (a GPU under a
//         leaf switch and a NIC on the leaf's parent switch, or two leaves below one parent)
//   PHB   through one PCIe host bridge (root complex), no switch in common
//   NODE  through the interconnect between host bridges of one NUMA node
//   SYS   across the inter-socket link (QPI/UPI/xGMI)
// NCCL has no NODE: it folds NODE into PHB (its CPU node stands for every host bridge of a node).
// hostagentctl's topology report and JSON print it, placement pairs NICs by it, and the guest check
// (verify/) holds the booted guest to it.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "hostagent/numa/host_model.hpp"

namespace hostagent::numa {

// Ordered nearest first: a smaller code is a shorter path.
enum class Affinity { self, pix, pxb, phb, node, sys, unknown };

// A host bridge's root bus: pci0000:15 in sysfs is domain 0, bus 0x15.
struct RootBus {
  uint32_t domain = 0;
  int bus = 0;
  auto operator<=>(const RootBus&) const = default;  // NOLINT(modernize-use-nullptr): clang-tidy 14 misreads <=>
};

// What the relation is computed from; the host model and the guest's sysfs each give one.
struct PciReach {
  PciAddress address;
  std::vector<PciAddress> switches;  // upstream ports of the switches above it, nearest first
  RootBus root;
  std::optional<int> numa_node;
};

Affinity relate(const PciReach& a, const PciReach& b);

// The host's side: switches from f's bridge_chain (the upstream ports numa's model builder tells),
// the root bus that of its root port (the chain's last bridge), or its own on a root bus.
PciReach reach_of(const HostModel& model, const PciFunction& f);

Affinity affinity(const HostModel& model, const PciFunction& a, const PciFunction& b);

// The functions the matrices relate, as nvidia-smi's does: the GPUs, then the NIC PFs (a VF shares
// its PF's place), each in address order.
std::vector<const PciFunction*> affinity_subjects(const HostModel& model);

// "X", "PIX", "PXB", "PHB", "NODE", "SYS", "?".
const char* affinity_label(Affinity affinity);
// One line for a legend: "through one PCIe switch", ...
const char* affinity_meaning(Affinity affinity);
// The codes in order, unknown last: what a legend lists.
inline constexpr Affinity kAffinityCodes[] = {Affinity::self, Affinity::pix, Affinity::pxb,    Affinity::phb,
                                              Affinity::node, Affinity::sys, Affinity::unknown};

}  // namespace hostagent::numa
