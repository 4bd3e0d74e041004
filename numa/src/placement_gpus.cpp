#include "placement_gpus.hpp"

#include <algorithm>
#include <tuple>

namespace hostagent::numa::placement_detail {
namespace {

using Table = GpuSearch::Table;
using Knapsack = GpuSearch::Knapsack;

GpuScore operator+(const GpuScore& a, const GpuScore& b) {
  return {a.local_vfs + b.local_vfs, a.nodes + b.nodes, a.switches + b.switches, a.roots + b.roots};
}

// The best way to take c GPUs in total from the items, for every c up to limit, taking at least
// minimum[i] from item i. Scores add up, so the lexicographic best of the whole is built from the
// best of its parts. On a tie the earlier items (lower addresses) give more.
Knapsack combine(const std::vector<const Table*>& items, const std::vector<int>& minimum, int limit) {
  Knapsack out;
  out.best.assign(static_cast<std::size_t>(limit) + 1, std::nullopt);
  out.best[0] = GpuScore{};
  for (std::size_t i = 0; i < items.size(); ++i) {
    Table next(out.best.size());
    std::vector<int> take(out.best.size(), 0);
    for (int c = limit; c >= 0; --c) {
      if (!out.best[c]) continue;
      const int most = std::min(static_cast<int>(items[i]->size()) - 1, limit - c);
      for (int t = minimum[i]; t <= most; ++t) {
        if (!(*items[i])[t]) continue;
        const GpuScore score = *out.best[c] + *(*items[i])[t];
        if (!next[c + t] || better(score, *next[c + t])) {
          next[c + t] = score;
          take[c + t] = t;
        }
      }
    }
    out.best = std::move(next);
    out.take.push_back(std::move(take));
  }
  return out;
}

// How many each item gives to make `total`, from the knapsack's choices.
std::vector<int> split(const Knapsack& knapsack, int total) {
  std::vector<int> counts(knapsack.take.size(), 0);
  for (std::size_t i = knapsack.take.size(); i-- > 0;) {
    counts[i] = knapsack.take[i][total];
    total -= counts[i];
  }
  return counts;
}

// Adds `extra` to every non-empty choice: the cost of opening one more root port or node.
Table with_cost(const Table& table, const GpuScore& extra) {
  Table out = table;
  for (std::size_t c = 1; c < out.size(); ++c) {
    if (out[c]) out[c] = *out[c] + extra;
  }
  return out;
}

std::vector<const Table*> tables_of(const auto& items) {
  std::vector<const Table*> out;
  out.reserve(items.size());
  for (const auto& item : items) out.push_back(&item.table);
  return out;
}

// The i-th GPU under a switch gets its VFs from those under the switch while they last.
Table switch_table(const GpuSearch::SwitchGroup& group, int local_vfs, const PlacementRequest& request, int limit) {
  const int v = request.vfs_per_gpu;
  const int size = std::min(static_cast<int>(group.gpus.size()), limit);
  Table table(static_cast<std::size_t>(size) + 1);
  table[0] = GpuScore{};
  int local = 0;
  for (int i = 0; i < size; ++i) {
    const int value = std::clamp(local_vfs - i * v, 0, v);
    if (request.nic_strict && value < v) break;
    local += value;
    table[i + 1] = GpuScore{local, 0, 1, 0};
  }
  return table;
}

// A node gives VFs from under its GPUs' switches first, then (not strict) any VF on the node.
// Those under the switches are on the node too, so the node has enough iff its pool covers all.
Table bucket_table(const GpuSearch::Bucket& bucket, int pool, const PlacementRequest& request) {
  Table table = with_cost(bucket.knapsack.best, GpuScore{0, bucket.node == kUnknownNode ? 0 : 1, 0, 0});
  const int v = request.vfs_per_gpu;
  for (std::size_t c = 1; c < table.size(); ++c) {
    if (!table[c]) continue;
    const int needed = static_cast<int>(c) * v;
    // A GPU whose node is unknown shares a node with no VF: only its switch can give it VFs.
    const int available = bucket.node == kUnknownNode ? table[c]->local_vfs : pool;
    if (needed > available) table[c] = std::nullopt;
  }
  return table;
}

}  // namespace

bool better(const GpuScore& a, const GpuScore& b) {
  return std::tuple(-a.local_vfs, a.nodes, a.switches, a.roots) <
         std::tuple(-b.local_vfs, b.nodes, b.switches, b.roots);
}

GpuSearch::GpuSearch(const Inventory& inventory, const PlacementRequest& request) : limit_(request.gpus) {
  // VFs under each (switch, node), and on each node.
  std::map<std::pair<PciAddress, int>, int> local;
  std::map<int, int> pool;
  for (const auto& vf : inventory.vfs) {
    if (vf.function->pcie_switch) ++local[{*vf.function->pcie_switch, vf.node}];
    ++pool[vf.node];
  }
  // node -> root port -> switch -> GPUs; maps keep every level in address order.
  std::map<int, std::map<PciAddress, std::map<PciAddress, std::vector<const GpuCandidate*>>>> tree;
  for (const auto& gpu : inventory.gpus) tree[gpu.node][gpu.root_key][gpu.switch_key].push_back(&gpu);
  for (const auto& [node, roots] : tree) {
    Bucket bucket;
    bucket.node = node;
    for (const auto& [root_key, switches] : roots) {
      RootGroup root;
      for (const auto& [switch_key, gpus] : switches) {
        SwitchGroup group{gpus, {}};
        const bool under_switch = gpus.front()->host_switch.has_value();
        group.table = switch_table(group, under_switch ? local[{switch_key, node}] : 0, request, limit_);
        root.switches.push_back(std::move(group));
      }
      root.knapsack = combine(tables_of(root.switches), std::vector<int>(root.switches.size(), 0), limit_);
      root.table = with_cost(root.knapsack.best, GpuScore{0, 0, 0, 1});
      bucket.roots.push_back(std::move(root));
    }
    bucket.knapsack = combine(tables_of(bucket.roots), std::vector<int>(bucket.roots.size(), 0), limit_);
    bucket.table = bucket_table(bucket, pool[node], request);
    if (node != kUnknownNode) nodes_.push_back(node);
    buckets_.push_back(std::move(bucket));
  }
}

int GpuSearch::most_gpus() const {
  int total = 0;
  for (const auto& bucket : buckets_) {
    for (int c = static_cast<int>(bucket.table.size()) - 1; c >= 0; --c) {
      if (bucket.table[c]) {
        total += c;
        break;
      }
    }
  }
  return total;
}

std::optional<int> GpuSearch::best_local_vfs() const {
  const auto all = combine(tables_of(buckets_), std::vector<int>(buckets_.size(), 0), limit_);
  if (!all.best[limit_]) return std::nullopt;
  return all.best[limit_]->local_vfs;
}

std::optional<GpuChoice> GpuSearch::choose(const std::vector<int>& nodes) const {
  std::vector<const Bucket*> items;
  std::vector<int> minimum;
  std::size_t matched = 0;
  for (const auto& bucket : buckets_) {
    const bool wanted = std::find(nodes.begin(), nodes.end(), bucket.node) != nodes.end();
    if (bucket.node != kUnknownNode && !wanted) continue;
    items.push_back(&bucket);
    minimum.push_back(bucket.node == kUnknownNode ? 0 : 1);
    if (bucket.node != kUnknownNode) ++matched;
  }
  if (matched != nodes.size()) return std::nullopt;  // a node in `nodes` has no GPU to give
  std::vector<const Table*> tables;
  tables.reserve(items.size());
  for (const auto* bucket : items) tables.push_back(&bucket->table);
  const auto knapsack = combine(tables, minimum, limit_);
  if (!knapsack.best[limit_]) return std::nullopt;
  GpuChoice choice;
  choice.score = *knapsack.best[limit_];
  const auto counts = split(knapsack, limit_);
  for (std::size_t i = 0; i < items.size(); ++i) {
    const auto gpus = expand(*items[i], counts[i]);
    choice.gpus.insert(choice.gpus.end(), gpus.begin(), gpus.end());
  }
  return choice;
}

// The GPUs behind a node's count: split over its root ports, then switches, lowest addresses first.
std::vector<const GpuCandidate*> GpuSearch::expand(const Bucket& bucket, int count) const {
  std::vector<const GpuCandidate*> out;
  if (count == 0) return out;
  const auto per_root = split(bucket.knapsack, count);
  for (std::size_t r = 0; r < bucket.roots.size(); ++r) {
    if (per_root[r] == 0) continue;
    const auto& root = bucket.roots[r];
    const auto per_switch = split(root.knapsack, per_root[r]);
    for (std::size_t s = 0; s < root.switches.size(); ++s) {
      const auto& gpus = root.switches[s].gpus;
      out.insert(out.end(), gpus.begin(), gpus.begin() + per_switch[s]);
    }
  }
  std::sort(out.begin(), out.end(),
            [](const GpuCandidate* a, const GpuCandidate* b) { return a->gpu->address < b->gpu->address; });
  return out;
}

}  // namespace hostagent::numa::placement_detail
