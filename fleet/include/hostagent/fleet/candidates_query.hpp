// fleet/candidates_query: a VM shape as one GET /allocation_candidates of Placement 1.39, shaped so
// that Placement 8.0's cost stays bounded (docs/placement.md, "Requests"). Pure.
//
// Placement 8.0 searches each request group on its own and then tries every combination of their
// providers on a host (objects/allocation_candidate.py, itertools.product), before it filters:
// k one-GPU groups over n GPU providers cost n^k, whatever `limit` says. Each GPU group j of a
// k-GPU shape is therefore held to the GPU slots s with s mod k == j (the slot traits the tree
// publishes): at most ceil(n/k)^k combinations per host, 1 for a whole host's GPUs.
#pragma once

#include <cstdint>
#include <set>
#include <string>
#include <vector>

#include "hostagent/common/result.hpp"
#include "hostagent/numa/placement.hpp"

namespace hostagent::fleet {

struct QueryOptions {
  int gpus_per_node = 4;  // how many GPUs one guest cell takes at most, when the shape names no cells
  int max_slots = 16;     // the most GPUs a host of the fleet has: slot traits run 0..max_slots-1
  int limit = 50;         // candidates returned (Placement applies it after building them all)
  std::string in_tree;    // a provider's UUID: only that host's tree ("" all)
};

struct CandidatesQuery {
  std::string target;                 // "/allocation_candidates?..."
  int cells = 1;                      // NUMA groups: _N0.._N{cells-1}
  int gpu_groups = 0;                 // _G0..
  int64_t combinations_per_host = 1;  // the bound above, for a host with max_slots GPUs
  // The custom traits and resource classes the query names. Placement refuses a query naming one
  // it does not know (400) even where no host has it: the asker creates them first (PUT, idempotent).
  std::set<std::string> custom_traits;
  std::set<std::string> custom_classes;
};

// invalid_argument for a shape Placement cannot express: vCPUs, memory or GPUs that do not split
// evenly over the cells, a hugepage size other than 2 MiB and 1 GiB.
Result<CandidatesQuery> candidates_query(const numa::PlacementRequest& request, const QueryOptions& options);

}  // namespace hostagent::fleet
