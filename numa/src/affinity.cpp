// numa/affinity: the relation of two PCI functions (see the header).
#include "hostagent/numa/affinity.hpp"

#include <algorithm>

namespace hostagent::numa {

Affinity relate(const PciReach& a, const PciReach& b) {
  if (a.address == b.address) return Affinity::self;
  if (!a.switches.empty() && !b.switches.empty() && a.switches.front() == b.switches.front()) return Affinity::pix;
  const bool share = std::any_of(a.switches.begin(), a.switches.end(), [&](const PciAddress& s) {
    return std::find(b.switches.begin(), b.switches.end(), s) != b.switches.end();
  });
  if (share) return Affinity::pxb;
  // Without both nodes nothing further can be told: two root buses might be one socket's or two.
  if (!a.numa_node || !b.numa_node) return Affinity::unknown;
  if (*a.numa_node != *b.numa_node) return Affinity::sys;
  return a.root == b.root ? Affinity::phb : Affinity::node;
}

PciReach reach_of(const HostModel& model, const PciFunction& f) {
  PciReach out;
  out.address = f.address;
  out.numa_node = f.numa_node;
  for (const auto& bridge : f.bridge_chain) {
    const auto* b = model.find(bridge);
    if (b != nullptr && b->role == PciRole::switch_upstream) out.switches.push_back(bridge);
  }
  const PciAddress& top = f.bridge_chain.empty() ? f.address : f.bridge_chain.back();
  out.root = RootBus{top.domain, top.bus};
  return out;
}

Affinity affinity(const HostModel& model, const PciFunction& a, const PciFunction& b) {
  return relate(reach_of(model, a), reach_of(model, b));
}

std::vector<const PciFunction*> affinity_subjects(const HostModel& model) {
  std::vector<const PciFunction*> out;
  for (const auto& f : model.pci_devices) {
    if (f.role == PciRole::gpu) out.push_back(&f);
  }
  for (const auto& f : model.pci_devices) {
    if (f.role == PciRole::nic && !f.physfn) out.push_back(&f);
  }
  return out;
}

const char* affinity_label(Affinity affinity) {
  switch (affinity) {
    case Affinity::self:
      return "X";
    case Affinity::pix:
      return "PIX";
    case Affinity::pxb:
      return "PXB";
    case Affinity::phb:
      return "PHB";
    case Affinity::node:
      return "NODE";
    case Affinity::sys:
      return "SYS";
    case Affinity::unknown:
      return "?";
  }
  return "?";
}

const char* affinity_meaning(Affinity affinity) {
  switch (affinity) {
    case Affinity::self:
      return "self";
    case Affinity::pix:
      return "through one PCIe switch (the nearest switch of both)";
    case Affinity::pxb:
      return "through several PCIe switches, no host bridge";
    case Affinity::phb:
      return "through one PCIe host bridge (root complex)";
    case Affinity::node:
      return "between host bridges of one NUMA node";
    case Affinity::sys:
      return "across the inter-socket link";
    case Affinity::unknown:
      return "NUMA node unknown";
  }
  return "?";
}

}  // namespace hostagent::numa
