// numa/placement, private: what a host has free for one request, and who holds the rest. Placement
// decides only from this; the holders are kept so that a refusal can say whose VM is in the way.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "hostagent/numa/placement.hpp"

namespace hostagent::numa::placement_detail {

// The cell node of a device the host cannot place on a NUMA node with CPUs. Such a device adds no
// guest cell; it lands in cell 0.
constexpr int kUnknownNode = -1;

// A GPU that can be given whole: it, and every non-bridge member of its IOMMU group, is free.
struct GpuCandidate {
  const PciFunction* gpu = nullptr;
  std::vector<PciAddress> companions;
  int node = kUnknownNode;  // cell node: its NUMA node, or the nearest one with CPUs
  std::optional<PciAddress> host_switch;
  PciAddress switch_key;  // its switch's upstream port, or itself when under none
  PciAddress root_key;    // its root port, or itself when it sits on a root bus
};

// A VF or an NVMe function that is free and alone in its IOMMU group.
struct FreeDevice {
  const PciFunction* function = nullptr;
  int node = kUnknownNode;
};

// The free CPUs of one NUMA node with CPUs, in pinning order, and why the others are not free.
struct CpuNode {
  int id = 0;
  std::vector<std::pair<int, int>> pairs;  // two free SMT siblings of one core, by core
  std::vector<int> singles;                // free CPUs whose siblings are not free
  int housekeeping = 0;
  int offline = 0;
  std::map<std::string, int> held;             // vm -> CPUs it holds on this node
  std::optional<uint64_t> pool_total;          // hugepages of the request's size; nullopt: no such pool
  std::map<std::string, uint64_t> pages_held;  // vm -> pages of that size it holds on this node
  std::optional<uint64_t> unclaimed;           // HostPolicy::unclaimed_hugepages for this node and size

  int free_cpus() const { return static_cast<int>(2 * pairs.size() + singles.size()); }
  uint64_t free_pages() const;
};

// Why a device of the requested kind cannot be taken: "held by vm a", "IOMMU group unknown".
struct Unusable {
  PciAddress address;
  std::string reason;
};

struct Inventory {
  const HostModel* host = nullptr;
  std::vector<GpuCandidate> gpus;  // address order
  std::vector<Unusable> unusable_gpus;
  std::vector<FreeDevice> vfs;  // address order
  std::vector<Unusable> unusable_vfs;
  std::vector<FreeDevice> nvme;  // address order
  std::vector<Unusable> unusable_nvme;
  std::vector<FreeDevice> whole_nics;  // NIC PFs with no VF enabled, address order (whole_nics only)
  std::vector<Unusable> unusable_whole_nics;
  // The NVSwitches, taken only when the request takes the whole fabric (numa/nvlink.hpp).
  bool takes_fabric = false;
  std::vector<FreeDevice> nvswitches;  // address order
  std::vector<Unusable> unusable_nvswitches;
  std::map<int, CpuNode> cpu_nodes;  // NUMA nodes that have CPUs, by id
  std::map<int, int> cell_node_of;   // host NUMA node -> the node with CPUs its devices' cell uses

  int cell_node(const std::optional<int>& numa_node) const;
};

// A node whose CPUs can hold a cell's vCPUs.
bool has_cpus(const NumaNode& node);
// Each host node's cell node, the node with CPUs whose cell takes its devices: itself, or for a
// CPU-less node (GPU memory on Grace) the nearest node with CPUs by SLIT; kUnknownNode when its
// SLIT row has none.
std::map<int, int> map_cell_nodes(const HostModel& host);
// A device's cell node, from its NUMA node; a device of no node is on the host's one node with
// CPUs, or kUnknownNode when there are several.
int cell_node(const std::map<int, int>& cell_node_of, const std::optional<int>& numa_node);

// With a partition (shared NVSwitch mode), its GPUs are the only GPUs there are, and no NVSwitch
// is taken.
Inventory take_inventory(const HostModel& host, const std::vector<Allocation>& existing, const HostPolicy& policy,
                         const PlacementRequest& request, const FabricPartition* partition = nullptr);

// "0000:1b:00.0", "a and b", "a, b and c"; at most eight, then "and N more".
std::string join_addresses(const std::vector<PciAddress>& addresses);
// Groups refusal reasons by text: "a and b held by vm x; c IOMMU group unknown".
std::string describe(const std::vector<Unusable>& unusable);

}  // namespace hostagent::numa::placement_detail
