#include "placement_cells.hpp"

#include <algorithm>
#include <optional>
#include <string>

#include "hostagent/common/text.hpp"

namespace hostagent::numa::placement_detail {
namespace {

std::string join_ints(const std::vector<int>& values) {
  std::string out;
  for (std::size_t i = 0; i < values.size(); ++i) {
    if (i > 0) out += i + 1 == values.size() ? " and " : ", ";
    out += std::to_string(values[i]);
  }
  return out;
}

// "(40 held by vm a, 8 housekeeping)", or "" when nothing is taken.
std::string why_cpus_taken(const CpuNode& node) {
  std::vector<std::string> parts;
  for (const auto& [vm, count] : node.held) parts.push_back(std::to_string(count) + " held by vm " + vm);
  if (node.housekeeping > 0) parts.push_back(std::to_string(node.housekeeping) + " housekeeping");
  if (node.offline > 0) parts.push_back(std::to_string(node.offline) + " offline");
  std::string out;
  for (const auto& part : parts) out += (out.empty() ? " (" : ", ") + part;
  return out.empty() ? out : out + ")";
}

Status check_cpus(const CpuNode& node, int needed) {
  if (node.free_cpus() >= needed) return ok_status();
  return Error{ErrorCode::does_not_fit, "needs " + std::to_string(needed) + " CPUs on NUMA node " +
                                            std::to_string(node.id) + "; free: " + std::to_string(node.free_cpus()) +
                                            why_cpus_taken(node)};
}

Status check_pages(const CpuNode& node, uint64_t needed, uint64_t page_size) {
  if (node.free_pages() >= needed) return ok_status();
  const std::string size = text::binary_size(page_size);
  std::string why;
  if (!node.pool_total) {
    why = " (no " + size + " pool on the node)";
  } else {
    for (const auto& [vm, pages] : node.pages_held) {
      why += (why.empty() ? " (" : ", ") + std::to_string(pages) + " held by vm " + vm;
    }
    if (node.unclaimed && node.free_pages() == *node.unclaimed) {
      why += (why.empty() ? " (" : ", ") + std::string("the kernel has ") + std::to_string(*node.unclaimed) +
             " free that no VM is still to take";
    }
    if (!why.empty()) why += ")";
  }
  return Error{ErrorCode::does_not_fit, "needs " + std::to_string(needed) + " hugepages of " + size + " on node " +
                                            std::to_string(node.id) + "; free: " + std::to_string(node.free_pages()) +
                                            why};
}

}  // namespace

std::vector<int> spread_cells(const std::vector<int>& nodes, const std::map<int, int>& devices_per_node, int cells) {
  const int n = static_cast<int>(nodes.size());
  std::vector<int> out;
  if (cells >= n) {
    for (int i = 0; i < cells; ++i) out.push_back(nodes[static_cast<std::size_t>(i * n / cells)]);
    return out;
  }
  std::vector<int> ranked = nodes;
  const auto devices = [&](int node) {
    const auto it = devices_per_node.find(node);
    return it == devices_per_node.end() ? 0 : it->second;
  };
  std::stable_sort(ranked.begin(), ranked.end(), [&](int a, int b) { return devices(a) > devices(b); });
  out.assign(ranked.begin(), ranked.begin() + cells);
  std::sort(out.begin(), out.end());
  return out;
}

Result<CellPlan> fit_cells(const Inventory& inventory, const HostPolicy& policy, const PlacementRequest& request,
                           const std::vector<int>& host_nodes) {
  const auto cells = static_cast<int>(host_nodes.size());
  std::vector<int> distinct = host_nodes;
  distinct.erase(std::unique(distinct.begin(), distinct.end()), distinct.end());
  if (request.vcpus % cells != 0) {
    return Error{ErrorCode::invalid_argument,
                 "vcpus " + std::to_string(request.vcpus) + " do not divide evenly among " + std::to_string(cells) +
                     " guest cells (on host NUMA nodes " + join_ints(distinct) + "); ask for a multiple of " +
                     std::to_string(cells) + " vCPUs or set guest_cells"};
  }
  const uint64_t page = request.hugepage_size_bytes;
  const uint64_t memory = request.memory_bytes / static_cast<uint64_t>(cells);
  if (request.memory_bytes % static_cast<uint64_t>(cells) != 0 || memory % page != 0) {
    return Error{ErrorCode::invalid_argument, "memory_bytes " + std::to_string(request.memory_bytes) + " split over " +
                                                  std::to_string(cells) + " guest cells is not a whole number of " +
                                                  text::binary_size(page) + " hugepages per cell"};
  }
  CellPlan plan{host_nodes, request.vcpus / cells, memory, memory / page};
  std::map<int, int> cells_on;
  for (const int node : host_nodes) ++cells_on[node];
  for (const auto& [node, count] : cells_on) {
    const CpuNode& cpu_node = inventory.cpu_nodes.at(node);
    HA_TRY_STATUS(check_cpus(cpu_node, count * plan.vcpus_per_cell));
    if (policy.check_hugepages) {
      HA_TRY_STATUS(check_pages(cpu_node, static_cast<uint64_t>(count) * plan.pages_per_cell, page));
    }
  }
  return plan;
}

Result<CellPlan> fit_fewest_nodes(const Inventory& inventory, const HostPolicy& policy,
                                  const PlacementRequest& request) {
  std::vector<int> ids;
  for (const auto& [id, node] : inventory.cpu_nodes) ids.push_back(id);
  const int most = std::min(request.guest_cells.value_or(static_cast<int>(ids.size())), static_cast<int>(ids.size()));
  // Report what the widest spread lacks: it came closest. An uneven split is reported only when
  // nothing failed for want of room.
  std::optional<Error> room, shape;
  for (int size = 1; size <= most; ++size) {
    std::optional<Error> first_at_size;
    for (const auto& nodes : subsets(ids, size)) {
      const auto hosts = request.guest_cells ? spread_cells(nodes, {}, *request.guest_cells) : nodes;
      auto plan = fit_cells(inventory, policy, request, hosts);
      if (plan.ok()) return plan;
      if (plan.error().code != ErrorCode::does_not_fit) {
        if (!shape) shape = plan.error();
      } else if (!first_at_size) {
        first_at_size = plan.error();
      }
    }
    if (first_at_size) room = first_at_size;
  }
  if (room) return *room;
  if (shape) return *shape;
  return Error{ErrorCode::does_not_fit, "the host has no NUMA node with CPUs"};
}

void pin_cells(const Inventory& inventory, const CellPlan& plan, Placement& placement) {
  const int per_cell = plan.vcpus_per_cell;
  std::map<int, int> cells_on;
  for (const int node : plan.host_nodes) ++cells_on[node];
  const bool pairs =
      per_cell % 2 == 0 && std::all_of(cells_on.begin(), cells_on.end(), [&](const auto& entry) {
        return 2 * static_cast<int>(inventory.cpu_nodes.at(entry.first).pairs.size()) >= entry.second * per_cell;
      });
  // Whole free cores first even for single threads: a core's two threads then serve one VM.
  std::map<int, std::vector<int>> order;
  for (const auto& [id, count] : cells_on) {
    const CpuNode& node = inventory.cpu_nodes.at(id);
    auto& cpus = order[id];
    for (const auto& [a, b] : node.pairs) cpus.insert(cpus.end(), {a, b});
    if (!pairs) cpus.insert(cpus.end(), node.singles.begin(), node.singles.end());
  }
  std::map<int, std::size_t> next;
  for (std::size_t i = 0; i < plan.host_nodes.size(); ++i) {
    GuestCell cell;
    cell.id = static_cast<int>(i);
    cell.host_node = plan.host_nodes[i];
    for (int j = 0; j < per_cell; ++j) {
      cell.vcpus.push_back(cell.id * per_cell + j);
      cell.host_cpus.push_back(order[cell.host_node][next[cell.host_node]++]);
    }
    cell.memory_bytes = plan.memory_per_cell;
    cell.hugepages = plan.pages_per_cell;
    placement.cells.push_back(std::move(cell));
  }
  const int cells = static_cast<int>(plan.host_nodes.size());
  placement.topology.sockets = cells;
  placement.topology.threads = pairs ? 2 : 1;
  placement.topology.cores = per_cell * cells / (cells * placement.topology.threads);
}

std::vector<std::vector<int>> subsets(const std::vector<int>& items, int size) {
  std::vector<std::vector<int>> out;
  const int n = static_cast<int>(items.size());
  if (size < 0 || size > n) return out;
  std::vector<int> index(static_cast<std::size_t>(size));
  for (int i = 0; i < size; ++i) index[i] = i;
  while (true) {
    std::vector<int> subset;
    subset.reserve(index.size());
    for (const int i : index) subset.push_back(items[i]);
    out.push_back(std::move(subset));
    int i = size - 1;
    while (i >= 0 && index[i] == n - size + i) --i;
    if (i < 0) return out;
    ++index[i];
    for (int j = i + 1; j < size; ++j) index[j] = index[j - 1] + 1;
  }
}

}  // namespace hostagent::numa::placement_detail
