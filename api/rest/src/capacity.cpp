// api/rest: free capacity per NUMA node, by placement's rules (numa/src/placement_inventory.cpp).
#include "capacity.hpp"

#include <algorithm>
#include <map>
#include <optional>
#include <set>
#include <string>

namespace hostagent::api::detail {
namespace {

constexpr int kUnknownNode = -1;

struct Index {
  std::set<PciAddress> held_devices;
  std::set<int> held_cpus;
  std::map<std::pair<int, uint64_t>, uint64_t> held_pages;  // (node, page size) -> pages
  std::map<int, const numa::IommuGroup*> groups;
  std::map<int, int> cell_node_of;  // host node -> the node with CPUs its devices count on
  std::set<int> cpu_nodes;
};

bool has_cpus(const numa::NumaNode& node) {
  return !node.cpuless && !node.cpus.empty();
}

// A CPU-less node (GPU memory on Grace) lends its devices to the nearest node with CPUs.
void map_cell_nodes(const numa::HostModel& host, Index& index) {
  for (const auto& node : host.numa_nodes) {
    if (has_cpus(node)) index.cpu_nodes.insert(node.id);
  }
  for (const auto& node : host.numa_nodes) {
    if (index.cpu_nodes.count(node.id) != 0) {
      index.cell_node_of[node.id] = node.id;
      continue;
    }
    std::optional<std::pair<int, int>> nearest;  // (distance, node)
    for (const auto& [other, distance] : node.distances) {
      if (index.cpu_nodes.count(other) == 0) continue;
      if (!nearest || std::pair(distance, other) < *nearest) nearest = std::pair(distance, other);
    }
    index.cell_node_of[node.id] = nearest ? nearest->second : kUnknownNode;
  }
}

Index make_index(const numa::HostModel& host, const std::vector<numa::Allocation>& held) {
  Index index;
  for (const auto& allocation : held) {
    index.held_devices.insert(allocation.devices.begin(), allocation.devices.end());
    index.held_cpus.insert(allocation.cpus.begin(), allocation.cpus.end());
    for (const auto& [node, pages] : allocation.hugepages) {
      index.held_pages[{node, allocation.hugepage_size_bytes}] += pages;
    }
  }
  for (const auto& group : host.iommu_groups) index.groups.emplace(group.id, &group);
  map_cell_nodes(host, index);
  return index;
}

int cell_node(const Index& index, const std::optional<int>& numa_node) {
  if (!numa_node) return index.cpu_nodes.size() == 1 ? *index.cpu_nodes.begin() : kUnknownNode;
  const auto it = index.cell_node_of.find(*numa_node);
  return it == index.cell_node_of.end() ? kUnknownNode : it->second;
}

// The non-bridge members of f's IOMMU group, f included; nullopt when the host reports groups but
// none for f (passing it through could drag in devices nobody can see).
std::optional<std::vector<PciAddress>> group_members(const numa::HostModel& host, const Index& index,
                                                     const numa::PciFunction& f) {
  if (host.iommu_groups.empty()) return std::vector<PciAddress>{f.address};
  if (!f.iommu_group) return std::nullopt;
  const auto it = index.groups.find(*f.iommu_group);
  if (it == index.groups.end()) return std::nullopt;
  std::vector<PciAddress> members;
  for (const auto& address : it->second->members) {
    const auto* member = host.find(address);
    if (member == nullptr || !member->is_bridge()) members.push_back(address);
  }
  if (std::find(members.begin(), members.end(), f.address) == members.end()) members.push_back(f.address);
  return members;
}

bool any_held(const Index& index, const std::vector<PciAddress>& members) {
  return std::any_of(members.begin(), members.end(),
                     [&](const PciAddress& a) { return index.held_devices.count(a) != 0; });
}

// A GPU is free when its group is known and wholly free, and no other GPU of the group came first
// (that one takes it as a companion).
bool gpu_free(const numa::HostModel& host, const Index& index, const numa::PciFunction& f,
              std::set<int>& taken_groups) {
  const auto members = group_members(host, index, f);
  if (!members || any_held(index, *members)) return false;
  if (f.iommu_group && !host.iommu_groups.empty()) return taken_groups.insert(*f.iommu_group).second;
  return true;
}

// VFs and NVMe go to a VM alone: one that shares its IOMMU group could only go with the others.
bool single_free(const numa::HostModel& host, const Index& index, const numa::PciFunction& f) {
  const auto members = group_members(host, index, f);
  if (!members || any_held(index, *members) || members->size() > 1) return false;
  // Bound to vfio-pci yet in no allocation: a VM we do not manage may have it.
  return !(f.physfn && f.driver == std::optional<std::string>("vfio-pci"));
}

void count(Count& node, Count& totals, bool free) {
  ++node.total;
  ++totals.total;
  if (free) {
    ++node.free;
    ++totals.free;
  }
}

CpuCapacity cpu_capacity(const numa::NumaNode& numa, const std::map<int, const numa::Cpu*>& cpus, const Index& index,
                         const std::set<int>& housekeeping) {
  CpuCapacity out;
  for (const int id : numa.cpus) {
    const auto it = cpus.find(id);
    ++out.total;
    if (it != cpus.end() && !it->second->online) {
      ++out.offline;
    } else if (housekeeping.count(id) != 0) {
      ++out.housekeeping;
    } else if (index.held_cpus.count(id) != 0) {
      ++out.held;
    } else {
      ++out.free;
    }
  }
  return out;
}

std::vector<PoolCapacity> pools(const numa::NumaNode& numa, const Index& index) {
  std::vector<PoolCapacity> out;
  for (const auto& pool : numa.hugepages) {
    const auto held = index.held_pages.find({numa.id, pool.page_size_bytes});
    const uint64_t taken = held == index.held_pages.end() ? 0 : held->second;
    out.push_back({pool.page_size_bytes, pool.total, taken >= pool.total ? 0 : pool.total - taken});
  }
  return out;
}

void add_pools(std::vector<PoolCapacity>& totals, const std::vector<PoolCapacity>& node) {
  for (const auto& pool : node) {
    auto it = std::find_if(totals.begin(), totals.end(),
                           [&](const PoolCapacity& p) { return p.page_size_bytes == pool.page_size_bytes; });
    if (it == totals.end()) it = totals.insert(totals.end(), {pool.page_size_bytes, 0, 0});
    it->total += pool.total;
    it->free += pool.free;
  }
  std::sort(totals.begin(), totals.end(),
            [](const PoolCapacity& a, const PoolCapacity& b) { return a.page_size_bytes < b.page_size_bytes; });
}

void add_cpus(CpuCapacity& totals, const CpuCapacity& node) {
  totals.total += node.total;
  totals.free += node.free;
  totals.housekeeping += node.housekeeping;
  totals.held += node.held;
  totals.offline += node.offline;
}

boost::json::object to_json(const Count& c) {
  return {{"total", c.total}, {"free", c.free}};
}

boost::json::object to_json(const NodeCapacity& node) {
  boost::json::array pages;
  for (const auto& pool : node.hugepages) {
    pages.push_back(
        boost::json::object{{"page_size_bytes", pool.page_size_bytes}, {"total", pool.total}, {"free", pool.free}});
  }
  return {{"cpus",
           {{"total", node.cpus.total},
            {"free", node.cpus.free},
            {"housekeeping", node.cpus.housekeeping},
            {"held", node.cpus.held},
            {"offline", node.cpus.offline}}},
          {"gpus", to_json(node.gpus)},
          {"vfs", to_json(node.vfs)},
          {"nvme", to_json(node.nvme)},
          {"hugepages", std::move(pages)}};
}

}  // namespace

Capacity compute_capacity(const numa::HostModel& host, const std::vector<numa::Allocation>& held,
                          const std::vector<int>& housekeeping_cpus) {
  const Index index = make_index(host, held);
  const std::set<int> housekeeping(housekeeping_cpus.begin(), housekeeping_cpus.end());
  std::map<int, const numa::Cpu*> cpus;
  for (const auto& cpu : host.cpus) cpus.emplace(cpu.id, &cpu);
  Capacity capacity;
  capacity.totals.node = kUnknownNode;
  std::map<int, NodeCapacity> nodes;
  for (const auto& numa : host.numa_nodes) {
    if (!has_cpus(numa)) continue;
    NodeCapacity& node = nodes[numa.id];
    node.node = numa.id;
    node.cpus = cpu_capacity(numa, cpus, index, housekeeping);
    node.hugepages = pools(numa, index);
    add_cpus(capacity.totals.cpus, node.cpus);
    add_pools(capacity.totals.hugepages, node.hugepages);
  }
  NodeCapacity nowhere;  // devices on no node with CPUs: in the totals only
  std::set<int> taken_groups;
  for (const auto& f : host.pci_devices) {
    const auto it = nodes.find(cell_node(index, f.numa_node));
    NodeCapacity& node = it == nodes.end() ? nowhere : it->second;
    if (f.role == numa::PciRole::gpu) {
      count(node.gpus, capacity.totals.gpus, gpu_free(host, index, f, taken_groups));
    } else if (f.role == numa::PciRole::nic && f.physfn) {
      count(node.vfs, capacity.totals.vfs, single_free(host, index, f));
    } else if (f.role == numa::PciRole::nvme) {
      count(node.nvme, capacity.totals.nvme, single_free(host, index, f));
    }
  }
  for (auto& [id, node] : nodes) capacity.nodes.push_back(std::move(node));
  return capacity;
}

boost::json::value capacity_json(const Capacity& capacity) {
  boost::json::array nodes;
  for (const auto& node : capacity.nodes) {
    auto object = to_json(node);
    object.emplace("node", node.node);
    nodes.push_back(std::move(object));
  }
  return boost::json::object{{"nodes", std::move(nodes)}, {"totals", to_json(capacity.totals)}};
}

}  // namespace hostagent::api::detail
