// Placement in steps: take stock of what is free (placement_inventory), check the host has enough
// of each device at all, then for each set of NUMA nodes, fewest first, pick GPUs (an exact search,
// placement_gpus), their VFs, the extra VFs and NVMe, the guest cells and their CPUs and memory
// (placement_cells), and keep the best-scoring placement that fits.
#include "hostagent/numa/placement.hpp"

#include <algorithm>
#include <climits>
#include <cstdio>
#include <map>
#include <set>
#include <tuple>

#include "hostagent/common/text.hpp"
#include "hostagent/numa/affinity.hpp"
#include "hostagent/numa/p2p_isolation.hpp"
#include "placement_cells.hpp"
#include "placement_gpus.hpp"
#include "placement_inventory.hpp"

namespace hostagent::numa {
namespace {

using placement_detail::CellPlan;
using placement_detail::FreeDevice;
using placement_detail::GpuCandidate;
using placement_detail::GpuScore;
using placement_detail::GpuSearch;
using placement_detail::Inventory;
using placement_detail::kUnknownNode;

Error invalid(std::string message) {
  return Error{ErrorCode::invalid_argument, std::move(message)};
}
Error no_fit(std::string message) {
  return Error{ErrorCode::does_not_fit, std::move(message)};
}

std::string plural(int count, const std::string& one, const std::string& many) {
  return std::to_string(count) + " " + (count == 1 ? one : many);
}

Status validate(const PlacementRequest& r) {
  if (r.vcpus <= 0) return invalid("vcpus must be at least 1, got " + std::to_string(r.vcpus));
  if (r.memory_bytes == 0) return invalid("memory_bytes must be more than 0");
  if (r.hugepage_size_bytes == 0) return invalid("hugepage_size_bytes must be more than 0");
  const std::string page = text::binary_size(r.hugepage_size_bytes);
  if (r.memory_bytes % r.hugepage_size_bytes != 0) {
    return invalid("memory_bytes " + std::to_string(r.memory_bytes) + " is not a whole number of " + page +
                   " hugepages");
  }
  if (r.gpus < 0 || r.vfs_per_gpu < 0 || r.extra_vfs < 0 || r.whole_nics < 0 || r.nvme < 0) {
    return invalid("gpus, vfs_per_gpu, extra_vfs, whole_nics and nvme cannot be negative");
  }
  if (!r.guest_cells) return ok_status();
  const int cells = *r.guest_cells;
  if (cells <= 0) return invalid("guest_cells must be at least 1, got " + std::to_string(cells));
  if (r.vcpus % cells != 0) {
    return invalid("vcpus " + std::to_string(r.vcpus) + " do not divide evenly among " + std::to_string(cells) +
                   " guest_cells");
  }
  const auto per_cell = r.memory_bytes / static_cast<uint64_t>(cells);
  if (r.memory_bytes % static_cast<uint64_t>(cells) != 0 || per_cell % r.hugepage_size_bytes != 0) {
    return invalid("memory_bytes " + std::to_string(r.memory_bytes) + " split over " + std::to_string(cells) +
                   " guest_cells is not a whole number of " + page + " hugepages per cell");
  }
  return ok_status();
}

// "needs 8 GPUs with a NIC VF on their switch".
std::string gpus_wanted(const PlacementRequest& r) {
  std::string out = "needs " + plural(r.gpus, "GPU", "GPUs");
  for (std::size_t i = 0; i < r.gpu_ids.size(); ++i) {
    char id[16];
    std::snprintf(id, sizeof id, "%04x:%04x", r.gpu_ids[i].vendor_id, r.gpu_ids[i].device_id);
    out += (i == 0 ? " of " : " or ") + std::string(id);
  }
  if (r.vfs_per_gpu > 0) {
    out += " with " + (r.vfs_per_gpu == 1 ? std::string("a NIC VF") : std::to_string(r.vfs_per_gpu) + " NIC VFs each") +
           (r.nic_strict ? " on their switch" : " on their switch or NUMA node");
  }
  return out;
}

Status check_gpu_supply(const Inventory& inv, const GpuSearch& search, const PlacementRequest& r) {
  const int most = search.most_gpus();
  if (most >= r.gpus) return ok_status();
  std::string why = placement_detail::describe(inv.unusable_gpus);
  if (const int short_of_vfs = static_cast<int>(inv.gpus.size()) - most; short_of_vfs > 0) {
    why += (why.empty() ? "" : "; ") + std::to_string(short_of_vfs) + " without enough free VFs " +
           (r.nic_strict ? "under their switch" : "on their NUMA node");
    if (!inv.unusable_vfs.empty()) why += " (" + placement_detail::describe(inv.unusable_vfs) + ")";
  }
  if (inv.gpus.empty() && inv.unusable_gpus.empty())
    why = r.gpu_ids.empty() ? "the host has no GPU" : "the host has no such GPU";
  return no_fit(gpus_wanted(r) + "; free: " + std::to_string(most) + (why.empty() ? "" : " (" + why + ")"));
}

// The host must have enough of each device somewhere before node sets are worth trying.
Status check_supply(const Inventory& inv, const GpuSearch& search, const PlacementRequest& r) {
  if (r.gpus > 0) HA_TRY_STATUS(check_gpu_supply(inv, search, r));
  const int vfs_left = static_cast<int>(inv.vfs.size()) - r.gpus * r.vfs_per_gpu;
  if (r.extra_vfs > vfs_left) {
    const std::string why = placement_detail::describe(inv.unusable_vfs);
    return no_fit("needs " + plural(r.extra_vfs, "extra VF", "extra VFs") + " besides the GPUs' " +
                  std::to_string(r.gpus * r.vfs_per_gpu) + "; free: " + std::to_string(std::max(vfs_left, 0)) +
                  (why.empty() ? "" : " (" + why + ")"));
  }
  if (!inv.unusable_nvswitches.empty()) {
    const int total = static_cast<int>(inv.nvswitches.size() + inv.unusable_nvswitches.size());
    return no_fit("needs the host's " + plural(total, "NVSwitch", "NVSwitches") + " with all " +
                  plural(r.gpus, "GPU", "GPUs") +
                  " (full passthrough: the VM trains the fabric); free: " + std::to_string(inv.nvswitches.size()) +
                  " (" + placement_detail::describe(inv.unusable_nvswitches) + ")");
  }
  if (r.whole_nics > static_cast<int>(inv.whole_nics.size())) {
    const std::string why = placement_detail::describe(inv.unusable_whole_nics);
    return no_fit("needs " + plural(r.whole_nics, "whole NIC", "whole NICs") +
                  " (a NIC PF with no VF enabled); free: " + std::to_string(inv.whole_nics.size()) +
                  (why.empty() ? "" : " (" + why + ")"));
  }
  if (r.nvme > static_cast<int>(inv.nvme.size())) {
    const std::string why = placement_detail::describe(inv.unusable_nvme);
    return no_fit("needs " + std::to_string(r.nvme) + " NVMe; free: " + std::to_string(inv.nvme.size()) +
                  (why.empty() ? "" : " (" + why + ")"));
  }
  return ok_status();
}

struct Devices {
  std::vector<const GpuCandidate*> gpus;
  std::vector<std::vector<const FreeDevice*>> gpu_vfs;  // per GPU
  std::vector<const FreeDevice*> extra_vfs;
  std::vector<const FreeDevice*> whole_nics;
  std::vector<const FreeDevice*> nvme;
};

// Every GPU first takes the VFs under its own switch (PIX), and only then (not strict) those under a
// switch further up that it shares (PXB), then others on its node, so that a GPU short of local VFs
// never takes one that another GPU's switch has.
std::vector<std::vector<const FreeDevice*>> pick_gpu_vfs(const Inventory& inv, const PlacementRequest& r,
                                                         const std::vector<const GpuCandidate*>& gpus,
                                                         std::set<PciAddress>& used) {
  std::vector<std::vector<const FreeDevice*>> out(gpus.size());
  const auto wanted = static_cast<std::size_t>(r.vfs_per_gpu);
  const auto take = [&](std::size_t i, const auto& fits) {
    for (const auto& vf : inv.vfs) {
      if (out[i].size() >= wanted) return;
      if (used.count(vf.function->address) != 0 || !fits(vf)) continue;
      used.insert(vf.function->address);
      out[i].push_back(&vf);
    }
  };
  for (std::size_t i = 0; i < gpus.size(); ++i) {
    const auto* gpu = gpus[i];
    if (!gpu->host_switch) continue;
    take(i, [&](const FreeDevice& vf) { return vf.function->pcie_switch == gpu->host_switch && vf.node == gpu->node; });
  }
  for (std::size_t i = 0; i < gpus.size() && !r.nic_strict; ++i) {
    const auto* gpu = gpus[i];
    if (!gpu->host_switch) continue;
    take(i, [&](const FreeDevice& vf) {
      return vf.node == gpu->node && affinity(*inv.host, *gpu->gpu, *vf.function) == Affinity::pxb;
    });
  }
  for (std::size_t i = 0; i < gpus.size() && !r.nic_strict; ++i) {
    const auto* gpu = gpus[i];
    if (gpu->node != kUnknownNode) take(i, [&](const FreeDevice& vf) { return vf.node == gpu->node; });
  }
  // The GPU search counted these VFs; a shortfall here is a bug in it.
  for (const auto& vfs : out) HA_ASSERT(vfs.size() == wanted);
  return out;
}

// The `count` best-ranked devices (fewer when there are not so many), marked used.
template <typename Rank>
std::vector<const FreeDevice*> take_best(std::vector<std::pair<Rank, const FreeDevice*>>& ranked, int count,
                                         std::set<PciAddress>& used) {
  const auto taken = std::min(ranked.size(), static_cast<std::size_t>(std::max(count, 0)));
  std::partial_sort(ranked.begin(), ranked.begin() + static_cast<std::ptrdiff_t>(taken), ranked.end());
  std::vector<const FreeDevice*> out;
  for (std::size_t i = 0; i < taken; ++i) {
    out.push_back(ranked[i].second);
    used.insert(ranked[i].second->function->address);
  }
  return out;
}

// Devices not tied to a GPU: under the GPUs' switches first, then on nodes already used, then on
// nodes of unknown locality, then on new nodes, those with the most to give first.
std::vector<const FreeDevice*> pick_followers(const std::vector<FreeDevice>& pool, int count,
                                              const std::set<int>& used_nodes, const std::set<PciAddress>& gpu_switches,
                                              std::set<PciAddress>& used) {
  if (count == 0) return {};
  std::map<int, int> free_on;
  for (const auto& device : pool) {
    if (used.count(device.function->address) == 0) ++free_on[device.node];
  }
  using Rank = std::tuple<int, int, int, PciAddress>;
  std::vector<std::pair<Rank, const FreeDevice*>> ranked;
  for (const auto& device : pool) {
    if (used.count(device.function->address) != 0) continue;
    const auto& sw = device.function->pcie_switch;
    const int tier = sw && gpu_switches.count(*sw) != 0   ? 0
                     : used_nodes.count(device.node) != 0 ? 1
                     : device.node == kUnknownNode        ? 2
                                                          : 3;
    ranked.emplace_back(Rank{tier, tier == 3 ? -free_on[device.node] : 0, device.node, device.function->address},
                        &device);
  }
  return take_best(ranked, count, used);
}

// How near a device is to the nearest of the GPUs: PIX before PXB before PHB ...; unknown last.
Affinity nearest_gpu(const Inventory& inv, const std::vector<const GpuCandidate*>& gpus, const PciFunction& f) {
  Affinity best = Affinity::unknown;
  for (const auto* gpu : gpus) best = std::min(best, affinity(*inv.host, *gpu->gpu, f));
  return best;
}

// Whole NICs: those sharing a switch with the most GPUs first (PIX, then PXB), then on nodes already
// used, then anywhere. With nics.placement strict and GPUs to follow, only a NIC that shares a
// switch with one of them will do; a shortfall is the caller's to report.
std::vector<const FreeDevice*> pick_whole_nics(const Inventory& inv, const PlacementRequest& r,
                                               const std::vector<const GpuCandidate*>& gpus,
                                               const std::set<int>& used_nodes, std::set<PciAddress>& used) {
  using Rank = std::tuple<Affinity, int, int, PciAddress>;
  std::vector<std::pair<Rank, const FreeDevice*>> ranked;
  for (const auto& nic : inv.whole_nics) {
    if (used.count(nic.function->address) != 0) continue;
    const Affinity near = nearest_gpu(inv, gpus, *nic.function);
    if (r.nic_strict && !gpus.empty() && near != Affinity::pix && near != Affinity::pxb) continue;
    int served = 0;  // GPUs at that distance: a NIC between two GPUs serves both
    for (const auto* gpu : gpus) served += affinity(*inv.host, *gpu->gpu, *nic.function) == near ? 1 : 0;
    const int tier = used_nodes.count(nic.node) != 0 ? 0 : nic.node == kUnknownNode ? 1 : 2;
    ranked.emplace_back(Rank{near, -served, tier, nic.function->address}, &nic);
  }
  return take_best(ranked, r.whole_nics, used);
}

Devices pick_devices(const Inventory& inv, const PlacementRequest& r, const std::vector<const GpuCandidate*>& gpus,
                     const std::vector<int>& base_nodes) {
  Devices out;
  out.gpus = gpus;
  std::set<PciAddress> used;
  out.gpu_vfs = pick_gpu_vfs(inv, r, gpus, used);
  std::set<int> used_nodes(base_nodes.begin(), base_nodes.end());
  std::set<PciAddress> gpu_switches;
  for (const auto* gpu : gpus) {
    used_nodes.insert(gpu->node);
    if (gpu->host_switch) gpu_switches.insert(*gpu->host_switch);
  }
  out.extra_vfs = pick_followers(inv.vfs, r.extra_vfs, used_nodes, {}, used);
  for (const auto* vf : out.extra_vfs) used_nodes.insert(vf->node);
  out.whole_nics = pick_whole_nics(inv, r, gpus, used_nodes, used);
  for (const auto* nic : out.whole_nics) used_nodes.insert(nic->node);
  out.nvme = pick_followers(inv.nvme, r.nvme, used_nodes, gpu_switches, used);
  return out;
}

// Devices per cell node, nodes of unknown locality left out: these nodes get the guest cells.
std::map<int, int> devices_per_node(const Devices& d) {
  std::map<int, int> out;
  const auto count = [&](int node) {
    if (node != kUnknownNode) ++out[node];
  };
  for (std::size_t i = 0; i < d.gpus.size(); ++i) {
    count(d.gpus[i]->node);
    for (const auto* vf : d.gpu_vfs[i]) count(vf->node);
  }
  for (const auto* vf : d.extra_vfs) count(vf->node);
  for (const auto* nic : d.whole_nics) count(nic->node);
  for (const auto* nvme : d.nvme) count(nvme->node);
  return out;
}

int guest_cell_of(const Inventory& inv, const std::vector<GuestCell>& cells, const PciFunction& f) {
  return guest_cell_for(*inv.host, cells, f.numa_node);
}

PlacedDevice placed(const Inventory& inv, const std::vector<GuestCell>& cells, const PciFunction& f) {
  return PlacedDevice{f.address, f.numa_node, f.pcie_switch, guest_cell_of(inv, cells, f)};
}

// GPUs in cell order, then by address; GPUs below one root port share a clique, numbered in that
// order. A root port's one link leads to a single device or to one switch, so these are the GPUs under
// one switch, nested switches included (two GPU switches below one parent on the DGX-2 reach each
// other without the CPU), or a GPU alone.
void add_gpus(const Inventory& inv, const Devices& d, Placement& p) {
  std::vector<std::size_t> order(d.gpus.size());
  for (std::size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::vector<int> cells(d.gpus.size());
  for (std::size_t i = 0; i < cells.size(); ++i) cells[i] = guest_cell_of(inv, p.cells, *d.gpus[i]->gpu);
  std::sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) {
    return std::tie(cells[a], d.gpus[a]->gpu->address) < std::tie(cells[b], d.gpus[b]->gpu->address);
  });
  std::map<PciAddress, int> cliques;
  for (const std::size_t i : order) {
    const auto* candidate = d.gpus[i];
    PlacedGpu gpu;
    gpu.gpu = placed(inv, p.cells, *candidate->gpu);
    gpu.companions = candidate->companions;
    for (const auto* vf : d.gpu_vfs[i]) {
      gpu.vfs.push_back(placed(inv, p.cells, *vf->function));
      gpu.vfs.back().affinity = affinity(*inv.host, *candidate->gpu, *vf->function);
    }
    gpu.clique = cliques.emplace(candidate->root_key, static_cast<int>(cliques.size())).first->second;
    p.gpus.push_back(std::move(gpu));
  }
}

// Each whole NIC with its distance to the nearest placed GPU; each GPU with its nearest whole NIC,
// the one NCCL pairs it with (lowest address on a tie).
void add_whole_nics(const Inventory& inv, const Devices& d, Placement& p) {
  for (const auto* nic : d.whole_nics) {
    p.whole_nics.push_back(placed(inv, p.cells, *nic->function));
    if (!d.gpus.empty()) p.whole_nics.back().affinity = nearest_gpu(inv, d.gpus, *nic->function);
  }
  for (auto& gpu : p.gpus) {
    const auto* host_gpu = inv.host->find(gpu.gpu.address);
    for (const auto* nic : d.whole_nics) {
      const Affinity a = affinity(*inv.host, *host_gpu, *nic->function);
      if (!gpu.nic_affinity || a < *gpu.nic_affinity) {
        gpu.nic = nic->function->address;
        gpu.nic_affinity = a;
      }
    }
  }
}

struct Completed {
  Placement placement;
  int nodes = 0;  // NUMA nodes the cells and devices use
};

// The rest of a placement once its GPUs are chosen: their VFs, the other devices, cells, pins.
// base_nodes are nodes the cells use whatever the devices (for a request without GPUs).
Result<Completed> complete(const Inventory& inv, const HostPolicy& policy, const PlacementRequest& r,
                           const std::vector<const GpuCandidate*>& gpus, const std::vector<int>& base_nodes) {
  const Devices devices = pick_devices(inv, r, gpus, base_nodes);
  if (devices.whole_nics.size() < static_cast<std::size_t>(r.whole_nics)) {
    return no_fit("needs " + plural(r.whole_nics, "whole NIC", "whole NICs") +
                  " that share a PCIe switch with one of its GPUs (nics.placement strict); found " +
                  std::to_string(devices.whole_nics.size()));
  }
  auto per_node = devices_per_node(devices);
  for (const int node : base_nodes) per_node.emplace(node, 0);
  std::vector<int> nodes;
  nodes.reserve(per_node.size());
  for (const auto& [node, count] : per_node) nodes.push_back(node);
  const int cells = r.guest_cells.value_or(static_cast<int>(nodes.size()));
  HA_TRY(const CellPlan plan,
         nodes.empty()
             ? placement_detail::fit_fewest_nodes(inv, policy, r)
             : placement_detail::fit_cells(inv, policy, r, placement_detail::spread_cells(nodes, per_node, cells)));
  Completed out;
  Placement& p = out.placement;
  placement_detail::pin_cells(inv, plan, p);
  add_gpus(inv, devices, p);
  for (const auto* vf : devices.extra_vfs) p.extra_vfs.push_back(placed(inv, p.cells, *vf->function));
  add_whole_nics(inv, devices, p);
  for (const auto* nvme : devices.nvme) p.nvme.push_back(placed(inv, p.cells, *nvme->function));
  // The fabric goes whole with its GPUs; the NVSwitches add no cell: they go in their node's, or
  // the nearest (guest_cell_for), where a Sub-NUMA-Clustering board puts them on a node of their own.
  for (const auto& nvswitch : inv.nvswitches) p.nvswitches.push_back(placed(inv, p.cells, *nvswitch.function));
  std::set<int> housekeeping(policy.housekeeping_cpus.begin(), policy.housekeeping_cpus.end());
  p.emulator_cpus.assign(housekeeping.begin(), housekeeping.end());
  std::set<int> used(nodes.begin(), nodes.end());
  for (const auto& cell : p.cells) used.insert(cell.host_node);
  out.nodes = static_cast<int>(used.size());
  return out;
}

Result<Placement> place_without_gpus(const Inventory& inv, const HostPolicy& policy, const PlacementRequest& r) {
  std::vector<int> base;
  if (r.extra_vfs > 0 || r.whole_nics > 0 || r.nvme > 0) {
    // Nothing to follow: find room for the cells first, then take devices near them.
    HA_TRY(const CellPlan room, placement_detail::fit_fewest_nodes(inv, policy, r));
    base = room.host_nodes;
    base.erase(std::unique(base.begin(), base.end()), base.end());
  }
  HA_TRY(Completed done, complete(inv, policy, r, {}, base));
  return std::move(done.placement);
}

// Tries the node sets that have GPUs, fewest nodes first, and keeps the best score. Once a
// placement has every local VF there is, larger node sets cannot beat it and the search stops.
Result<Placement> place_with_gpus(const Inventory& inv, const GpuSearch& search, const HostPolicy& policy,
                                  const PlacementRequest& r) {
  const int best_local = search.best_local_vfs().value_or(0);
  std::optional<std::pair<GpuScore, Placement>> best;
  std::optional<Error> first_error;
  const int most_nodes = std::min(r.gpus, static_cast<int>(search.nodes().size()));
  for (int size = 0; size <= most_nodes; ++size) {
    if (best && best->first.local_vfs == best_local && size > best->first.nodes) break;
    for (const auto& nodes : placement_detail::subsets(search.nodes(), size)) {
      const auto choice = search.choose(nodes);
      if (!choice) continue;
      auto done = complete(inv, policy, r, choice->gpus, {});
      if (!done.ok()) {
        // Lack of room says more than an uneven split on one node set: report the first of those.
        const bool room = done.error().code == ErrorCode::does_not_fit;
        if (!first_error || (room && first_error->code != ErrorCode::does_not_fit)) first_error = done.error();
        continue;
      }
      GpuScore score = choice->score;
      score.nodes = done->nodes;
      if (!best || placement_detail::better(score, best->first)) best.emplace(score, std::move(done->placement));
    }
  }
  if (best) return std::move(best->second);
  // check_supply saw enough GPUs, so some node set had a choice and failed for another reason.
  HA_ASSERT(first_error.has_value());
  return *first_error;
}

// The placement with the GPUs `partition` allows (all, without one).
Result<Placement> place_devices(const HostModel& host, const std::vector<Allocation>& existing,
                                const HostPolicy& policy, const PlacementRequest& request,
                                const FabricPartition* partition) {
  const Inventory inventory = placement_detail::take_inventory(host, existing, policy, request, partition);
  const GpuSearch search(inventory, request);
  HA_TRY_STATUS(check_supply(inventory, search, request));
  HA_TRY(Placement placement, request.gpus == 0 ? place_without_gpus(inventory, policy, request)
                                                : place_with_gpus(inventory, search, policy, request));
  if (request.peer_to_peer) {
    auto plan = plan_p2p(host, existing, placement);
    placement.p2p_ports = std::move(plan.relaxed);
    placement.p2p_kept = std::move(plan.kept);
  }
  return placement;
}

// How many free partitions larger than `taken` stay free once it is active: what taking it spares.
int larger_spared(const std::vector<const FabricPartition*>& free, const FabricPartition& taken) {
  return static_cast<int>(std::count_if(free.begin(), free.end(), [&](const FabricPartition* other) {
    return other->gpus.size() > taken.gpus.size() && !shares_gpu(*other, taken);
  }));
}

// Why no partition of `size` GPUs is free, each partition of that size with its reason.
Error no_free_partition(const FabricReport& fabric, const std::vector<const FabricPartition*>& free, int size) {
  std::string why;
  for (const FabricPartition& partition : fabric.partitions) {
    if (static_cast<int>(partition.gpus.size()) != size) continue;
    std::string reason;
    if (partition.active) {
      reason = "active";
    } else if (auto gate = partition_gate(fabric, partition)) {
      reason = std::move(*gate);
    } else {
      for (const FabricPartition& other : fabric.partitions) {
        if (other.active && shares_gpu(other, partition)) {
          reason = "shares GPUs with active partition " + std::to_string(other.id);
          break;
        }
      }
    }
    if (!reason.empty())
      why += (why.empty() ? "" : "; ") + ("partition " + std::to_string(partition.id) + " " + reason);
  }
  std::map<size_t, size_t> by_size;
  for (const FabricPartition* partition : free) ++by_size[partition->gpus.size()];
  std::string sizes;
  for (auto it = by_size.rbegin(); it != by_size.rend(); ++it) {
    sizes += (sizes.empty() ? "" : ", ") + std::to_string(it->second) + " of " +
             plural(static_cast<int>(it->first), "GPU", "GPUs");
  }
  return no_fit(
      "needs a free Fabric Manager partition of " + plural(size, "GPU", "GPUs") +
      " (shared NVSwitch mode: a VM's GPUs are one partition); free partitions: " + (sizes.empty() ? "none" : sizes) +
      (why.empty() ? "; the host's Fabric Manager offers no partition of that size" : " (" + why + ")"));
}

// Shared NVSwitch mode: each free partition of the request's size is tried as the only GPUs there
// are. Of those that fit, the one that spares the most larger partitions (a 2-GPU VM goes into the
// 4-GPU partition another 2-GPU VM already broke, keeping the other whole), then the fewest guest
// cells, then Fabric Manager's order.
Result<Placement> place_in_partition(const HostModel& host, const std::vector<Allocation>& existing,
                                     const HostPolicy& policy, const PlacementRequest& request) {
  const FabricReport& fabric = *policy.fabric;
  if (!fabric.ready) {
    return Error{ErrorCode::unavailable,
                 "Fabric Manager is not ready (initialising, or restarted and not yet told its active partitions); "
                 "a VM with GPUs waits for it"};
  }
  const auto free = free_partitions(fabric);
  std::optional<std::tuple<int, size_t, Placement>> best;  // (spared, cells, placement)
  std::optional<Error> first_error;
  for (const FabricPartition* partition : free) {
    if (static_cast<int>(partition->gpus.size()) != request.gpus) continue;
    auto placed = place_devices(host, existing, policy, request, partition);
    if (!placed) {
      if (!first_error) first_error = Error{placed.error().code, describe(*partition) + ": " + placed.error().message};
      continue;
    }
    placed->fabric_partition = *partition;
    const int spared = larger_spared(free, *partition);
    const size_t cells = placed->cells.size();
    if (!best || spared > std::get<0>(*best) || (spared == std::get<0>(*best) && cells < std::get<1>(*best))) {
      best.emplace(spared, cells, std::move(placed).value());
    }
  }
  if (best) return std::move(std::get<2>(*best));
  if (first_error) return *first_error;
  return no_free_partition(fabric, free, request.gpus);
}

}  // namespace

Result<Placement> place(const HostModel& host, const std::vector<Allocation>& existing, const HostPolicy& policy,
                        const PlacementRequest& request) {
  HA_TRY_STATUS(validate(request));
  if (policy.fabric && request.gpus > 0) return place_in_partition(host, existing, policy, request);
  return place_devices(host, existing, policy, request, nullptr);
}

int guest_cell_for(const HostModel& host, const std::vector<GuestCell>& cells, const std::optional<int>& node) {
  const int cell_node = placement_detail::cell_node(placement_detail::map_cell_nodes(host), node);
  for (const auto& cell : cells) {
    if (cell.host_node == cell_node) return cell.id;
  }
  const auto numa =
      std::find_if(host.numa_nodes.begin(), host.numa_nodes.end(), [&](const NumaNode& n) { return node == n.id; });
  if (numa == host.numa_nodes.end()) return 0;
  std::pair<int, int> best{INT_MAX, 0};  // (distance, cell)
  for (const auto& cell : cells) {
    const auto distance = numa->distances.find(cell.host_node);
    if (distance != numa->distances.end()) best = std::min(best, std::pair(distance->second, cell.id));
  }
  return best.second;
}

Allocation allocation_of(const std::string& vm, const Placement& placement, uint64_t hugepage_size_bytes) {
  Allocation out;
  out.vm = vm;
  out.hugepage_size_bytes = hugepage_size_bytes;
  for (const auto& cell : placement.cells) {
    out.cpus.insert(out.cpus.end(), cell.host_cpus.begin(), cell.host_cpus.end());
    out.hugepages[cell.host_node] += cell.hugepages;
  }
  std::sort(out.cpus.begin(), out.cpus.end());
  for (const auto& gpu : placement.gpus) {
    out.devices.push_back(gpu.gpu.address);
    out.devices.insert(out.devices.end(), gpu.companions.begin(), gpu.companions.end());
    for (const auto& vf : gpu.vfs) out.devices.push_back(vf.address);
  }
  for (const auto& vf : placement.extra_vfs) out.devices.push_back(vf.address);
  for (const auto& nic : placement.whole_nics) out.devices.push_back(nic.address);
  for (const auto& nvme : placement.nvme) out.devices.push_back(nvme.address);
  for (const auto& nvswitch : placement.nvswitches) out.devices.push_back(nvswitch.address);
  out.p2p_ports = placement.p2p_ports;
  if (placement.fabric_partition) out.fabric_partition = placement.fabric_partition->id;
  return out;
}

std::vector<PciAddress> placed_vfs(const Placement& placement) {
  std::vector<PciAddress> vfs;
  for (const auto& gpu : placement.gpus) {
    for (const auto& vf : gpu.vfs) vfs.push_back(vf.address);
  }
  for (const auto& vf : placement.extra_vfs) vfs.push_back(vf.address);
  return vfs;
}

}  // namespace hostagent::numa
