// Placement speed: an 8-GPU VM on the simulated vela2, and VMs on a generated large host (8 NUMA
// nodes, 512 CPUs, 64 GPUs, 256 VFs) that already runs 100 VMs. The baseline, measured in the same
// run, is one copy of the same HostModel: the least a caller pays to hand placement a snapshot of
// the host, so the ratio says how many snapshots one placement costs. Medians of several runs, each
// run repeating the call to rise well above the clock's resolution; the machine is shared, so only
// ratios measured side by side mean anything.
#include <stdlib.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <string>
#include <vector>

#include "bench_support.hpp"
#include "hostagent/discovery/discovery.hpp"
#include "hostagent/numa/placement.hpp"
#include "hostagent/simhost/sim_host.hpp"

namespace {

namespace fs = std::filesystem;
using hostagent::numa::Allocation;
using hostagent::numa::HostModel;
using hostagent::numa::HostPolicy;
using hostagent::numa::PciAddress;
using hostagent::numa::PciFunction;
using hostagent::numa::PciRole;
using hostagent::numa::PlacementRequest;

constexpr uint64_t kGiB = 1ULL << 30;
volatile std::size_t g_sink = 0;  // keeps the measured work from being optimised away

[[noreturn]] void fail(const std::string& what) {
  std::fprintf(stderr, "bench_placement: %s\n", what.c_str());
  std::exit(1);
}

PciFunction function(HostModel& h, PciAddress address, PciRole role, int node) {
  PciFunction f;
  f.address = address;
  f.role = role;
  f.numa_node = node;
  f.iommu_group = static_cast<int>(h.iommu_groups.size());
  h.iommu_groups.push_back({*f.iommu_group, {address}});
  return f;
}

// 8 nodes of 32 cores x 2 threads; per node 4 switches, each with 2 GPUs, a NIC PF with 8 VFs and
// 2 NVMe; 1000 free 1 GiB pages per node.
HostModel large_host() {
  HostModel h;
  constexpr int kNodes = 8, kCores = 32, kSwitches = 4;
  for (int n = 0; n < kNodes; ++n) {
    hostagent::numa::NumaNode node;
    node.id = n;
    node.hugepages.push_back({kGiB, 1000, 1000});
    for (int m = 0; m < kNodes; ++m) node.distances[m] = m == n ? 10 : 21;
    for (int c = 0; c < kCores; ++c) {
      const int a = n * kCores + c, b = a + kNodes * kCores;  // Linux numbers the second threads last
      h.cpus.push_back({a, c, n, n, {a, b}, true});
      h.cpus.push_back({b, c, n, n, {a, b}, true});
      node.cpus.insert(node.cpus.end(), {a, b});
    }
    std::sort(node.cpus.begin(), node.cpus.end());
    h.numa_nodes.push_back(node);
    for (int s = 0; s < kSwitches; ++s) {
      const int bus = 0x10 + (n * kSwitches + s) * 7;
      const PciAddress root{0, 0, static_cast<uint8_t>(1 + n * kSwitches + s), 0};
      const PciAddress up{0, static_cast<uint8_t>(bus), 0, 0};
      const auto under = [&](PciFunction f) {
        f.pcie_switch = up;
        f.bridge_chain = {up, root};
        f.parent = up;
        h.pci_devices.push_back(std::move(f));
      };
      for (int g = 0; g < 2; ++g) under(function(h, {0, static_cast<uint8_t>(bus + 1 + g), 0, 0}, PciRole::gpu, n));
      const PciAddress pf{0, static_cast<uint8_t>(bus + 3), 0, 0};
      under(function(h, pf, PciRole::nic, n));
      for (int v = 1; v <= 8; ++v) {  // VF routing IDs PF + 1 .. PF + 8
        auto vf = function(h, {0, pf.bus, static_cast<uint8_t>(v / 8), static_cast<uint8_t>(v % 8)}, PciRole::nic, n);
        vf.physfn = pf;
        under(vf);
      }
      for (int d = 0; d < 2; ++d) under(function(h, {0, static_cast<uint8_t>(bus + 4 + d), 0, 0}, PciRole::nvme, n));
    }
  }
  std::sort(h.cpus.begin(), h.cpus.end(), [](const auto& a, const auto& b) { return a.id < b.id; });
  std::sort(h.pci_devices.begin(), h.pci_devices.end(),
            [](const PciFunction& a, const PciFunction& b) { return a.address < b.address; });
  return h;
}

PlacementRequest request(int vcpus, uint64_t gib, int gpus, int vfs_per_gpu, int nvme) {
  PlacementRequest r;
  r.vcpus = vcpus;
  r.memory_bytes = gib * kGiB;
  r.gpus = gpus;
  r.vfs_per_gpu = vfs_per_gpu;
  r.nvme = nvme;
  r.peer_to_peer = gpus > 1;
  return r;
}

// 40 one-GPU VMs and 60 CPU-only VMs, placed one after another as the daemon would.
std::vector<Allocation> hundred_vms(const HostModel& host, const HostPolicy& policy) {
  std::vector<Allocation> existing;
  for (int i = 0; i < 100; ++i) {
    const auto r = i % 5 < 2 ? request(4, 16, 1, 1, 0) : request(2, 8, 0, 0, 0);
    const auto p = hostagent::numa::place(host, existing, policy, r);
    if (!p.ok()) fail("setting up VM " + std::to_string(i) + ": " + p.error().message);
    existing.push_back(hostagent::numa::allocation_of("vm" + std::to_string(i), *p, r.hugepage_size_bytes));
  }
  return existing;
}

void report(const char* what, double placement_us, double copy_us) {
  std::printf("  %-66s %9.1f us\n", what, placement_us);
  std::printf("  %-66s %9.1f us\n", "  baseline: copy of the same HostModel", copy_us);
  std::printf("  %-66s %9.2f\n", "  ratio placement / copy", placement_us / copy_us);
}

double time_placement(int runs, int repeats, const HostModel& host, const std::vector<Allocation>& existing,
                      const HostPolicy& policy, const PlacementRequest& r) {
  const auto check = hostagent::numa::place(host, existing, policy, r);
  if (!check.ok()) fail(check.error().message);
  return hostagent::bench::median_us(runs, repeats, [&] {
    const auto p = hostagent::numa::place(host, existing, policy, r);
    g_sink = g_sink + p->gpus.size();
  });
}

double time_copy(int runs, int repeats, const HostModel& host) {
  return hostagent::bench::median_us(runs, repeats, [&] {
    const HostModel copy = host;
    g_sink = g_sink + copy.pci_devices.size();
  });
}

}  // namespace

int main(int argc, char** argv) {
  const int runs = argc > 1 ? std::atoi(argv[1]) : 15;
  constexpr int kRepeats = 50;
  const HostModel vela2 = hostagent::bench::discover_builtin("vela2");
  const HostPolicy vela2_policy{{0, 48, 96, 144}, true, {}, {}, {}, {}};
  const HostModel large = large_host();
  const HostPolicy large_policy{{0, 256, 32, 288}, true, {}, {}, {}, {}};
  const auto existing = hundred_vms(large, large_policy);

  std::printf("placement, median of %d runs of %d calls each\n", runs, kRepeats);
  std::printf("vela2 (%zu CPUs, %zu PCI functions), no VM yet:\n", vela2.cpus.size(), vela2.pci_devices.size());
  report("8 GPUs + 8 VFs + 8 NVMe, 160 vCPUs, 1792 GiB",
         time_placement(runs, kRepeats, vela2, {}, vela2_policy, request(160, 1792, 8, 1, 8)),
         time_copy(runs, kRepeats, vela2));
  std::printf("generated host (%zu nodes, %zu CPUs, %zu PCI functions), %zu VMs placed:\n", large.numa_nodes.size(),
              large.cpus.size(), large.pci_devices.size(), existing.size());
  const double copy = time_copy(runs, kRepeats, large);
  report("4 GPUs + 4 VFs, 32 vCPUs, 128 GiB (one node)",
         time_placement(runs, kRepeats, large, existing, large_policy, request(32, 128, 4, 1, 0)), copy);
  report("16 GPUs + 16 VFs + 4 NVMe, 64 vCPUs, 512 GiB (two nodes)",
         time_placement(runs, kRepeats, large, existing, large_policy, request(64, 512, 16, 1, 4)), copy);
  // The quarantine is one more lookup per device and group member: one GPU in eight quarantined,
  // against the same placement with none, measured here in the same run.
  HostPolicy quarantining = large_policy;
  int gpus = 0;
  for (const auto& f : large.pci_devices) {
    if (f.role == hostagent::numa::PciRole::gpu && gpus++ % 8 == 0)
      quarantining.withheld[f.address] = {hostagent::numa::Withheld::Why::quarantined, "bench"};
  }
  const double plain = time_placement(runs, kRepeats, large, existing, large_policy, request(32, 128, 4, 1, 0));
  const double quarantined = time_placement(runs, kRepeats, large, existing, quarantining, request(32, 128, 4, 1, 0));
  std::printf("  %-66s %9.1f us\n", "4 GPUs + 4 VFs, one GPU in 8 quarantined", quarantined);
  std::printf("  %-66s %9.1f us\n", "  baseline: the same placement, none quarantined", plain);
  std::printf("  %-66s %9.2f\n", "  ratio quarantined / none", quarantined / plain);
  return 0;
}
