#include "placement_inventory.hpp"

#include <algorithm>
#include <set>

#include "hostagent/numa/host_use.hpp"
#include "hostagent/numa/nvlink.hpp"
#include "hostagent/numa/p2p_isolation.hpp"

namespace hostagent::numa::placement_detail {
namespace {

// Who holds what, from the allocations of the VMs that exist.
struct Holders {
  std::map<PciAddress, std::string> devices;
  std::map<int, std::string> cpus;
  std::map<int, std::map<std::string, uint64_t>> pages;  // node -> vm -> pages of the request's size
  std::map<PciAddress, std::string> fenced;              // free, but in a domain relaxed for a VM: why
};

Holders index_holders(const HostModel& host, const std::vector<Allocation>& existing, uint64_t page_size) {
  Holders holders;
  holders.fenced = fenced_devices(host, existing);
  for (const auto& allocation : existing) {
    for (const auto& device : allocation.devices) holders.devices.emplace(device, allocation.vm);
    for (const int cpu : allocation.cpus) holders.cpus.emplace(cpu, allocation.vm);
    // Pages of another size come from another pool: they do not reduce this one.
    if (allocation.hugepage_size_bytes != page_size) continue;
    for (const auto& [node, pages] : allocation.hugepages) holders.pages[node][allocation.vm] += pages;
  }
  return holders;
}

using GroupIndex = std::map<int, const IommuGroup*>;

GroupIndex index_groups(const HostModel& host) {
  GroupIndex index;
  for (const auto& group : host.iommu_groups) index.emplace(group.id, &group);
  return index;
}

// The non-bridge members of f's IOMMU group, f included, by address. A host that reports no groups
// at all (an hwloc XML) leaves f alone; a host that reports groups but none for f gives nullopt,
// since passing f through could then drag in devices we cannot see.
std::optional<std::vector<PciAddress>> group_members(const HostModel& host, const GroupIndex& groups,
                                                     const PciFunction& f) {
  if (host.iommu_groups.empty()) return std::vector<PciAddress>{f.address};
  if (!f.iommu_group) return std::nullopt;
  const auto it = groups.find(*f.iommu_group);
  if (it == groups.end()) return std::nullopt;
  std::vector<PciAddress> members;
  for (const auto& address : it->second->members) {
    const auto* member = host.find(address);
    if (member == nullptr || !member->is_bridge()) members.push_back(address);
  }
  if (std::find(members.begin(), members.end(), f.address) == members.end()) members.push_back(f.address);
  std::sort(members.begin(), members.end());
  return members;
}

std::optional<std::string> first_holder(const Holders& holders, const std::vector<PciAddress>& members) {
  for (const auto& address : members) {
    const auto it = holders.devices.find(address);
    if (it != holders.devices.end()) return it->second;
  }
  return std::nullopt;
}

// Why a group lies where another VM's peer-to-peer reaches, or nullopt.
std::optional<std::string> first_fenced(const Holders& holders, const std::vector<PciAddress>& members) {
  for (const auto& address : members) {
    const auto it = holders.fenced.find(address);
    if (it != holders.fenced.end()) return it->second;
  }
  return std::nullopt;
}

bool matches(const std::vector<DeviceId>& ids, const PciFunction& f) {
  if (ids.empty()) return true;
  return std::any_of(ids.begin(), ids.end(),
                     [&](const DeviceId& id) { return id.vendor_id == f.vendor_id && id.device_id == f.device_id; });
}

// Why f can go to no VM: withheld (being cleaned, quarantined), or kept by the host (host_use.hpp);
// nullopt when it can.
std::optional<std::string> kept(const PciFunction& f, const HostPolicy& policy) {
  const auto it = policy.withheld.find(f.address);
  if (it != policy.withheld.end()) {
    const bool cleaning = it->second.why == Withheld::Why::cleaning;
    return std::string(cleaning ? "being cleaned" : "quarantined") + " (" + it->second.reason + ")";
  }
  return kept_by_host(f, policy.releasable_drivers);
}

// Why a group cannot go to a VM because the host keeps one of its members, or nullopt. f is the
// device asked for; its companions are named, since the operator has to find them.
std::optional<std::string> kept_member(const HostModel& host, const PciFunction& f,
                                       const std::vector<PciAddress>& members, const HostPolicy& policy) {
  if (auto why = kept(f, policy)) return why;
  for (const auto& address : members) {
    const auto* member = host.find(address);
    if (member == nullptr || member == &f) continue;
    if (auto why = kept(*member, policy)) {
      return "sharing its IOMMU group with " + address.to_string() + ", " + *why;
    }
  }
  return std::nullopt;
}

bool in_partition(const FabricPartition* partition, const PciAddress& address) {
  return partition == nullptr || std::any_of(partition->gpus.begin(), partition->gpus.end(),
                                             [&](const PartitionGpu& gpu) { return gpu.address == address; });
}

void take_gpus(const Holders& holders, const GroupIndex& groups, const HostPolicy& policy,
               const PlacementRequest& request, const FabricPartition* partition, Inventory& inv) {
  std::map<int, PciAddress> taken_group;  // IOMMU group -> the GPU that takes it
  for (const auto& f : inv.host->pci_devices) {
    if (f.role != PciRole::gpu || !matches(request.gpu_ids, f) || !in_partition(partition, f.address)) continue;
    const auto members = group_members(*inv.host, groups, f);
    if (!members) {
      inv.unusable_gpus.push_back({f.address, "with an unknown IOMMU group"});
      continue;
    }
    if (const auto vm = first_holder(holders, *members)) {
      inv.unusable_gpus.push_back({f.address, "held by vm " + *vm});
      continue;
    }
    if (auto why = first_fenced(holders, *members)) {
      inv.unusable_gpus.push_back({f.address, std::move(*why)});
      continue;
    }
    if (auto why = kept_member(*inv.host, f, *members, policy)) {
      inv.unusable_gpus.push_back({f.address, std::move(*why)});
      continue;
    }
    // Another GPU of the same group is already taken whole, this one with it as a companion.
    if (f.iommu_group && !inv.host->iommu_groups.empty()) {
      const auto [it, fresh] = taken_group.emplace(*f.iommu_group, f.address);
      if (!fresh) {
        inv.unusable_gpus.push_back({f.address, "in the IOMMU group of " + it->second.to_string()});
        continue;
      }
    }
    GpuCandidate candidate;
    candidate.gpu = &f;
    std::copy_if(members->begin(), members->end(), std::back_inserter(candidate.companions),
                 [&](const PciAddress& a) { return a != f.address; });
    candidate.node = inv.cell_node(f.numa_node);
    candidate.host_switch = f.pcie_switch;
    candidate.switch_key = f.pcie_switch.value_or(f.address);
    candidate.root_key = f.bridge_chain.empty() ? f.address : f.bridge_chain.back();
    inv.gpus.push_back(std::move(candidate));
  }
}

// VFs and NVMe go to a VM alone: one that shares its IOMMU group could only go with the others.
void take_singles(const Holders& holders, const GroupIndex& groups, const HostPolicy& policy,
                  bool (*wanted)(const PciFunction&), Inventory& inv, std::vector<FreeDevice>& free,
                  std::vector<Unusable>& unusable) {
  for (const auto& f : inv.host->pci_devices) {
    if (!wanted(f)) continue;
    const auto members = group_members(*inv.host, groups, f);
    if (!members) {
      unusable.push_back({f.address, "with an unknown IOMMU group"});
    } else if (const auto vm = first_holder(holders, *members)) {
      unusable.push_back({f.address, "held by vm " + *vm});
    } else if (auto fenced = first_fenced(holders, *members)) {
      unusable.push_back({f.address, std::move(*fenced)});
    } else if (auto why = kept(f, policy)) {
      unusable.push_back({f.address, std::move(*why)});
    } else if (members->size() > 1) {
      unusable.push_back({f.address, "sharing its IOMMU group"});
    } else if (f.physfn && f.driver == std::optional<std::string>("vfio-pci")) {
      // Bound to vfio-pci yet in no allocation: a VM we do not manage may have it.
      unusable.push_back({f.address, "bound to vfio-pci by no VM we know"});
    } else {
      free.push_back({&f, inv.cell_node(f.numa_node)});
    }
  }
}

bool is_nvswitch(const PciFunction& f) {
  return f.role == PciRole::nvswitch;
}
bool is_vf(const PciFunction& f) {
  return f.role == PciRole::nic && f.physfn.has_value();
}
// A PF whose VFs are enabled is never given whole: a VM driving it would reset and reconfigure the
// controller its VFs (and the VMs holding them) run on. Its VFs are the NVMe to give.
bool is_nvme(const PciFunction& f) {
  return f.role == PciRole::nvme && !(f.sriov && f.sriov->num_vfs > 0);
}
// The same for a NIC: a PF with VFs enabled carries other VMs' traffic, so it never goes whole.
bool is_whole_nic(const PciFunction& f) {
  return f.role == PciRole::nic && !f.physfn && !(f.sriov && f.sriov->num_vfs > 0);
}

// Sorts a node's free CPUs into whole free cores (pairs of siblings) and lone threads.
void pair_siblings(const std::map<int, std::vector<int>>& free_by_core, CpuNode& node) {
  for (const auto& [core, cpus] : free_by_core) {
    std::size_t i = 0;
    for (; i + 1 < cpus.size(); i += 2) node.pairs.emplace_back(cpus[i], cpus[i + 1]);
    if (i < cpus.size()) node.singles.push_back(cpus[i]);
  }
  std::sort(node.singles.begin(), node.singles.end());
}

CpuNode take_cpu_node(const NumaNode& numa, const std::map<int, const Cpu*>& by_id, const Holders& holders,
                      const std::set<int>& housekeeping, uint64_t page_size) {
  CpuNode node;
  node.id = numa.id;
  std::map<int, std::vector<int>> free_by_core;  // lowest sibling id -> free siblings
  for (const int id : numa.cpus) {
    const auto it = by_id.find(id);
    const Cpu* cpu = it == by_id.end() ? nullptr : it->second;
    const auto held = holders.cpus.find(id);
    if (cpu != nullptr && !cpu->online) {
      ++node.offline;
    } else if (housekeeping.count(id) != 0) {
      ++node.housekeeping;
    } else if (held != holders.cpus.end()) {
      ++node.held[held->second];
    } else {
      int core = id;
      if (cpu != nullptr && !cpu->siblings.empty())
        core = std::min(id, *std::min_element(cpu->siblings.begin(), cpu->siblings.end()));
      free_by_core[core].push_back(id);
    }
  }
  for (auto& [core, cpus] : free_by_core) std::sort(cpus.begin(), cpus.end());
  pair_siblings(free_by_core, node);
  for (const auto& pool : numa.hugepages) {
    if (pool.page_size_bytes == page_size) node.pool_total = pool.total;
  }
  const auto held_pages = holders.pages.find(numa.id);
  if (held_pages != holders.pages.end()) node.pages_held = held_pages->second;
  return node;
}

}  // namespace

uint64_t CpuNode::free_pages() const {
  uint64_t taken = 0;
  for (const auto& [vm, pages] : pages_held) taken += pages;
  const uint64_t total = pool_total.value_or(0);
  const uint64_t free = taken >= total ? 0 : total - taken;
  return unclaimed ? std::min(free, *unclaimed) : free;
}

int Inventory::cell_node(const std::optional<int>& numa_node) const {
  return placement_detail::cell_node(cell_node_of, numa_node);
}

Inventory take_inventory(const HostModel& host, const std::vector<Allocation>& existing, const HostPolicy& policy,
                         const PlacementRequest& request, const FabricPartition* partition) {
  const Holders holders = index_holders(host, existing, request.hugepage_size_bytes);
  const std::set<int> housekeeping(policy.housekeeping_cpus.begin(), policy.housekeeping_cpus.end());
  std::map<int, const Cpu*> cpus_by_id;
  for (const auto& cpu : host.cpus) cpus_by_id.emplace(cpu.id, &cpu);
  Inventory inv;
  inv.host = &host;
  for (const auto& numa : host.numa_nodes) {
    if (!has_cpus(numa)) continue;
    auto node = take_cpu_node(numa, cpus_by_id, holders, housekeeping, request.hugepage_size_bytes);
    const auto unclaimed = policy.unclaimed_hugepages.find({numa.id, request.hugepage_size_bytes});
    if (unclaimed != policy.unclaimed_hugepages.end()) node.unclaimed = unclaimed->second;
    inv.cpu_nodes.emplace(numa.id, std::move(node));
  }
  inv.cell_node_of = map_cell_nodes(host);
  const GroupIndex groups = index_groups(host);
  take_gpus(holders, groups, policy, request, partition, inv);
  take_singles(holders, groups, policy, is_vf, inv, inv.vfs, inv.unusable_vfs);
  take_singles(holders, groups, policy, is_nvme, inv, inv.nvme, inv.unusable_nvme);
  if (request.whole_nics > 0)
    take_singles(holders, groups, policy, is_whole_nic, inv, inv.whole_nics, inv.unusable_whole_nics);
  inv.takes_fabric = !policy.fabric && takes_fabric(nvlink_fabric(host), request);
  if (inv.takes_fabric)
    take_singles(holders, groups, policy, is_nvswitch, inv, inv.nvswitches, inv.unusable_nvswitches);
  return inv;
}

std::string join_addresses(const std::vector<PciAddress>& addresses) {
  constexpr std::size_t kShown = 8;
  const std::size_t shown = std::min(addresses.size(), kShown);
  std::string out;
  for (std::size_t i = 0; i < shown; ++i) {
    if (i > 0) out += (i + 1 == shown && shown == addresses.size()) ? " and " : ", ";
    out += addresses[i].to_string();
  }
  if (shown < addresses.size()) out += " and " + std::to_string(addresses.size() - shown) + " more";
  return out;
}

std::string describe(const std::vector<Unusable>& unusable) {
  std::vector<std::pair<std::string, std::vector<PciAddress>>> by_reason;  // first appearance first
  for (const auto& u : unusable) {
    auto it = std::find_if(by_reason.begin(), by_reason.end(), [&](const auto& r) { return r.first == u.reason; });
    if (it == by_reason.end()) it = by_reason.insert(by_reason.end(), {u.reason, {}});
    it->second.push_back(u.address);
  }
  std::string out;
  for (const auto& [reason, addresses] : by_reason) {
    if (!out.empty()) out += "; ";
    out += join_addresses(addresses) + " " + reason;
  }
  return out;
}

bool has_cpus(const NumaNode& node) {
  return !node.cpuless && !node.cpus.empty();
}

std::map<int, int> map_cell_nodes(const HostModel& host) {
  std::map<int, const NumaNode*> by_id;
  for (const auto& node : host.numa_nodes) by_id.emplace(node.id, &node);
  std::map<int, int> out;
  for (const auto& node : host.numa_nodes) {
    if (has_cpus(node)) {
      out[node.id] = node.id;
      continue;
    }
    std::optional<std::pair<int, int>> nearest;  // (distance, node)
    for (const auto& [other, distance] : node.distances) {
      const auto it = by_id.find(other);
      if (it == by_id.end() || !has_cpus(*it->second)) continue;
      if (!nearest || std::pair(distance, other) < *nearest) nearest = std::pair(distance, other);
    }
    out[node.id] = nearest ? nearest->second : kUnknownNode;
  }
  return out;
}

int cell_node(const std::map<int, int>& cell_node_of, const std::optional<int>& numa_node) {
  if (!numa_node) {
    // The nodes with CPUs are those that are their own cell node.
    std::optional<int> only;
    for (const auto& [node, cell] : cell_node_of) {
      if (node != cell) continue;
      if (only) return kUnknownNode;
      only = node;
    }
    return only.value_or(kUnknownNode);
  }
  const auto it = cell_node_of.find(*numa_node);
  return it == cell_node_of.end() ? kUnknownNode : it->second;
}

}  // namespace hostagent::numa::placement_detail
