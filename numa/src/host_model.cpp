#include "hostagent/numa/host_model.hpp"

#include <algorithm>

namespace hostagent::numa {

const char* to_string(PciRole role) {
  switch (role) {
    case PciRole::gpu:
      return "gpu";
    case PciRole::nvswitch:
      return "nvswitch";
    case PciRole::nic:
      return "nic";
    case PciRole::nvme:
      return "nvme";
    case PciRole::switch_upstream:
      return "switch-upstream";
    case PciRole::switch_downstream:
      return "switch-downstream";
    case PciRole::root_port:
      return "root-port";
    case PciRole::other:
      return "other";
  }
  return "other";
}

// pci_devices is sorted by address: discovery sorts before it hands the model out.
const PciFunction* HostModel::find(const PciAddress& address) const {
  const auto it = std::lower_bound(pci_devices.begin(), pci_devices.end(), address,
                                   [](const PciFunction& f, const PciAddress& a) { return f.address < a; });
  return it != pci_devices.end() && it->address == address ? &*it : nullptr;
}

LinkRate HostModel::link_rate(const PciFunction& f) const {
  LinkRate link{f.link.speed_gts, f.link.width};
  const auto* pf = f.physfn ? find(*f.physfn) : nullptr;
  if (pf != nullptr) {
    if (!link.speed_gts) link.speed_gts = pf->link.speed_gts;
    if (!link.width) link.width = pf->link.width;
  }
  if (!link.speed_gts) link.speed_gts = f.link.max_speed_gts;
  if (!link.width) link.width = f.link.max_width;
  return link;
}

std::optional<int> HostModel::distance(int from, int to) const {
  for (const auto& node : numa_nodes) {
    if (node.id != from) continue;
    const auto it = node.distances.find(to);
    if (it != node.distances.end()) return it->second;
  }
  return std::nullopt;
}

}  // namespace hostagent::numa
