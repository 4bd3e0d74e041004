// Placement on generated hosts: small random HostModels (1-3 NUMA nodes, sometimes a CPU-less one,
// 2-8 cores of 1-2 threads per node, switches with GPUs, ConnectX PFs with VFs and NVMe, GPUs and
// NICs on root ports, audio functions sharing a GPU's IOMMU group) with random existing
// allocations, from a seeded std::mt19937 so that every run sees the same cases.
//
// Checked: nothing used twice (against the existing allocations and within the placement), pins on
// the cell's node and never on housekeeping, offline or held CPUs, IOMMU groups whole, hugepages
// within the pools, the same inputs give the same placement; and against a brute-force search over
// every subset of GPUs and every choice of their VFs: place() finds a fit exactly when one exists,
// and scores as well as the best one. The score (see GpuScore in numa/src/placement_gpus.hpp):
// first the number of VFs that share their GPU's switch (with one VF per GPU, the GPUs whose VF
// does), more is better; then the number of NUMA nodes the guest cells use, fewer is better.
#include <doctest/doctest.h>

#include <algorithm>
#include <functional>
#include <map>
#include <random>
#include <set>
#include <sstream>

#include "hostagent/numa/placement.hpp"
#include "test_support.hpp"

namespace hostagent::numa {
namespace {

using hostagent::testing::kGiB;
constexpr uint32_t kBridgeClass = 0x060400;

struct Generated {
  HostModel host;
  HostPolicy policy;
  std::vector<Allocation> existing;
};

class Generator {
 public:
  explicit Generator(uint32_t seed) : rng_(seed) {}

  int uniform(int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng_); }
  bool chance(double p) { return std::bernoulli_distribution(p)(rng_); }
  template <typename T>
  const T& pick(const std::vector<T>& items) {
    return items[static_cast<std::size_t>(uniform(0, static_cast<int>(items.size()) - 1))];
  }

  Generated host() {
    Generated g;
    add_nodes(g.host);
    for (const auto& node : g.host.numa_nodes) {
      if (!node.cpuless) add_devices(g.host, node.id);
    }
    std::sort(g.host.pci_devices.begin(), g.host.pci_devices.end(),
              [](const PciFunction& a, const PciFunction& b) { return a.address < b.address; });
    if (chance(0.1)) g.host.iommu_groups.clear();  // an hwloc XML: groups unknown
    add_policy_and_holders(g);
    return g;
  }

  PlacementRequest request(bool followers) {
    PlacementRequest r;
    // Mostly sizes that split over 2 or 3 cells, so that multi-node placements happen.
    r.vcpus = sized(8);
    r.memory_bytes = static_cast<uint64_t>(sized(12)) * kGiB;
    r.gpus = uniform(0, 4);
    r.vfs_per_gpu = uniform(0, r.gpus >= 3 ? 1 : 2);  // keeps the brute force's VF choices few
    r.nic_strict = chance(0.5);
    r.peer_to_peer = chance(0.5);
    if (chance(0.2)) r.gpu_ids = {{0x10de, 0x2330}};
    if (followers) {
      r.extra_vfs = uniform(0, 1);
      r.nvme = uniform(0, 1);
      if (chance(0.25)) {
        const int cells = uniform(1, 3);
        r.guest_cells = cells;
        r.vcpus = cells * uniform(1, 4);
        r.memory_bytes = static_cast<uint64_t>(cells * uniform(1, 4)) * kGiB;
      }
    }
    return r;
  }

 private:
  int sized(int most) {
    const double roll = std::uniform_real_distribution<double>(0, 1)(rng_);
    if (roll < 0.3) return 6 * uniform(1, std::max(most / 6, 1));
    if (roll < 0.7) return 2 * uniform(1, most / 2);
    return uniform(1, most);
  }

  void add_nodes(HostModel& h) {
    const int cpu_nodes = uniform(1, 3);
    const bool cpuless = chance(0.2);
    int next_cpu = 0;
    for (int n = 0; n < cpu_nodes; ++n) {
      NumaNode node;
      node.id = n;
      const int cores = uniform(2, 8);
      const int threads = uniform(1, 2);
      for (int c = 0; c < cores; ++c) {
        std::vector<int> siblings;
        siblings.reserve(static_cast<std::size_t>(threads));
        for (int t = 0; t < threads; ++t) siblings.push_back(next_cpu + t * cores + c);
        for (const int id : siblings) h.cpus.push_back(Cpu{id, c, n, n, siblings, !chance(0.05)});
        node.cpus.insert(node.cpus.end(), siblings.begin(), siblings.end());
      }
      std::sort(node.cpus.begin(), node.cpus.end());
      next_cpu += cores * threads;
      if (!chance(0.1)) {
        const auto total = static_cast<uint64_t>(uniform(0, 40));
        node.hugepages.push_back(HugepagePool{kGiB, total, total});
      }
      h.numa_nodes.push_back(std::move(node));
    }
    if (cpuless) {
      NumaNode memory;
      memory.id = cpu_nodes;
      memory.cpuless = true;
      memory.hugepages.push_back(HugepagePool{kGiB, 64, 64});
      h.numa_nodes.push_back(std::move(memory));
    }
    for (auto& node : h.numa_nodes) {
      for (const auto& other : h.numa_nodes) {
        node.distances[other.id] = node.id == other.id ? 10 : (node.cpuless || other.cpuless) ? 30 + other.id : 21;
      }
    }
    std::sort(h.cpus.begin(), h.cpus.end(), [](const Cpu& a, const Cpu& b) { return a.id < b.id; });
  }

  PciFunction& add(HostModel& h, PciAddress address, PciRole role, int node, uint32_t class_code) {
    PciFunction f;
    f.address = address;
    f.role = role;
    f.numa_node = node;
    f.class_code = class_code;
    f.iommu_group = next_group_;
    h.iommu_groups.push_back(IommuGroup{next_group_++, {address}});
    h.pci_devices.push_back(f);
    return h.pci_devices.back();
  }

  // Puts `member` into the IOMMU group of `owner` (a multi-function device without ACS).
  static void join_group(HostModel& h, const PciFunction& owner, PciFunction& member) {
    auto& own = *std::find_if(h.iommu_groups.begin(), h.iommu_groups.end(),
                              [&](const IommuGroup& g) { return g.id == *member.iommu_group; });
    own.members.clear();
    auto& target = *std::find_if(h.iommu_groups.begin(), h.iommu_groups.end(),
                                 [&](const IommuGroup& g) { return g.id == *owner.iommu_group; });
    target.members.push_back(member.address);
    member.iommu_group = owner.iommu_group;
  }

  // Functions behind a bridge chain (nearest first); the switch's upstream port, if any.
  void add_endpoints(HostModel& h, int node, const std::vector<PciAddress>& chain,
                     const std::optional<PciAddress>& upstream, int gpus, bool nic, bool nvme) {
    const auto place_under = [&](PciFunction& f) {
      f.parent = chain.front();
      f.bridge_chain = chain;
      f.pcie_switch = upstream;
    };
    for (int i = 0; i < gpus; ++i) {
      const PciAddress address{0, bus_++, 0, 0};
      auto& gpu = add(h, address, PciRole::gpu, node, 0x030200);
      gpu.vendor_id = 0x10de;
      gpu.device_id = chance(0.5) ? 0x2330 : 0x20b0;
      place_under(gpu);
      const PciFunction gpu_copy = gpu;
      if (chance(0.2)) {
        auto& audio = add(h, PciAddress{0, address.bus, 0, 1}, PciRole::other, node, 0x040300);
        place_under(audio);
        join_group(h, gpu_copy, audio);
      }
      if (chance(0.05)) h.pci_devices[index_of(h, address)].iommu_group = std::nullopt;
    }
    if (nic) {
      const PciAddress pf_address{0, bus_++, 0, 0};
      auto& pf = add(h, pf_address, PciRole::nic, node, 0x020000);
      place_under(pf);
      const int vfs = uniform(0, 3);
      for (int v = 0; v < vfs; ++v) {
        auto& vf = add(h, PciAddress{0, pf_address.bus, 0, static_cast<uint8_t>(1 + v)}, PciRole::nic, node, 0x020000);
        place_under(vf);
        vf.physfn = pf_address;
      }
    }
    if (nvme) place_under(add(h, PciAddress{0, bus_++, 0, 0}, PciRole::nvme, node, 0x010802));
  }

  static std::size_t index_of(const HostModel& h, const PciAddress& a) {
    return static_cast<std::size_t>(
        std::find_if(h.pci_devices.begin(), h.pci_devices.end(), [&](const PciFunction& f) { return f.address == a; }) -
        h.pci_devices.begin());
  }

  void add_devices(HostModel& h, int node) {
    const int switches = chance(0.85) ? uniform(1, 2) : 0;
    for (int s = 0; s < switches; ++s) {
      const PciAddress root{0, 0, root_dev_++, 0};
      add(h, root, PciRole::root_port, node, kBridgeClass);
      const PciAddress up{0, bus_++, 0, 0};
      add(h, up, PciRole::switch_upstream, node, kBridgeClass).bridge_chain = {root};
      const std::size_t first = h.pci_devices.size();
      // One draw a statement: the order of a call's arguments is the compiler's (gcc went right to
      // left, clang left to right), and the cases must be the same under both trees.
      const bool nvme = chance(0.5);
      const bool nic = chance(0.8);
      const int gpus = chance(0.9) ? uniform(1, 2) : 0;
      add_endpoints(h, node, {up, root}, up, gpus, nic, nvme);
      // Sometimes the switch port lands in its first GPU's group: a bridge, never a companion.
      if (first < h.pci_devices.size() && h.pci_devices[first].role == PciRole::gpu && chance(0.1) &&
          h.pci_devices[first].iommu_group) {
        const PciFunction owner = h.pci_devices[first];
        join_group(h, owner, h.pci_devices[index_of(h, up)]);
      }
    }
    if (chance(0.5)) {
      const PciAddress root{0, 0, root_dev_++, 0};
      add(h, root, PciRole::root_port, node, kBridgeClass);
      add_endpoints(h, node, {root}, std::nullopt, 1, false, false);
    }
    if (chance(0.3)) {
      const PciAddress root{0, 0, root_dev_++, 0};
      add(h, root, PciRole::root_port, node, kBridgeClass);
      add_endpoints(h, node, {root}, std::nullopt, 0, true, chance(0.5));
    }
  }

  void add_policy_and_holders(Generated& g) {
    const std::vector<std::string> vms{"a", "b", "c"};
    std::map<std::string, Allocation> by_vm;
    for (const auto& vm : vms) by_vm[vm] = Allocation{vm, {}, {}, kGiB, {}, {}, {}};
    for (const auto& cpu : g.host.cpus) {
      if (chance(0.05)) {
        g.policy.housekeeping_cpus.push_back(cpu.id);
      } else if (chance(0.1)) {
        by_vm[pick(vms)].cpus.push_back(cpu.id);
      }
    }
    for (const auto& f : g.host.pci_devices) {
      if (f.is_bridge() || (f.role == PciRole::nic && !f.physfn)) continue;
      if (chance(0.1)) by_vm[pick(vms)].devices.push_back(f.address);
    }
    for (const auto& node : g.host.numa_nodes) {
      if (node.hugepages.empty() || !chance(0.4)) continue;
      by_vm[pick(vms)].hugepages[node.id] += node.hugepages[0].total / 2;
    }
    g.policy.check_hugepages = chance(0.8);
    for (auto& [vm, allocation] : by_vm) g.existing.push_back(std::move(allocation));
    if (chance(0.2)) {  // pages of another size hold nothing in the 1 GiB pools
      g.existing.push_back(Allocation{"small-pages", {}, {}, 2ULL << 20, {{0, 100000}}, {}, {}});
    }
  }

  std::mt19937 rng_;
  uint8_t bus_ = 0x10;
  uint8_t root_dev_ = 1;
  int next_group_ = 1;
};

// ------------------------------------------------------------------------------------------------
// The brute force: every subset of usable GPUs, every choice of their VFs.

struct Free {
  std::vector<const PciFunction*> gpus;
  std::vector<const PciFunction*> vfs;
  std::map<int, int> cpus;        // CPU node -> free CPUs
  std::map<int, uint64_t> pages;  // CPU node -> free 1 GiB pages
};

std::optional<std::vector<PciAddress>> members_of(const HostModel& h, const PciFunction& f) {
  if (h.iommu_groups.empty()) return std::vector<PciAddress>{f.address};
  if (!f.iommu_group) return std::nullopt;
  for (const auto& group : h.iommu_groups) {
    if (group.id != *f.iommu_group) continue;
    std::vector<PciAddress> out;
    for (const auto& a : group.members) {
      if (!h.find(a)->is_bridge()) out.push_back(a);
    }
    return out;
  }
  return std::nullopt;
}

Free free_resources(const Generated& g, const PlacementRequest& r) {
  std::set<PciAddress> held;
  std::set<int> held_cpus(g.policy.housekeeping_cpus.begin(), g.policy.housekeeping_cpus.end());
  std::map<int, uint64_t> held_pages;
  for (const auto& a : g.existing) {
    held.insert(a.devices.begin(), a.devices.end());
    held_cpus.insert(a.cpus.begin(), a.cpus.end());
    if (a.hugepage_size_bytes != r.hugepage_size_bytes) continue;
    for (const auto& [node, pages] : a.hugepages) held_pages[node] += pages;
  }
  const auto all_free = [&](const std::vector<PciAddress>& members) {
    return std::none_of(members.begin(), members.end(), [&](const PciAddress& a) { return held.count(a) != 0; });
  };
  Free out;
  for (const auto& f : g.host.pci_devices) {
    const auto members = members_of(g.host, f);
    if (!members || !all_free(*members)) continue;
    const bool wanted = r.gpu_ids.empty() || f.device_id == r.gpu_ids[0].device_id;
    if (f.role == PciRole::gpu && wanted) out.gpus.push_back(&f);
    if (f.role == PciRole::nic && f.physfn && members->size() == 1) out.vfs.push_back(&f);
  }
  for (const auto& node : g.host.numa_nodes) {
    if (node.cpuless) continue;
    for (const auto& cpu : g.host.cpus) {
      if (cpu.numa_node == node.id && cpu.online && held_cpus.count(cpu.id) == 0) ++out.cpus[node.id];
    }
    const uint64_t total = node.hugepages.empty() ? 0 : node.hugepages[0].total;
    out.pages[node.id] = total > held_pages[node.id] ? total - held_pages[node.id] : 0;
  }
  return out;
}

// One guest cell per node in `nodes`: do vCPUs and memory split evenly, and does each node fit?
bool cells_fit(const Free& free, const HostPolicy& policy, const PlacementRequest& r, const std::set<int>& nodes) {
  const auto cells = static_cast<int>(nodes.size());
  if (cells == 0 || r.vcpus % cells != 0) return false;
  const uint64_t memory = r.memory_bytes / static_cast<uint64_t>(cells);
  if (r.memory_bytes % static_cast<uint64_t>(cells) != 0 || memory % r.hugepage_size_bytes != 0) return false;
  return std::all_of(nodes.begin(), nodes.end(), [&](int node) {
    if (free.cpus.count(node) == 0 || free.cpus.at(node) < r.vcpus / cells) return false;
    return !policy.check_hugepages || free.pages.at(node) >= memory / r.hugepage_size_bytes;
  });
}

bool shares_switch(const PciFunction& vf, const PciFunction& gpu) {
  return vf.pcie_switch && gpu.pcie_switch && *vf.pcie_switch == *gpu.pcie_switch;
}

// The most VFs under their GPU's switch over every assignment of vfs_per_gpu distinct VFs to each
// GPU; -1 when no assignment exists.
int best_vf_assignment(const Free& free, const PlacementRequest& r, const std::vector<const PciFunction*>& gpus) {
  std::vector<bool> used(free.vfs.size(), false);
  std::function<int(std::size_t, int, std::size_t)> assign = [&](std::size_t gpu, int left, std::size_t from) {
    if (gpu == gpus.size()) return 0;
    if (left == 0) return assign(gpu + 1, r.vfs_per_gpu, 0);
    int best = -1;
    for (std::size_t i = from; i < free.vfs.size(); ++i) {
      const auto& vf = *free.vfs[i];
      const bool local = shares_switch(vf, *gpus[gpu]);
      if (used[i] || !(local || (!r.nic_strict && vf.numa_node == gpus[gpu]->numa_node))) continue;
      used[i] = true;
      const int rest = assign(gpu, left - 1, i + 1);
      used[i] = false;
      if (rest >= 0) best = std::max(best, rest + (local ? 1 : 0));
    }
    return best;
  };
  return assign(0, r.vfs_per_gpu, 0);
}

struct Best {
  bool found = false;
  int local_vfs = 0;
  int nodes = 0;
};

Best brute_force(const Generated& g, const PlacementRequest& r) {
  const Free free = free_resources(g, r);
  Best best;
  if (r.gpus == 0) {
    std::vector<int> nodes;
    for (const auto& [node, count] : free.cpus) nodes.push_back(node);
    for (int mask = 1; mask < (1 << nodes.size()); ++mask) {
      std::set<int> chosen;
      for (std::size_t i = 0; i < nodes.size(); ++i) {
        if ((mask >> i) & 1) chosen.insert(nodes[i]);
      }
      const auto size = static_cast<int>(chosen.size());
      if (cells_fit(free, g.policy, r, chosen) && (!best.found || size < best.nodes)) best = {true, 0, size};
    }
    return best;
  }
  std::vector<const PciFunction*> gpus;
  std::function<void(std::size_t)> subsets = [&](std::size_t from) {
    if (static_cast<int>(gpus.size()) == r.gpus) {
      std::set<int> nodes;
      for (const auto* gpu : gpus) nodes.insert(*gpu->numa_node);
      if (!cells_fit(free, g.policy, r, nodes)) return;
      const int local = best_vf_assignment(free, r, gpus);
      const auto size = static_cast<int>(nodes.size());
      if (local >= 0 && (!best.found || local > best.local_vfs || (local == best.local_vfs && size < best.nodes))) {
        best = {true, local, size};
      }
      return;
    }
    for (std::size_t i = from; i < free.gpus.size(); ++i) {
      gpus.push_back(free.gpus[i]);
      subsets(i + 1);
      gpus.pop_back();
    }
  };
  subsets(0);
  return best;
}

// ------------------------------------------------------------------------------------------------
// Invariants of any placement.

std::string text(const Placement& p) {
  std::ostringstream out;
  const auto device = [&](const PlacedDevice& d) {
    out << d.address.to_string() << "@" << d.host_node.value_or(-1) << "/"
        << (d.host_switch ? d.host_switch->to_string() : "-") << "/c" << d.guest_cell << " ";
  };
  for (const auto& c : p.cells) {
    out << "cell " << c.id << " node " << c.host_node << " mem " << c.memory_bytes << " pages " << c.hugepages << ":";
    for (std::size_t i = 0; i < c.vcpus.size(); ++i) out << " " << c.vcpus[i] << "=" << c.host_cpus[i];
    out << "\n";
  }
  for (const auto& gpu : p.gpus) {
    out << "gpu clique " << gpu.clique << " ";
    device(gpu.gpu);
    for (const auto& c : gpu.companions) out << "+" << c.to_string() << " ";
    for (const auto& vf : gpu.vfs) device(vf);
    out << "\n";
  }
  for (const auto& vf : p.extra_vfs) device(vf);
  for (const auto& nvme : p.nvme) device(nvme);
  out << "\nemulator";
  for (const int cpu : p.emulator_cpus) out << " " << cpu;
  out << "\ntopology " << p.topology.sockets << "x" << p.topology.cores << "x" << p.topology.threads << "\n";
  return out.str();
}

const Cpu& cpu_by_id(const HostModel& h, int id) {
  return *std::find_if(h.cpus.begin(), h.cpus.end(), [&](const Cpu& c) { return c.id == id; });
}

void check_cpus(const Generated& g, const PlacementRequest& r, const Placement& p) {
  std::set<int> taken(g.policy.housekeeping_cpus.begin(), g.policy.housekeeping_cpus.end());
  for (const auto& a : g.existing) taken.insert(a.cpus.begin(), a.cpus.end());
  std::set<int> pinned;
  std::set<int> vcpus;
  for (const auto& cell : p.cells) {
    REQUIRE(cell.vcpus.size() == cell.host_cpus.size());
    vcpus.insert(cell.vcpus.begin(), cell.vcpus.end());
    const auto& node = g.host.numa_nodes[static_cast<std::size_t>(cell.host_node)];
    CHECK_FALSE(node.cpuless);
    for (std::size_t i = 0; i < cell.host_cpus.size(); ++i) {
      const auto& cpu = cpu_by_id(g.host, cell.host_cpus[i]);
      CHECK(pinned.insert(cpu.id).second);
      CHECK(taken.count(cpu.id) == 0);
      CHECK(cpu.online);
      CHECK(cpu.numa_node == std::optional<int>(cell.host_node));
      if (p.topology.threads == 2 && i % 2 == 1) {
        const auto& siblings = cpu_by_id(g.host, cell.host_cpus[i - 1]).siblings;
        CHECK(std::count(siblings.begin(), siblings.end(), cpu.id) == 1);
      }
    }
  }
  CHECK(static_cast<int>(vcpus.size()) == r.vcpus);
  CHECK((vcpus.empty() || (*vcpus.begin() == 0 && *vcpus.rbegin() == r.vcpus - 1)));
  CHECK(p.topology.sockets == static_cast<int>(p.cells.size()));
  CHECK(p.topology.sockets * p.topology.cores * p.topology.threads == r.vcpus);
}

void check_devices(const Generated& g, const PlacementRequest& r, const Placement& p) {
  std::set<PciAddress> held;
  for (const auto& a : g.existing) held.insert(a.devices.begin(), a.devices.end());
  const auto allocation = allocation_of("new", p, r.hugepage_size_bytes);
  std::set<PciAddress> mine;
  for (const auto& d : allocation.devices) {
    CHECK(mine.insert(d).second);
    CHECK(held.count(d) == 0);
  }
  REQUIRE(static_cast<int>(p.gpus.size()) == r.gpus);
  CHECK(static_cast<int>(p.extra_vfs.size()) == r.extra_vfs);
  CHECK(static_cast<int>(p.nvme.size()) == r.nvme);
  for (const auto& gpu : p.gpus) {
    const auto& f = *g.host.find(gpu.gpu.address);
    CHECK(f.role == PciRole::gpu);
    // Groups whole: every non-bridge member goes with it, and nothing else.
    const auto members = members_of(g.host, f);
    REQUIRE(members.has_value());
    std::set<PciAddress> given(gpu.companions.begin(), gpu.companions.end());
    given.insert(gpu.gpu.address);
    CHECK(given == std::set<PciAddress>(members->begin(), members->end()));
    REQUIRE(static_cast<int>(gpu.vfs.size()) == r.vfs_per_gpu);
    for (const auto& vf : gpu.vfs) {
      const auto& v = *g.host.find(vf.address);
      CHECK(v.physfn.has_value());
      const bool local = shares_switch(v, f);
      CHECK((local || (!r.nic_strict && v.numa_node == f.numa_node)));
    }
  }
  for (const auto& vf : p.extra_vfs) CHECK(g.host.find(vf.address)->physfn.has_value());
  for (const auto& nvme : p.nvme) CHECK(g.host.find(nvme.address)->role == PciRole::nvme);
}

void check_hugepages(const Generated& g, const PlacementRequest& r, const Placement& p) {
  if (!g.policy.check_hugepages) return;
  std::map<int, uint64_t> used;
  for (const auto& a : g.existing) {
    if (a.hugepage_size_bytes != r.hugepage_size_bytes) continue;
    for (const auto& [node, pages] : a.hugepages) used[node] += pages;
  }
  for (const auto& cell : p.cells) {
    CHECK(cell.hugepages * r.hugepage_size_bytes == cell.memory_bytes);
    const auto& node = g.host.numa_nodes[static_cast<std::size_t>(cell.host_node)];
    REQUIRE_FALSE(node.hugepages.empty());
    used[cell.host_node] += cell.hugepages;
    CHECK(used[cell.host_node] <= node.hugepages[0].total);  // the generator never overcommits a pool
  }
}

void check_placement(const Generated& g, const PlacementRequest& r, const Placement& p) {
  check_cpus(g, r, p);
  check_devices(g, r, p);
  check_hugepages(g, r, p);
  std::vector<int> sorted = g.policy.housekeeping_cpus;
  std::sort(sorted.begin(), sorted.end());
  CHECK(p.emulator_cpus == sorted);
}

int local_vfs(const Placement& p) {
  int local = 0;
  for (const auto& gpu : p.gpus) {
    for (const auto& vf : gpu.vfs) local += vf.host_switch && vf.host_switch == gpu.gpu.host_switch ? 1 : 0;
  }
  return local;
}

int nodes_used(const Placement& p) {
  std::set<int> nodes;
  for (const auto& cell : p.cells) nodes.insert(cell.host_node);
  return static_cast<int>(nodes.size());
}

std::string describe(const Generated& g, const PlacementRequest& r) {
  std::ostringstream out;
  out << "request: " << r.vcpus << " vCPUs, " << (r.memory_bytes >> 30) << " GiB, " << r.gpus << " GPUs x "
      << r.vfs_per_gpu << " VFs" << (r.nic_strict ? " strict" : "") << ", " << r.extra_vfs << " extra VFs, " << r.nvme
      << " NVMe, cells " << r.guest_cells.value_or(0) << "\n";
  for (const auto& f : g.host.pci_devices) {
    out << "  " << f.address.to_string() << " " << to_string(f.role) << " node " << f.numa_node.value_or(-1)
        << " switch " << (f.pcie_switch ? f.pcie_switch->to_string() : "-") << "\n";
  }
  return out.str();
}

TEST_CASE("placement properties: brute force over GPU subsets and VF choices agrees on fit and score") {
  Generator gen(20240611);
  int placed = 0;
  int refused = 0;
  int with_local_vfs = 0;
  int multi_node = 0;
  for (int i = 0; i < 600; ++i) {
    const auto g = gen.host();
    const auto r = gen.request(false);
    CAPTURE(i);
    CAPTURE(describe(g, r));
    const auto p = place(g.host, g.existing, g.policy, r);
    const auto best = brute_force(g, r);
    CHECK_MESSAGE(p.ok() == best.found, (p.ok() ? text(*p) : p.error().message));
    if (!p.ok() || !best.found) {
      refused += p.ok() ? 0 : 1;
      continue;
    }
    ++placed;
    with_local_vfs += best.local_vfs > 0 ? 1 : 0;
    multi_node += best.nodes > 1 ? 1 : 0;
    check_placement(g, r, *p);
    CHECK(local_vfs(*p) == best.local_vfs);
    CHECK(nodes_used(*p) == best.nodes);
  }
  // The generator must exercise both outcomes, or the comparison proves little.
  CHECK(placed > 150);
  CHECK(refused > 150);
  CHECK(with_local_vfs > 30);
  CHECK(multi_node > 30);
}

TEST_CASE("placement properties: nothing used twice and pins on their cell's node and groups whole and deterministic") {
  Generator gen(7);
  int placed = 0;
  for (int i = 0; i < 400; ++i) {
    auto g = gen.host();
    const auto r = gen.request(true);
    CAPTURE(i);
    CAPTURE(describe(g, r));
    const auto p = place(g.host, g.existing, g.policy, r);
    if (!p.ok()) {
      CHECK((p.error().code == ErrorCode::does_not_fit || p.error().code == ErrorCode::invalid_argument));
      CHECK_FALSE(p.error().message.empty());
      continue;
    }
    ++placed;
    check_placement(g, r, *p);
    for (const auto& cell : p->cells) CHECK(cell.id < static_cast<int>(p->cells.size()));
    // Same inputs, same placement; the order of the existing allocations is not an input.
    const auto again = place(g.host, g.existing, g.policy, r);
    REQUIRE(again.ok());
    CHECK(text(*again) == text(*p));
    auto reversed = g.existing;
    std::reverse(reversed.begin(), reversed.end());
    const auto shuffled = place(g.host, reversed, g.policy, r);
    REQUIRE(shuffled.ok());
    CHECK(text(*shuffled) == text(*p));
    // The next VM sees this one as held.
    g.existing.push_back(allocation_of("new", *p, r.hugepage_size_bytes));
    const auto next = place(g.host, g.existing, g.policy, r);
    if (next.ok()) check_placement(g, r, *next);
  }
  CHECK(placed > 40);
}

}  // namespace
}  // namespace hostagent::numa
