// numa/capacity: free capacity per node, read off placement's inventory.
#include "hostagent/numa/capacity.hpp"

#include <algorithm>
#include <map>
#include <set>

#include "placement_inventory.hpp"

namespace hostagent::numa {
namespace {

using placement_detail::Inventory;
using placement_detail::kUnknownNode;

// What a device not free is, for the counts beside `free`: withheld (cleaning, quarantined) and
// held by no VM, or neither (held, kept by the host).
enum class NotFree { other, cleaning, quarantined };

void count(NodeCapacity* node, Count NodeCapacity::*kind, NodeCapacity& totals, bool free,
           NotFree why = NotFree::other) {
  for (NodeCapacity* into : {node, &totals}) {
    if (into == nullptr) continue;  // a device on no node with CPUs: in the totals only
    Count& counted = into->*kind;
    ++counted.total;
    if (free) ++counted.free;
    if (why == NotFree::cleaning) ++counted.cleaning;
    if (why == NotFree::quarantined) ++counted.quarantined;
  }
}

// The devices withheld from placement that no VM holds, by why (HostPolicy::withheld).
struct Withholding {
  const HostPolicy& policy;
  std::set<PciAddress> held;  // every device a VM holds
};

NotFree not_free(const Withholding& withholding, const PciAddress& address) {
  const auto it = withholding.policy.withheld.find(address);
  if (it == withholding.policy.withheld.end() || withholding.held.count(address) != 0) return NotFree::other;
  return it->second.why == Withheld::Why::cleaning ? NotFree::cleaning : NotFree::quarantined;
}

// The node placement files a device under: its own, or the nearest with CPUs for a CPU-less one.
// Placement has worked it out for what it may take; what it refuses is looked up the same way.
int cell_of(const Inventory& /*inventory*/, const placement_detail::GpuCandidate& gpu) {
  return gpu.node;
}
int cell_of(const Inventory& /*inventory*/, const placement_detail::FreeDevice& device) {
  return device.node;
}
PciAddress device_address(const placement_detail::GpuCandidate& gpu) {
  return gpu.gpu->address;
}
PciAddress device_address(const placement_detail::FreeDevice& device) {
  return device.function->address;
}
int cell_of(const Inventory& inventory, const placement_detail::Unusable& device) {
  const PciFunction* f = inventory.host->find(device.address);
  return f == nullptr ? kUnknownNode : inventory.cell_node(f->numa_node);
}

// Free: what placement may take; the rest of the kind: what it refuses, with the reason it gives.
template <typename Free>
void count_devices(const Inventory& inventory, const Withholding& withholding, const std::vector<Free>& free,
                   const std::vector<placement_detail::Unusable>& unusable, Count NodeCapacity::*kind,
                   std::map<int, NodeCapacity>& nodes, NodeCapacity& totals) {
  const auto node_at = [&](int cell) {
    const auto it = nodes.find(cell);
    return it == nodes.end() ? nullptr : &it->second;
  };
  for (const auto& device : free) count(node_at(cell_of(inventory, device)), kind, totals, true);
  for (const auto& device : unusable) {
    count(node_at(cell_of(inventory, device)), kind, totals, false, not_free(withholding, device.address));
  }
}

CpuCapacity cpu_capacity(const placement_detail::CpuNode& node) {
  CpuCapacity out;
  out.free = node.free_cpus();
  out.housekeeping = node.housekeeping;
  out.offline = node.offline;
  for (const auto& [vm, cpus] : node.held) out.held += cpus;
  out.total = out.free + out.housekeeping + out.offline + out.held;
  return out;
}

void add(CpuCapacity& totals, const CpuCapacity& node) {
  totals.total += node.total;
  totals.free += node.free;
  totals.housekeeping += node.housekeeping;
  totals.held += node.held;
  totals.offline += node.offline;
}

// Each pool as placement would reserve from it: the inventory of a request of that page size.
void count_pools(const HostModel& host, const std::vector<Allocation>& held, const HostPolicy& policy,
                 std::map<int, NodeCapacity>& nodes, NodeCapacity& totals) {
  std::map<uint64_t, Inventory> by_size;
  for (const auto& numa : host.numa_nodes) {
    const auto node = nodes.find(numa.id);
    if (node == nodes.end()) continue;
    for (const auto& pool : numa.hugepages) {
      auto it = by_size.find(pool.page_size_bytes);
      if (it == by_size.end()) {
        PlacementRequest request;
        request.hugepage_size_bytes = pool.page_size_bytes;
        it = by_size.emplace(pool.page_size_bytes, placement_detail::take_inventory(host, held, policy, request)).first;
      }
      const auto& cpu_node = it->second.cpu_nodes.at(numa.id);
      node->second.hugepages.push_back({pool.page_size_bytes, cpu_node.pool_total.value_or(0), cpu_node.free_pages()});
    }
  }
  for (const auto& [size, inventory] : by_size) {
    PoolCapacity sum{size, 0, 0};
    for (const auto& [id, node] : inventory.cpu_nodes) {
      sum.total += node.pool_total.value_or(0);
      sum.free += node.free_pages();  // 0 where the node has no such pool
    }
    totals.hugepages.push_back(sum);  // by page size: the map's order
  }
}

// Every device of the kind, free or not, with where it stands.
template <typename Free>
void list_devices(const Inventory& inventory, const Withholding& withholding, const std::vector<Free>& free,
                  const std::vector<placement_detail::Unusable>& unusable, DeviceKind kind,
                  const std::map<PciAddress, std::string>& holders, std::vector<DeviceStanding>& out) {
  const auto first = out.size();
  for (const auto& device : free) {
    out.push_back({device_address(device), kind, cell_of(inventory, device), DeviceUse::free, ""});
  }
  for (const auto& device : unusable) {
    DeviceStanding standing{device.address, kind, cell_of(inventory, device), DeviceUse::unavailable, device.reason};
    if (const auto held = holders.find(device.address); held != holders.end()) {
      standing.use = DeviceUse::held;
      standing.holder = held->second;
    } else if (const auto why = not_free(withholding, device.address); why != NotFree::other) {
      standing.use = why == NotFree::cleaning ? DeviceUse::cleaning : DeviceUse::quarantined;
    }
    out.push_back(std::move(standing));
  }
  std::sort(out.begin() + static_cast<std::ptrdiff_t>(first), out.end(),
            [](const DeviceStanding& a, const DeviceStanding& b) { return a.address < b.address; });
}

}  // namespace

Capacity capacity(const HostModel& host, const std::vector<Allocation>& held, const HostPolicy& policy) {
  PlacementRequest every_kind;
  every_kind.whole_nics = 1;  // so the inventory lists the NIC PFs a VM could take whole
  const Inventory inventory = placement_detail::take_inventory(host, held, policy, every_kind);
  Capacity out;
  out.totals.node = kUnknownNode;
  std::map<int, NodeCapacity> nodes;
  for (const auto& [id, cpu_node] : inventory.cpu_nodes) {
    NodeCapacity& node = nodes[id];
    node.node = id;
    node.cpus = cpu_capacity(cpu_node);
    add(out.totals.cpus, node.cpus);
  }
  count_pools(host, held, policy, nodes, out.totals);
  Withholding withholding{policy, {}};
  for (const auto& allocation : held) withholding.held.insert(allocation.devices.begin(), allocation.devices.end());
  count_devices(inventory, withholding, inventory.gpus, inventory.unusable_gpus, &NodeCapacity::gpus, nodes,
                out.totals);
  count_devices(inventory, withholding, inventory.vfs, inventory.unusable_vfs, &NodeCapacity::vfs, nodes, out.totals);
  count_devices(inventory, withholding, inventory.nvme, inventory.unusable_nvme, &NodeCapacity::nvme, nodes,
                out.totals);
  for (auto& [id, node] : nodes) out.nodes.push_back(std::move(node));
  std::map<PciAddress, std::string> holders;
  for (const auto& allocation : held) {
    for (const auto& device : allocation.devices) holders.emplace(device, allocation.vm);
  }
  list_devices(inventory, withholding, inventory.gpus, inventory.unusable_gpus, DeviceKind::gpu, holders, out.devices);
  list_devices(inventory, withholding, inventory.vfs, inventory.unusable_vfs, DeviceKind::vf, holders, out.devices);
  list_devices(inventory, withholding, inventory.nvme, inventory.unusable_nvme, DeviceKind::nvme, holders, out.devices);
  list_devices(inventory, withholding, inventory.whole_nics, inventory.unusable_whole_nics, DeviceKind::whole_nic,
               holders, out.devices);
  return out;
}

}  // namespace hostagent::numa
