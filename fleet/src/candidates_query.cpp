// fleet/candidates_query: NUMA groups for CPUs, memory and node-level devices; one group per GPU,
// held to its slot class; same_subtree ties each GPU to its cell's node.
#include "hostagent/fleet/candidates_query.hpp"

#include <algorithm>

#include "hostagent/fleet/provider_tree.hpp"

namespace hostagent::fleet {
namespace {

Error unfit(const std::string& why) {
  return Error{ErrorCode::invalid_argument, why};
}

// `total` over `parts`, the remainder to the first parts.
int64_t share(int64_t total, int parts, int index) {
  return total / parts + (index < total % parts ? 1 : 0);
}

std::string join(const std::vector<std::string>& items, const char* separator) {
  std::string out;
  for (const auto& item : items) out += (out.empty() ? "" : separator) + item;
  return out;
}

std::string resources(const std::vector<std::pair<const char*, int64_t>>& amounts, std::set<std::string>& custom) {
  std::vector<std::string> parts;
  for (const auto& [rc, amount] : amounts) {
    if (amount <= 0) continue;
    parts.push_back(std::string(rc) + ":" + std::to_string(amount));
    if (std::string_view(rc).rfind("CUSTOM_", 0) == 0) custom.insert(rc);
  }
  return join(parts, ",");
}

int cells_of(const numa::PlacementRequest& r, const QueryOptions& options) {
  if (r.guest_cells) return *r.guest_cells;
  return std::max(1, (r.gpus + options.gpus_per_node - 1) / options.gpus_per_node);
}

std::string model_requirement(const numa::PlacementRequest& r, std::set<std::string>& custom) {
  std::vector<std::string> models;
  for (const auto& id : r.gpu_ids) models.push_back(model_trait(id.vendor_id, id.device_id));
  std::sort(models.begin(), models.end());
  models.erase(std::unique(models.begin(), models.end()), models.end());
  custom.insert(models.begin(), models.end());
  if (models.size() == 1) return models.front();
  return models.empty() ? "" : "in:" + join(models, ",");
}

}  // namespace

Result<CandidatesQuery> candidates_query(const numa::PlacementRequest& r, const QueryOptions& options) {
  CandidatesQuery out;
  const int cells = cells_of(r, options);
  if (cells < 1 || r.vcpus % cells != 0) {
    return unfit(std::to_string(r.vcpus) + " vCPUs do not split evenly over " + std::to_string(cells) +
                 " NUMA nodes; ask for a multiple of " + std::to_string(cells) + " or set guest_numa.cells");
  }
  if (r.gpus % cells != 0) {
    return unfit(std::to_string(r.gpus) + " GPUs do not split evenly over " + std::to_string(cells) + " NUMA nodes");
  }
  const char* memory_rc = r.hugepage_size_bytes == (1ULL << 30)   ? kMemory1G
                          : r.hugepage_size_bytes == (2ULL << 20) ? kMemory2M
                                                                  : nullptr;
  const uint64_t per_cell = r.memory_bytes / static_cast<uint64_t>(cells);
  if (memory_rc == nullptr) return unfit("Placement carries 1 GiB and 2 MiB hugepage pools only");
  if (r.memory_bytes % static_cast<uint64_t>(cells) != 0 || per_cell % r.hugepage_size_bytes != 0) {
    return unfit("memory does not split over " + std::to_string(cells) + " NUMA nodes in whole hugepages");
  }
  // A host in maintenance, or one Nova's way disabled, is no candidate (Placement 1.22's forbidden
  // traits, 1.35's root_required).
  std::vector<std::string> query{"root_required=" + std::string(kHostTrait) + ",!" + kDisabledTrait};
  const int per_cell_gpus = r.gpus / cells;
  const std::string model = model_requirement(r, out.custom_traits);
  out.custom_traits.insert(kHostTrait);
  for (int cell = 0; cell < cells; ++cell) {
    const std::string n = "_N" + std::to_string(cell);
    // VFs not tied to a GPU: on a GPU host every VF under a GPU's switch counts on that GPU's
    // provider, so the cell's extra VFs ride on its GPU groups (any VF will do for them).
    const int64_t extra = share(r.extra_vfs, cells, cell);
    query.push_back("resources" + n + "=" +
                    resources({{kVcpu, r.vcpus / cells},
                               {memory_rc, static_cast<int64_t>(per_cell >> 20)},
                               {kNvme, share(r.nvme, cells, cell)},
                               {kWholeNic, share(r.whole_nics, cells, cell)},
                               {kVf, per_cell_gpus == 0 ? extra : 0}},
                              out.custom_classes));
    std::vector<std::string> subtree{n};
    for (int k = 0; k < per_cell_gpus; ++k) {
      const int j = cell * per_cell_gpus + k;
      const std::string g = "_G" + std::to_string(j);
      const int64_t vfs = r.vfs_per_gpu + share(extra, per_cell_gpus, k);
      query.push_back("resources" + g + "=" + resources({{kGpu, 1}, {kVf, vfs}}, out.custom_classes));
      if (!model.empty()) query.push_back("required" + g + "=" + model);
      std::vector<std::string> slots;
      for (int slot = j; slot < options.max_slots; slot += r.gpus) slots.push_back(slot_trait(slot));
      if (r.gpus > 1) {
        query.push_back("required" + g + "=in:" + join(slots, ","));
        out.custom_traits.insert(slots.begin(), slots.end());
      }
      out.combinations_per_host *= static_cast<int64_t>(slots.size());
      subtree.push_back(g);
    }
    if (subtree.size() > 1) query.push_back("same_subtree=" + join(subtree, ","));
  }
  out.cells = cells;
  out.gpu_groups = r.gpus;
  if (cells + r.gpus > 1) query.push_back("group_policy=isolate");
  // in_tree without a suffix binds only the unsuffixed group: each group gets its own.
  for (int i = 0; i < cells + r.gpus && !options.in_tree.empty(); ++i) {
    const std::string group = i < cells ? "_N" + std::to_string(i) : "_G" + std::to_string(i - cells);
    query.push_back("in_tree" + group + "=" + options.in_tree);
  }
  query.push_back("limit=" + std::to_string(options.limit));
  out.target = "/allocation_candidates?" + join(query, "&");
  return out;
}

}  // namespace hostagent::fleet
