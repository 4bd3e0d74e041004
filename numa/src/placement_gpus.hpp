// numa/placement, private: which GPUs to take. An exact search over how many GPUs each switch, root
// port and NUMA node gives, scored by GpuScore; GPUs under one switch are interchangeable but for
// their addresses, so the search runs over counts, never over subsets.
#pragma once

#include <optional>
#include <vector>

#include "placement_inventory.hpp"

namespace hostagent::numa::placement_detail {

// How good a choice of GPUs is, compared field by field in this order:
//   local_vfs  VFs that share their GPU's switch (with one VF per GPU: GPUs whose VF does); more is better
//   nodes      NUMA nodes with CPUs that the devices use, hence guest cells; fewer is better
//   switches   distinct switches the GPUs sit under (a GPU on a root port counts as its own); fewer
//   roots      distinct root ports above them; fewer
// The first two are the placement's score (the tests' brute force checks them); the last two pack
// GPUs by switch, then root complex, which keeps peer-to-peer cliques tight.
struct GpuScore {
  int local_vfs = 0;
  int nodes = 0;
  int switches = 0;
  int roots = 0;
};
bool better(const GpuScore& a, const GpuScore& b);

struct GpuChoice {
  std::vector<const GpuCandidate*> gpus;  // by cell node, then address
  GpuScore score;
};

class GpuSearch {
 public:
  GpuSearch(const Inventory& inventory, const PlacementRequest& request);

  // Nodes with CPUs that have a GPU to give, ascending.
  const std::vector<int>& nodes() const { return nodes_; }
  // The most GPUs the host can give, each with its VFs, on any nodes: what a refusal reports.
  int most_gpus() const;
  // The most local VFs any choice of request.gpus GPUs reaches, whatever its nodes.
  std::optional<int> best_local_vfs() const;
  // The best choice that takes GPUs from every node in `nodes` and from no other node (GPUs whose
  // node is unknown may join any choice); nullopt when there is none.
  std::optional<GpuChoice> choose(const std::vector<int>& nodes) const;

  // What the search keeps per switch, root port and node; public for the helpers in the .cpp.
  using Table = std::vector<std::optional<GpuScore>>;  // index: GPUs taken
  struct Knapsack {
    Table best;
    std::vector<std::vector<int>> take;  // take[i][c]: GPUs from item i when items 0..i give c
  };
  struct SwitchGroup {
    std::vector<const GpuCandidate*> gpus;
    Table table;
  };
  struct RootGroup {
    std::vector<SwitchGroup> switches;
    Knapsack knapsack;
    Table table;
  };
  struct Bucket {
    int node = kUnknownNode;
    std::vector<RootGroup> roots;
    Knapsack knapsack;
    Table table;
  };

 private:
  std::vector<const GpuCandidate*> expand(const Bucket& bucket, int count) const;

  int limit_ = 0;
  std::vector<Bucket> buckets_;  // by node, the unknown node first
  std::vector<int> nodes_;
};

}  // namespace hostagent::numa::placement_detail
