// numa/affinity: the relation of two host PCI functions (see the header).
#include "hostagent/numa/affinity.hpp"

#include <algorithm>
#include <set>

namespace hostagent::numa {
namespace {

std::set<PciAddress> switches_above(const HostModel& model, const PciFunction& f) {
  std::set<PciAddress> out;
  for (const auto& bridge : f.bridge_chain) {
    const auto* b = model.find(bridge);
    if (b != nullptr && b->role == PciRole::switch_upstream) out.insert(bridge);
  }
  return out;
}

}  // namespace

Affinity affinity(const HostModel& model, const PciFunction& a, const PciFunction& b) {
  if (a.address == b.address) return Affinity::self;
  const auto sa = switches_above(model, a);
  const auto sb = switches_above(model, b);
  const bool share = std::any_of(sa.begin(), sa.end(), [&](const auto& s) { return sb.count(s) != 0; });
  if (share) return Affinity::same_switch;
  if (!a.numa_node || !b.numa_node) return Affinity::unknown;
  return *a.numa_node == *b.numa_node ? Affinity::same_node : Affinity::across_nodes;
}

const char* affinity_label(Affinity affinity) {
  switch (affinity) {
    case Affinity::self:
      return "X";
    case Affinity::same_switch:
      return "SW";
    case Affinity::same_node:
      return "NODE";
    case Affinity::across_nodes:
      return "SYS";
    case Affinity::unknown:
      return "?";
  }
  return "?";
}

}  // namespace hostagent::numa
