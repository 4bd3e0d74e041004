#include "model_builder.hpp"

#include <algorithm>
#include <map>
#include <set>

namespace hostagent::discovery::detail {
namespace {

constexpr uint16_t kVendorNvidia = 0x10de;
constexpr uint16_t kVendorMellanox = 0x15b3;

numa::PciRole role_from_port_type(numa::PciePortType type) {
  switch (type) {
    case numa::PciePortType::root_port:
      return numa::PciRole::root_port;
    case numa::PciePortType::upstream:
      return numa::PciRole::switch_upstream;
    case numa::PciePortType::downstream:
      return numa::PciRole::switch_downstream;
    default:
      return numa::PciRole::other;
  }
}

// Without config space (an hwloc XML), a bridge's place in the tree tells its port type: PCIe allows
// only root port -> upstream port -> downstream ports -> (endpoint | upstream port of a nested switch).
// A bridge below a port with no bridges under it is a PCIe-to-PCI bridge (a BMC's VGA sits behind
// one on most servers), not a switch.
numa::PciRole role_from_structure(const numa::PciFunction* parent, bool has_bridge_children) {
  if (parent == nullptr) return numa::PciRole::root_port;
  if (parent->role == numa::PciRole::switch_upstream) return numa::PciRole::switch_downstream;
  if ((parent->role == numa::PciRole::root_port || parent->role == numa::PciRole::switch_downstream) &&
      has_bridge_children) {
    return numa::PciRole::switch_upstream;
  }
  return numa::PciRole::other;
}

using Index = std::map<PciAddress, size_t>;

Index index_of(const std::vector<numa::PciFunction>& functions) {
  Index index;
  for (size_t i = 0; i < functions.size(); ++i) index[functions[i].address] = i;
  return index;
}

const numa::PciFunction* parent_of(const std::vector<numa::PciFunction>& functions, const Index& index,
                                   const numa::PciFunction& function) {
  if (!function.parent) return nullptr;
  const auto it = index.find(*function.parent);
  return it == index.end() ? nullptr : &functions[it->second];
}

void assign_roles_and_chains(std::vector<numa::PciFunction>& functions, const Index& index) {
  // Parents must be classified before children: walk in depth order.
  std::vector<size_t> order(functions.size());
  for (size_t i = 0; i < functions.size(); ++i) {
    order[i] = i;
    functions[i].bridge_chain.clear();
    for (auto* p = parent_of(functions, index, functions[i]); p != nullptr; p = parent_of(functions, index, *p)) {
      functions[i].bridge_chain.push_back(p->address);
      HA_ASSERT(functions[i].bridge_chain.size() < 256);  // a cycle means the reader is broken
    }
  }
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    return functions[a].bridge_chain.size() < functions[b].bridge_chain.size();
  });
  std::set<PciAddress> bridge_parents;
  for (const auto& f : functions) {
    if (f.is_bridge() && f.parent) bridge_parents.insert(*f.parent);
  }
  for (const size_t i : order) {
    auto& function = functions[i];
    function.role =
        classify(function, parent_of(functions, index, function), bridge_parents.count(function.address) != 0);
  }
  for (auto& function : functions) {
    function.pcie_switch.reset();
    for (const auto& bridge : function.bridge_chain) {
      if (functions[index.at(bridge)].role == numa::PciRole::switch_upstream) {
        function.pcie_switch = bridge;
        break;
      }
    }
  }
}

// A bridge whose numa_node is -1 while the devices beneath it name a node is a firmware quirk (no
// _PXM on the root port, seen on 4-socket Westmere and on some EPYC boards): the devices are right,
// so the bridge takes the node all of them agree on. Devices still without a node inherit from the
// nearest bridge above that has one, and last from hwloc's locality when that is a single node.
void resolve_numa_nodes(std::vector<numa::PciFunction>& functions, const Index& index) {
  for (auto& f : functions) {
    f.numa_node.reset();
    if (f.numa_node_reported && *f.numa_node_reported >= 0) f.numa_node = f.numa_node_reported;
  }
  std::map<PciAddress, std::set<int>> below;
  for (const auto& f : functions) {
    if (!f.numa_node) continue;
    for (const auto& bridge : f.bridge_chain) below[bridge].insert(*f.numa_node);
  }
  for (auto& f : functions) {
    const auto it = below.find(f.address);
    if (!f.numa_node && it != below.end() && it->second.size() == 1) f.numa_node = *it->second.begin();
  }
  for (auto& f : functions) {
    for (auto chain = f.bridge_chain.begin(); !f.numa_node && chain != f.bridge_chain.end(); ++chain) {
      f.numa_node = functions[index.at(*chain)].numa_node;
    }
    if (!f.numa_node && f.locality_numa_nodes.size() == 1) f.numa_node = f.locality_numa_nodes.front();
  }
}

std::vector<numa::PcieSwitch> build_switches(const std::vector<numa::PciFunction>& functions) {
  std::vector<numa::PcieSwitch> switches;
  for (const auto& f : functions) {
    if (f.role != numa::PciRole::switch_upstream) continue;
    numa::PcieSwitch sw;
    sw.upstream = f.address;
    sw.numa_node = f.numa_node;
    for (const auto& g : functions) {
      if (g.parent == f.address && g.role == numa::PciRole::switch_downstream) sw.downstream.push_back(g.address);
    }
    for (const auto& g : functions) {
      const bool beneath = std::any_of(g.bridge_chain.begin(), g.bridge_chain.end(), [&](const PciAddress& b) {
        return std::find(sw.downstream.begin(), sw.downstream.end(), b) != sw.downstream.end();
      });
      if (beneath) sw.devices.push_back(g.address);
    }
    switches.push_back(std::move(sw));
  }
  return switches;
}

std::vector<numa::IommuGroup> build_iommu_groups(const std::vector<numa::PciFunction>& functions) {
  std::map<int, numa::IommuGroup> groups;
  for (const auto& f : functions) {
    if (!f.iommu_group) continue;
    auto& group = groups[*f.iommu_group];
    group.id = *f.iommu_group;
    group.members.push_back(f.address);
  }
  std::vector<numa::IommuGroup> out;
  out.reserve(groups.size());
  for (auto& [id, group] : groups) out.push_back(std::move(group));
  return out;
}

}  // namespace

numa::PciRole classify(const numa::PciFunction& f, const numa::PciFunction* parent, bool has_bridge_children) {
  const uint32_t base = f.class_code >> 16;
  const uint32_t base_sub = f.class_code >> 8;
  if (f.vendor_id == kVendorNvidia && base == 0x03) return numa::PciRole::gpu;  // VGA (0300) or 3D (0302)
  if (f.vendor_id == kVendorNvidia && base_sub == 0x0680) return numa::PciRole::nvswitch;
  if (f.vendor_id == kVendorMellanox && base == 0x02) return numa::PciRole::nic;  // Ethernet or InfiniBand
  // 01 08 02 is NVM Express; without config space the programming interface is unknown.
  if (base_sub == 0x0108 && ((f.class_code & 0xff) == 0x02 || !f.config_space_known)) return numa::PciRole::nvme;
  if (!f.is_bridge()) return numa::PciRole::other;
  if (f.port_type) return role_from_port_type(*f.port_type);
  // Config space without a PCI Express capability: a conventional PCI bridge.
  if (f.config_space_known) return numa::PciRole::other;
  // 06 04 01 is a subtractive-decode bridge (DMI-to-PCI): never a PCIe port.
  if (f.class_code == 0x060401) return numa::PciRole::other;
  return role_from_structure(parent, has_bridge_children);
}

void finish_model(numa::HostModel& model) {
  auto& functions = model.pci_devices;
  const Index index = index_of(functions);
  assign_roles_and_chains(functions, index);
  resolve_numa_nodes(functions, index);
  model.switches = build_switches(functions);
  model.iommu_groups = build_iommu_groups(functions);
}

}  // namespace hostagent::discovery::detail
