// numa/placement, private: guest cells, what they need from each host node, and the vCPU pins.
#pragma once

#include <cstdint>
#include <map>
#include <vector>

#include "placement_inventory.hpp"

namespace hostagent::numa::placement_detail {

struct CellPlan {
  std::vector<int> host_nodes;  // the host node of each guest cell
  int vcpus_per_cell = 0;
  uint64_t memory_per_cell = 0;
  uint64_t pages_per_cell = 0;
};

// `cells` guest cells over the devices' nodes (ascending, distinct): with at least as many cells as
// nodes, in blocks in node order so that every node has one; with fewer, on the nodes with the
// most devices (lowest ids on a tie).
std::vector<int> spread_cells(const std::vector<int>& nodes, const std::map<int, int>& devices_per_node, int cells);

// The plan for guest cells on these host nodes, or what they lack: invalid_argument when vCPUs or
// memory do not split evenly, does_not_fit naming the node, the shortfall and its holders.
Result<CellPlan> fit_cells(const Inventory& inventory, const HostPolicy& policy, const PlacementRequest& request,
                           const std::vector<int>& host_nodes);

// With no device to follow: the fewest nodes whose free CPUs and hugepages fit, lowest ids first.
Result<CellPlan> fit_fewest_nodes(const Inventory& inventory, const HostPolicy& policy,
                                  const PlacementRequest& request);

// Fills placement.cells and placement.topology: each vCPU pinned to its own host CPU on its cell's
// node; vCPUs 2k and 2k+1 on the two threads of one core when every cell can have whole cores.
void pin_cells(const Inventory& inventory, const CellPlan& plan, Placement& placement);

// The subsets of `items` with `size` elements, in lexicographic order.
std::vector<std::vector<int>> subsets(const std::vector<int>& items, int size);

}  // namespace hostagent::numa::placement_detail
