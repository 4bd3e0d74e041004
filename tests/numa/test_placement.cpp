// Placement on the simulated hosts (discovered from their sysfs trees, as the daemon would): where
// GPUs, VFs, NVMe, vCPUs and memory go, and what a refusal says. Generated hosts and the brute-force
// comparison are in test_placement_properties.cpp.
#include <doctest/doctest.h>

#include <algorithm>
#include <map>
#include <memory>
#include <set>

#include "hostagent/discovery/discovery.hpp"
#include "hostagent/numa/affinity.hpp"
#include "hostagent/numa/host_use.hpp"
#include "hostagent/numa/nvlink.hpp"
#include "hostagent/numa/placement.hpp"
#include "hostagent/simhost/sim_host.hpp"
#include "simulated_hosts.hpp"
#include "test_support.hpp"

namespace hostagent::numa {
namespace {

using hostagent::testing::kGiB;
using hostagent::testing::kMiB;

struct SharedHost {
  HostModel model;
};

std::unique_ptr<SharedHost> discover_spec(const simhost::HostSpec& spec) {
  auto out = std::make_unique<SharedHost>();
  out->model = testing::discover_shared(spec);
  return out;
}

simhost::HostSpec builtin(const std::string& name) {
  auto spec = simhost::builtin_host(name);
  REQUIRE_MESSAGE(spec.ok(), spec.error().message);
  return std::move(spec).value();
}

// Writing and discovering a tree takes a while; placement never changes the model, so share it.
const SharedHost* shared_builtin(const std::string& name) {
  static std::map<std::string, std::unique_ptr<SharedHost>> cache;
  auto& slot = cache[name];
  if (!slot) slot = discover_spec(builtin(name));
  return slot.get();
}

// vela1 ships with 2 VFs per ConnectX PF; this re-creates `per_pf` VFs (0: SR-IOV off) on every PF,
// at the routing IDs the PF's offset and stride give (PF0 at +2, PF1 at +9, like the real ConnectX-6 Dx).
simhost::HostSpec vela1_with_vfs(int per_pf) {
  auto spec = builtin("vela1");
  std::erase_if(spec.functions, [](const simhost::SimFunction& f) { return !f.physfn.empty(); });
  const auto vela2 = builtin("vela2");
  const auto vf_model = std::find_if(vela2.functions.begin(), vela2.functions.end(),
                                     [](const simhost::SimFunction& f) { return !f.physfn.empty(); });
  REQUIRE(vf_model != vela2.functions.end());
  std::vector<simhost::SimFunction> vfs;
  for (auto& pf : spec.functions) {
    if (pf.sriov_total_vfs == 0) continue;
    pf.sriov_num_vfs = per_pf;
    const auto pf_address = PciAddress::parse(pf.address);
    REQUIRE(pf_address.ok());
    const int pf_routing = pf_address->device * 8 + pf_address->function;
    for (int n = 0; n < per_pf; ++n) {
      const int routing = pf_routing + pf.sriov_vf_offset + n * pf.sriov_vf_stride;
      PciAddress address = *pf_address;
      address.device = static_cast<uint8_t>(routing / 8);
      address.function = static_cast<uint8_t>(routing % 8);
      simhost::SimFunction vf = *vf_model;
      vf.address = address.to_string();
      vf.parent = pf.parent;
      vf.physfn = pf.address;
      vf.numa_node = pf.numa_node;
      vf.iommu_group = std::nullopt;
      vf.net_interfaces.clear();
      vf.rdma_devices.clear();
      vfs.push_back(vf);
    }
  }
  spec.functions.insert(spec.functions.end(), vfs.begin(), vfs.end());
  return spec;
}

const Cpu& cpu_of(const HostModel& m, int id) {
  const auto it = std::find_if(m.cpus.begin(), m.cpus.end(), [&](const Cpu& c) { return c.id == id; });
  REQUIRE(it != m.cpus.end());
  return *it;
}

const PciFunction& function_of(const HostModel& m, const PciAddress& address) {
  const auto* f = m.find(address);
  REQUIRE(f != nullptr);
  return *f;
}

// What every placement must satisfy, whatever the host: 1:1 pins on the cell's node, off the
// housekeeping CPUs, SMT pairs when threads is 2, every device once.
void check_common(const HostModel& m, const HostPolicy& policy, const PlacementRequest& r, const Placement& p) {
  std::set<int> pinned;
  int vcpus = 0;
  for (const auto& cell : p.cells) {
    REQUIRE(cell.vcpus.size() == cell.host_cpus.size());
    vcpus += static_cast<int>(cell.vcpus.size());
    for (std::size_t i = 0; i < cell.host_cpus.size(); ++i) {
      const int cpu = cell.host_cpus[i];
      CHECK(pinned.insert(cpu).second);
      CHECK(cpu_of(m, cpu).numa_node == std::optional<int>(cell.host_node));
      CHECK(std::count(policy.housekeeping_cpus.begin(), policy.housekeeping_cpus.end(), cpu) == 0);
      if (p.topology.threads == 2 && i % 2 == 1) {
        const auto& siblings = cpu_of(m, cell.host_cpus[i - 1]).siblings;
        CHECK(std::count(siblings.begin(), siblings.end(), cpu) == 1);
      }
    }
    CHECK(cell.memory_bytes * p.cells.size() == r.memory_bytes);
  }
  CHECK(vcpus == r.vcpus);
  CHECK(p.topology.sockets * p.topology.cores * p.topology.threads == r.vcpus);
  const auto allocation = allocation_of("x", p, r.hugepage_size_bytes);
  const std::set<PciAddress> devices(allocation.devices.begin(), allocation.devices.end());
  CHECK(devices.size() == allocation.devices.size());
  CHECK(static_cast<int>(p.gpus.size()) == r.gpus);
  CHECK(static_cast<int>(p.nvme.size()) == r.nvme);
  CHECK(static_cast<int>(p.extra_vfs.size()) == r.extra_vfs);
}

HostPolicy vela2_policy() {
  return HostPolicy{{0, 96, 48, 144}, true, {}, {}, {}, {}};
}  // one core per socket

PlacementRequest vela2_full() {
  PlacementRequest r;
  r.vcpus = 160;
  r.memory_bytes = 1792 * kGiB;
  r.gpus = 8;
  r.vfs_per_gpu = 1;
  r.nvme = 8;
  r.peer_to_peer = true;
  return r;
}

PlacementRequest one_gpu(int vcpus = 16, uint64_t memory = 64 * kGiB) {
  PlacementRequest r;
  r.vcpus = vcpus;
  r.memory_bytes = memory;
  r.gpus = 1;
  r.vfs_per_gpu = 1;
  return r;
}

PlacementRequest cpus_only(int vcpus, uint64_t memory) {
  PlacementRequest r;
  r.vcpus = vcpus;
  r.memory_bytes = memory;
  return r;
}

TEST_CASE("placement: vela2 8 GPUs with a VF under each GPU's switch and 160 vCPUs and 1792 GiB and 8 NVMe") {
  const auto host = shared_builtin("vela2");
  const auto& m = host->model;
  const auto policy = vela2_policy();
  const auto r = vela2_full();
  const auto p = place(m, {}, policy, r);
  REQUIRE_MESSAGE(p.ok(), p.error().message);
  check_common(m, policy, r, *p);

  REQUIRE(p->cells.size() == 2);
  for (int i = 0; i < 2; ++i) {
    CHECK(p->cells[i].host_node == i);
    CHECK(p->cells[i].vcpus.size() == 80);
    CHECK(p->cells[i].vcpus.front() == 80 * i);
    CHECK(p->cells[i].hugepages == 896);
  }
  CHECK(p->topology.sockets == 2);
  CHECK(p->topology.threads == 2);
  CHECK(p->topology.cores == 40);
  CHECK(p->emulator_cpus == std::vector<int>{0, 48, 96, 144});
  // The first core after the housekeeping one: vCPUs 0 and 1 on CPUs 1 and 97.
  CHECK(p->cells[0].host_cpus[0] == 1);
  CHECK(p->cells[0].host_cpus[1] == 97);

  std::set<int> cliques;
  for (const auto& gpu : p->gpus) {
    CAPTURE(gpu.gpu.address.to_string());
    REQUIRE(gpu.vfs.size() == 1);
    REQUIRE(gpu.gpu.host_switch.has_value());
    CHECK(gpu.vfs[0].host_switch == gpu.gpu.host_switch);
    CHECK(function_of(m, gpu.vfs[0].address).physfn.has_value());
    CHECK(gpu.gpu.guest_cell == *gpu.gpu.host_node);
    CHECK(gpu.vfs[0].guest_cell == gpu.gpu.guest_cell);
    CHECK(gpu.companions.empty());
    cliques.insert(gpu.clique);
  }
  CHECK(cliques.size() == 8);  // one H100 per switch: every GPU its own clique
  CHECK(p->gpus.front().gpu.address.to_string() == "0000:18:00.0");
  CHECK(p->gpus.front().vfs[0].address.to_string() == "0000:19:00.1");
  CHECK(p->gpus.back().clique == 7);
  std::set<PciAddress> gpu_switches;
  for (const auto& gpu : p->gpus) gpu_switches.insert(*gpu.gpu.host_switch);
  for (const auto& nvme : p->nvme) {
    REQUIRE(nvme.host_switch.has_value());
    CHECK(gpu_switches.count(*nvme.host_switch) == 1);
    CHECK(nvme.guest_cell == *nvme.host_node);
  }

  // All 8 GPUs of the baseboard: its 4 NVSwitches go with them, each in its node's cell.
  REQUIRE(p->nvswitches.size() == 4);
  for (const auto& nvswitch : p->nvswitches) CHECK(nvswitch.guest_cell == *nvswitch.host_node);

  const auto allocation = allocation_of("train-1", *p, r.hugepage_size_bytes);
  CHECK(allocation.cpus.size() == 160);
  CHECK(allocation.devices.size() == 28);
  CHECK(allocation.hugepages == std::map<int, uint64_t>{{0, 896}, {1, 896}});
}

TEST_CASE("placement: vela1 with SR-IOV on gives 8 A100 two VFs each from the dual-port NIC under their switch") {
  const auto host = discover_spec(vela1_with_vfs(2));
  const auto& m = host->model;
  const HostPolicy policy{{0, 48, 24, 72}, true, {}, {}, {}, {}};
  PlacementRequest r;
  r.vcpus = 88;
  r.memory_bytes = 1200 * kGiB;
  r.gpus = 8;
  r.vfs_per_gpu = 2;
  r.nvme = 8;
  r.peer_to_peer = true;
  const auto p = place(m, {}, policy, r);
  REQUIRE_MESSAGE(p.ok(), p.error().message);
  check_common(m, policy, r, *p);
  REQUIRE(p->cells.size() == 2);
  CHECK(p->cells[0].host_cpus.size() == 44);
  CHECK(p->topology.threads == 2);
  std::map<int, int> per_clique;
  for (const auto& gpu : p->gpus) {
    REQUIRE(gpu.vfs.size() == 2);
    for (const auto& vf : gpu.vfs) CHECK(vf.host_switch == gpu.gpu.host_switch);
    ++per_clique[gpu.clique];
  }
  // Two A100 per switch: four cliques of two.
  CHECK(per_clique == std::map<int, int>{{0, 2}, {1, 2}, {2, 2}, {3, 2}});
}

TEST_CASE("placement: vela1 with SR-IOV off (no VFs created) refuses VFs and places GPUs without them") {
  const auto host = discover_spec(vela1_with_vfs(0));
  const HostPolicy policy{{0, 48}, true, {}, {}, {}, {}};
  auto r = one_gpu();
  const auto refused = place(host->model, {}, policy, r);
  REQUIRE_FALSE(refused.ok());
  CHECK(refused.error().code == ErrorCode::does_not_fit);
  CHECK(refused.error().message ==
        "needs 1 GPU with a NIC VF on their switch; free: 0 (8 without enough free VFs under their switch)");
  r.vfs_per_gpu = 0;
  r.gpus = 2;
  r.peer_to_peer = true;
  const auto p = place(host->model, {}, policy, r);
  REQUIRE_MESSAGE(p.ok(), p.error().message);
  check_common(host->model, policy, r, *p);
  // The two A100 that share the first switch: one clique.
  REQUIRE(p->gpus.size() == 2);
  CHECK(p->gpus[0].gpu.address.to_string() == "0000:19:00.0");
  CHECK(p->gpus[1].gpu.address.to_string() == "0000:1a:00.0");
  CHECK(p->gpus[0].clique == 0);
  CHECK(p->gpus[1].clique == 0);
}

TEST_CASE("placement: vela2 one GPU and then two GPUs go to the lowest free switches of one node") {
  const auto host = shared_builtin("vela2");
  const auto& m = host->model;
  const auto policy = vela2_policy();
  const auto first = place(m, {}, policy, one_gpu());
  REQUIRE_MESSAGE(first.ok(), first.error().message);
  check_common(m, policy, one_gpu(), *first);
  REQUIRE(first->cells.size() == 1);
  CHECK(first->cells[0].host_node == 0);
  CHECK(first->gpus[0].gpu.address.to_string() == "0000:18:00.0");
  CHECK(first->gpus[0].vfs[0].address.to_string() == "0000:19:00.1");
  CHECK(first->topology.threads == 2);
  CHECK(first->topology.cores == 8);

  auto two = one_gpu(32, 128 * kGiB);
  two.gpus = 2;
  two.peer_to_peer = true;
  const std::vector<Allocation> existing{allocation_of("a", *first, one_gpu().hugepage_size_bytes)};
  const auto second = place(m, existing, policy, two);
  REQUIRE_MESSAGE(second.ok(), second.error().message);
  check_common(m, policy, two, *second);
  REQUIRE(second->cells.size() == 1);
  CHECK(second->cells[0].host_node == 0);
  REQUIRE(second->gpus.size() == 2);
  CHECK(second->gpus[0].gpu.address.to_string() == "0000:29:00.0");
  CHECK(second->gpus[1].gpu.address.to_string() == "0000:3a:00.0");
  CHECK(second->gpus[0].clique == 0);
  CHECK(second->gpus[1].clique == 1);
  // None of the first VM's CPUs.
  for (const int cpu : second->cells[0].host_cpus) {
    CHECK(std::count(existing[0].cpus.begin(), existing[0].cpus.end(), cpu) == 0);
  }
}

TEST_CASE("placement: vela2 takes one 1-GPU VM per switch until none is left and says who holds them") {
  const auto host = shared_builtin("vela2");
  const auto policy = vela2_policy();
  std::vector<Allocation> existing;
  for (int i = 0; i < 8; ++i) {
    const auto p = place(host->model, existing, policy, one_gpu());
    REQUIRE_MESSAGE(p.ok(), p.error().message);
    check_common(host->model, policy, one_gpu(), *p);
    CHECK(p->cells[0].host_node == (i < 4 ? 0 : 1));
    existing.push_back(allocation_of("vm" + std::to_string(i), *p, kGiB));
  }
  const auto refused = place(host->model, existing, policy, one_gpu());
  REQUIRE_FALSE(refused.ok());
  CHECK(refused.error().code == ErrorCode::does_not_fit);
  CHECK(refused.error().message.find("free: 0 (0000:18:00.0 held by vm vm0; 0000:29:00.0 held by vm vm1;") !=
        std::string::npos);
}

TEST_CASE("placement: a GPU with an audio function takes it as a companion (quirks host)") {
  const auto host = shared_builtin("quirks");
  const auto& m = host->model;
  const HostPolicy policy{{}, false, {}, {}, {}, {}};  // the quirks host has no hugepage pools
  auto r = cpus_only(4, 8 * kGiB);
  r.gpus = 1;
  r.gpu_ids = {{0x10de, 0x2230}};  // the RTX A6000
  const auto p = place(m, {}, policy, r);
  REQUIRE_MESSAGE(p.ok(), p.error().message);
  check_common(m, policy, r, *p);
  REQUIRE(p->gpus.size() == 1);
  CHECK(p->gpus[0].gpu.address.to_string() == "0000:01:00.0");
  REQUIRE(p->gpus[0].companions.size() == 1);
  CHECK(p->gpus[0].companions[0].to_string() == "0000:01:00.1");
  const auto allocation = allocation_of("desk", *p, r.hugepage_size_bytes);
  CHECK(std::count(allocation.devices.begin(), allocation.devices.end(), p->gpus[0].companions[0]) == 1);

  // Held audio function: the GPU cannot go without it.
  const Allocation audio_held{"sound", {}, {p->gpus[0].companions[0]}, kGiB, {}, {}, {}};
  const auto refused = place(m, {audio_held}, policy, r);
  REQUIRE_FALSE(refused.ok());
  CHECK(refused.error().message == "needs 1 GPU of 10de:2230; free: 0 (0000:01:00.0 held by vm sound)");
}

TEST_CASE("placement: a CPU-less node is never used for vCPUs and its GPU's cell is on the nearest node") {
  auto spec = builtin("quirks");
  for (auto& f : spec.functions) {
    if (f.address == "0000:83:00.0") f.numa_node = 2;  // GPU memory node, as on Grace
  }
  const auto host = discover_spec(spec);
  const auto& m = host->model;
  const HostPolicy policy{{0}, false, {}, {}, {}, {}};
  auto r = cpus_only(14, 14 * kGiB);
  const auto wide = place(m, {}, policy, r);
  REQUIRE_MESSAGE(wide.ok(), wide.error().message);
  check_common(m, policy, r, *wide);
  REQUIRE(wide->cells.size() == 2);
  CHECK(wide->cells[0].host_node == 0);
  CHECK(wide->cells[1].host_node == 1);

  r = cpus_only(4, 4 * kGiB);
  r.gpus = 1;
  r.gpu_ids = {{0x10de, 0x20b0}};
  r.vfs_per_gpu = 0;
  // Node 0's A100 is held, so the A100 on the CPU-less node is the one left.
  const Allocation held{"other", {}, {*PciAddress::parse("0000:02:00.0")}, kGiB, {}, {}, {}};
  const auto p = place(m, {held}, policy, r);
  REQUIRE_MESSAGE(p.ok(), p.error().message);
  check_common(m, policy, r, *p);
  REQUIRE(p->gpus.size() == 1);
  CHECK(p->gpus[0].gpu.host_node == std::optional<int>(2));
  REQUIRE(p->cells.size() == 1);
  CHECK(p->cells[0].host_node == 1);  // distance 30 to node 1, 40 to node 0
  CHECK(p->gpus[0].gpu.guest_cell == 0);
  for (const auto& cell : p->cells) CHECK(cell.host_node != 2);
}

TEST_CASE("placement: a second 8-GPU VM on vela2 is refused naming the GPUs and the VM that holds them") {
  const auto host = shared_builtin("vela2");
  const auto policy = vela2_policy();
  const auto r = vela2_full();
  const auto first = place(host->model, {}, policy, r);
  REQUIRE_MESSAGE(first.ok(), first.error().message);
  const std::vector<Allocation> existing{allocation_of("train-3", *first, r.hugepage_size_bytes)};
  const auto second = place(host->model, existing, policy, r);
  REQUIRE_FALSE(second.ok());
  CHECK(second.error().code == ErrorCode::does_not_fit);
  CHECK(second.error().message ==
        "needs 8 GPUs with a NIC VF on their switch; free: 0 (0000:18:00.0, 0000:29:00.0, 0000:3a:00.0, "
        "0000:4b:00.0, 0000:9a:00.0, 0000:ab:00.0, 0000:bc:00.0 and 0000:cd:00.0 held by vm train-3)");

  // Two of them back: the message counts the six still held and the two free.
  auto partial = existing;
  partial[0].devices.erase(partial[0].devices.begin(), partial[0].devices.begin() + 2);  // GPU 0 and its VF
  partial[0].p2p_ports.clear();  // else GPU 0 stays fenced in train-3's peer-to-peer domain
  const auto again = place(host->model, partial, policy, r);
  REQUIRE_FALSE(again.ok());
  CHECK(again.error().message.find("free: 1 (0000:29:00.0, ") != std::string::npos);
}

TEST_CASE("placement: too many vCPUs is refused with the node and the shortfall and who holds the CPUs") {
  const auto host = shared_builtin("vela2");
  const auto policy = vela2_policy();
  const auto a = place(host->model, {}, policy, cpus_only(80, 80 * kGiB));
  REQUIRE_MESSAGE(a.ok(), a.error().message);
  REQUIRE(a->cells.size() == 1);
  CHECK(a->cells[0].host_node == 0);
  const std::vector<Allocation> existing{allocation_of("a", *a, kGiB)};

  // Node 0 has 14 CPUs left: a 40-vCPU VM with a GPU goes to node 1's GPUs instead.
  const auto moved = place(host->model, existing, policy, one_gpu(40));
  REQUIRE_MESSAGE(moved.ok(), moved.error().message);
  CHECK(moved->cells[0].host_node == 1);
  CHECK(moved->gpus[0].gpu.address.to_string() == "0000:9a:00.0");

  const auto refused = place(host->model, existing, policy, one_gpu(100));
  REQUIRE_FALSE(refused.ok());
  CHECK(refused.error().code == ErrorCode::does_not_fit);
  CHECK(refused.error().message == "needs 100 CPUs on NUMA node 0; free: 14 (80 held by vm a, 2 housekeeping)");

  const auto too_wide = place(host->model, {}, policy, cpus_only(200, 200 * kGiB));
  REQUIRE_FALSE(too_wide.ok());
  CHECK(too_wide.error().message == "needs 100 CPUs on NUMA node 0; free: 94 (2 housekeeping)");
}

TEST_CASE("placement: exhausted hugepages are refused with the pool and the shortfall and who holds them") {
  const auto host = shared_builtin("vela2");
  const auto policy = vela2_policy();
  const auto b = place(host->model, {}, policy, cpus_only(8, 800 * kGiB));
  REQUIRE_MESSAGE(b.ok(), b.error().message);
  const std::vector<Allocation> existing{allocation_of("b", *b, kGiB)};
  const auto moved = place(host->model, existing, policy, one_gpu(8, 200 * kGiB));
  REQUIRE_MESSAGE(moved.ok(), moved.error().message);
  CHECK(moved->cells[0].host_node == 1);

  const auto refused = place(host->model, existing, policy, one_gpu(8, 1000 * kGiB));
  REQUIRE_FALSE(refused.ok());
  CHECK(refused.error().code == ErrorCode::does_not_fit);
  CHECK(refused.error().message == "needs 1000 hugepages of 1 GiB on node 0; free: 100 (800 held by vm b)");

  // Pages of another size are another pool: vela2 has no 2 MiB pages at all.
  auto small = one_gpu(8, 2 * kGiB);
  small.hugepage_size_bytes = 2 * kMiB;
  const auto no_pool = place(host->model, {}, policy, small);
  REQUIRE_FALSE(no_pool.ok());
  CHECK(no_pool.error().message == "needs 1024 hugepages of 2 MiB on node 0; free: 0");
  // Unless the host cannot tell its pools: then memory is placed by node without the check.
  const auto unchecked = place(host->model, {}, HostPolicy{{0, 96, 48, 144}, false, {}, {}, {}, {}}, small);
  REQUIRE_MESSAGE(unchecked.ok(), unchecked.error().message);
  CHECK(unchecked->cells[0].hugepages == 1024);
}

TEST_CASE("placement: hugepages the kernel does not have free are not placed, whatever the accounting says") {
  const auto host = shared_builtin("vela2");
  auto policy = vela2_policy();
  // Pages taken outside hostagent: node 0's pool has 50 left, though no VM holds any.
  policy.unclaimed_hugepages = {{{0, kGiB}, 50}, {{1, kGiB}, 900}};
  const auto moved = place(host->model, {}, policy, one_gpu(8, 200 * kGiB));
  REQUIRE_MESSAGE(moved.ok(), moved.error().message);
  CHECK(moved->cells[0].host_node == 1);

  policy.unclaimed_hugepages[{1, kGiB}] = 10;
  const auto refused = place(host->model, {}, policy, one_gpu(8, 200 * kGiB));
  REQUIRE_FALSE(refused.ok());
  CHECK(refused.error().code == ErrorCode::does_not_fit);
  CHECK_MESSAGE(refused.error().message.find("free: 50 (the kernel has 50 free that no VM is still to take)") !=
                    std::string::npos,
                refused.error().message);
  // A pool the reading does not name goes by the accounting alone.
  policy.unclaimed_hugepages = {{{0, 2 * kMiB}, 0}};
  CHECK(place(host->model, {}, policy, one_gpu(8, 200 * kGiB)).ok());
}

TEST_CASE("placement: a GPU without a ConnectX under it (workstation) fails strict and non-strict VF requests") {
  const auto host = shared_builtin("workstation");
  const HostPolicy policy{{0, 8}, true, {}, {}, {}, {}};
  auto r = one_gpu(4, 1 * kGiB);
  r.hugepage_size_bytes = 2 * kMiB;
  const auto strict = place(host->model, {}, policy, r);
  REQUIRE_FALSE(strict.ok());
  CHECK(strict.error().code == ErrorCode::does_not_fit);
  CHECK(strict.error().message ==
        "needs 1 GPU with a NIC VF on their switch; free: 0 (1 without enough free VFs under their switch)");
  r.nic_strict = false;
  const auto loose = place(host->model, {}, policy, r);
  REQUIRE_FALSE(loose.ok());
  CHECK(loose.error().message ==
        "needs 1 GPU with a NIC VF on their switch or NUMA node; free: 0 (1 without enough free VFs on their NUMA "
        "node)");
  r.vfs_per_gpu = 0;
  const auto p = place(host->model, {}, policy, r);
  REQUIRE_MESSAGE(p.ok(), p.error().message);
  check_common(host->model, policy, r, *p);
  CHECK(p->gpus[0].companions.empty());  // its HDMI audio has an IOMMU group of its own here
  CHECK(p->cells[0].hugepages == 512);
}

TEST_CASE("placement: fewer GPUs than the fabric joins get no NVSwitch, and say they have no NVLink") {
  const auto host = shared_builtin("vela2");
  auto r = one_gpu();
  r.gpus = 7;
  r.vfs_per_gpu = 0;
  const auto p = place(host->model, {}, vela2_policy(), r);
  REQUIRE_MESSAGE(p.ok(), p.error().message);
  CHECK(p->nvswitches.empty());
  const auto allocation = allocation_of("seven", *p, r.hugepage_size_bytes);
  CHECK(nvlink_summary(host->model, allocation) ==
        "none: the host's NVSwitches go only to a VM with all 8 GPUs (full passthrough), so this VM's GPUs run "
        "without NVLink; its seed loads the guest's nvidia driver with NVreg_NvLinkDisable=1");
  CHECK(guest_nvlink(host->model, allocation.devices) == GuestNvlink::disabled);
  // A VM without GPUs says nothing of NVLink; one with all eight has the fabric.
  const auto cpu_only = allocation_of("cpu", *place(host->model, {}, vela2_policy(), cpus_only(4, 4 * kGiB)), kGiB);
  CHECK(nvlink_summary(host->model, cpu_only).empty());
  CHECK(guest_nvlink(host->model, cpu_only.devices) == GuestNvlink::none);
  const auto full = place(host->model, {}, vela2_policy(), vela2_full());
  REQUIRE_MESSAGE(full.ok(), full.error().message);
  const auto whole = allocation_of("full", *full, kGiB);
  CHECK(nvlink_summary(host->model, whole) ==
        "all 8 GPUs with the host's 4 NVSwitches: Fabric Manager in the guest trains the fabric");
  CHECK(guest_nvlink(host->model, whole.devices) == GuestNvlink::trained);
  // All eight GPUs without one NVSwitch would leave the fabric untrained: disabled, not trained.
  auto short_one = whole.devices;
  short_one.erase(std::find(short_one.begin(), short_one.end(), full->nvswitches.front().address));
  CHECK(guest_nvlink(host->model, short_one) == GuestNvlink::disabled);
}

TEST_CASE("placement: a host without NVSwitches gives no GPU an NVLink verdict") {
  const auto host = shared_builtin("workstation");
  std::vector<PciAddress> gpus;
  for (const auto& f : host->model.pci_devices)
    if (f.role == PciRole::gpu) gpus.push_back(f.address);
  REQUIRE_FALSE(gpus.empty());
  CHECK(guest_nvlink(host->model, gpus) == GuestNvlink::none);
}

TEST_CASE("placement: the whole fabric is refused while another VM holds an NVSwitch, naming it") {
  const auto host = shared_builtin("vela2");
  const Allocation held{"fm-test", {}, {*PciAddress::parse("0000:04:00.0")}, kGiB, {}, {}, {}};
  const auto refused = place(host->model, {held}, vela2_policy(), vela2_full());
  REQUIRE_FALSE(refused.ok());
  CHECK(refused.error().code == ErrorCode::does_not_fit);
  CHECK(refused.error().message ==
        "needs the host's 4 NVSwitches with all 8 GPUs (full passthrough: the VM trains the fabric); free: 3 "
        "(0000:04:00.0 held by vm fm-test)");
}

TEST_CASE("placement: the host's boot disk is never given, and the refusal says what the host uses it for") {
  const auto host = shared_builtin("workstation");
  const HostPolicy policy{{0, 8}, true, {}, {}, {}, {}};
  auto r = cpus_only(2, 1 * kGiB);
  r.hugepage_size_bytes = 2 * kMiB;
  r.nvme = 1;
  const auto refused = place(host->model, {}, policy, r);
  REQUIRE_FALSE(refused.ok());
  CHECK(refused.error().code == ErrorCode::does_not_fit);
  CHECK(refused.error().message ==
        "needs 1 NVMe; free: 0 (0000:02:00.0 used by the host (nvme0n1p1 mounted at /boot/efi; nvme0n1p2 mounted "
        "at /; nvme0n1p3 is swap))");
  // Without the host's use, the same disk is the NVMe to give: the refusal was the use, nothing else.
  auto model = host->model;
  for (auto& f : model.pci_devices) f.host_use.reset();
  const auto given = place(model, {}, policy, r);
  REQUIRE_MESSAGE(given.ok(), given.error().message);
  CHECK(given->nvme.at(0).address.to_string() == "0000:02:00.0");
}

TEST_CASE("placement: vela2 gives all 8 data NVMe and never its boot disk") {
  const auto host = shared_builtin("vela2");
  auto r = cpus_only(8, 8 * kGiB);
  r.nvme = 8;
  const auto p = place(host->model, {}, vela2_policy(), r);
  REQUIRE_MESSAGE(p.ok(), p.error().message);
  for (const auto& nvme : p->nvme) CHECK(nvme.address.to_string() != "0000:07:00.0");
  r.nvme = 9;
  const auto refused = place(host->model, {}, vela2_policy(), r);
  REQUIRE_FALSE(refused.ok());
  CHECK(refused.error().message.find("0000:07:00.0 used by the host (nvme0n1p1 mounted at /boot/efi") !=
        std::string::npos);
}

TEST_CASE("placement: a withheld device is never given, alone or as a group companion, and says why") {
  const auto host = shared_builtin("vela2");
  auto policy = vela2_policy();
  const auto gpu = *PciAddress::parse("0000:18:00.0");
  policy.withheld = {{gpu, {Withheld::Why::quarantined, "bind to vfio-pci failed"}}};
  const auto one = place(host->model, {}, policy, one_gpu());
  REQUIRE_MESSAGE(one.ok(), one.error().message);
  CHECK(one->gpus.at(0).gpu.address != gpu);
  auto all = one_gpu();
  all.gpus = 8;
  all.vcpus = 32;
  const auto refused = place(host->model, {}, policy, all);
  REQUIRE_FALSE(refused.ok());
  CHECK(refused.error().code == ErrorCode::does_not_fit);
  CHECK_MESSAGE(refused.error().message.find("0000:18:00.0 quarantined (bind to vfio-pci failed)") != std::string::npos,
                refused.error().message);
  // Without the quarantine the same request fits: the refusal was the quarantine, nothing else.
  CHECK(place(host->model, {}, vela2_policy(), all).ok());

  SUBCASE("a VF and an NVMe") {
    auto r = cpus_only(8, 8 * kGiB);
    r.nvme = 8;  // vela2 has eight data NVMe
    auto nvme = vela2_policy();
    nvme.withheld = {{*PciAddress::parse("0000:ad:00.0"), {Withheld::Why::quarantined, "gone from the bus"}}};
    const auto no_nvme = place(host->model, {}, nvme, r);
    REQUIRE_FALSE(no_nvme.ok());
    CHECK_MESSAGE(no_nvme.error().message.find("0000:ad:00.0 quarantined (gone from the bus)") != std::string::npos,
                  no_nvme.error().message);
  }
  SUBCASE("a companion in the GPU's IOMMU group") {
    const auto quirks = shared_builtin("quirks");  // 01:00.0 RTX A6000 shares its group with 01:00.1 audio
    HostPolicy companion{{}, false, {}, {}, {}, {}};
    companion.withheld = {{*PciAddress::parse("0000:01:00.1"), {Withheld::Why::quarantined, "gone from the bus"}}};
    auto r = one_gpu();
    r.vfs_per_gpu = 0;
    r.gpu_ids = {{0x10de, 0x2230}};
    const auto kept = place(quirks->model, {}, companion, r);
    REQUIRE_FALSE(kept.ok());
    CHECK(kept.error().message ==
          "needs 1 GPU of 10de:2230; free: 0 (0000:01:00.0 sharing its IOMMU group with 0000:01:00.1, quarantined "
          "(gone from the bus))");
  }
  SUBCASE("a device being cleaned after its tenant") {
    auto cleaning = vela2_policy();
    cleaning.withheld = {{gpu, {Withheld::Why::cleaning, "after vm a, since 2026-12-04T17:20:00Z"}}};
    const auto refused_all = place(host->model, {}, cleaning, all);
    REQUIRE_FALSE(refused_all.ok());
    CHECK_MESSAGE(refused_all.error().message.find("0000:18:00.0 being cleaned (after vm a, since "
                                                   "2026-12-04T17:20:00Z)") != std::string::npos,
                  refused_all.error().message);
  }
}

TEST_CASE("placement: a GPU whose IOMMU group holds a host-used or non-releasable member is never chosen") {
  const auto host = shared_builtin("quirks");  // 01:00.0 RTX A6000 shares its group with 01:00.1 audio
  const HostPolicy policy{{}, false, {}, {}, {}, {}};
  auto r = one_gpu(2, 1 * kGiB);
  r.vfs_per_gpu = 0;
  r.gpu_ids = {{0x10de, 0x2230}};
  const auto free = place(host->model, {}, policy, r);
  REQUIRE_MESSAGE(free.ok(), free.error().message);
  CHECK(free->gpus.at(0).companions.size() == 1);

  SUBCASE("the operator reserved the companion") {
    auto model = host->model;
    const auto unknown = mark_host_use(model, {{*PciAddress::parse("0000:01:00.1"), "reserved: host audio"}});
    CHECK(unknown.empty());
    const auto refused = place(model, {}, policy, r);
    REQUIRE_FALSE(refused.ok());
    CHECK(refused.error().message ==
          "needs 1 GPU of 10de:2230; free: 0 (0000:01:00.0 sharing its IOMMU group with 0000:01:00.1, used by the host "
          "(reserved: host audio))");
  }
  SUBCASE("the companion is on a driver hostagent may not take it from") {
    auto model = host->model;
    for (auto& f : model.pci_devices) {
      if (f.address.to_string() == "0000:01:00.1") f.driver = "snd_sof";
    }
    const auto refused = place(model, {}, policy, r);
    REQUIRE_FALSE(refused.ok());
    CHECK(refused.error().message.find("sharing its IOMMU group with 0000:01:00.1, bound to snd_sof") !=
          std::string::npos);
    // The operator lists the driver as releasable: the group may go.
    const HostPolicy releasing{{}, false, {"snd_sof", "nvidia"}, {}, {}, {}};
    const auto placed = place(model, {}, releasing, r);
    CHECK_MESSAGE(placed.ok(), placed.error().message);
  }
}

TEST_CASE("placement: non-strict VFs come from the GPU's node when its switch has none left") {
  const auto host = shared_builtin("vela2");
  const auto& m = host->model;
  const auto policy = vela2_policy();
  // Another VM holds all four VFs under the first switch, and node 1's GPUs.
  Allocation held{"net", {}, {}, kGiB, {}, {}, {}};
  for (int fn = 1; fn <= 4; ++fn) held.devices.push_back(PciAddress{0, 0x19, 0, static_cast<uint8_t>(fn)});
  for (const char* gpu : {"0000:9a:00.0", "0000:ab:00.0", "0000:bc:00.0", "0000:cd:00.0"}) {
    held.devices.push_back(*PciAddress::parse(gpu));
  }
  auto r = one_gpu();
  r.gpu_ids = {{0x10de, 0x2330}};
  const auto p = place(m, {held}, policy, r);
  REQUIRE_MESSAGE(p.ok(), p.error().message);
  CHECK(p->gpus[0].gpu.address.to_string() == "0000:29:00.0");  // strict: the next switch
  r.nic_strict = false;
  r.gpus = 4;
  r.vcpus = 16;
  const auto loose = place(m, {held}, policy, r);
  REQUIRE_MESSAGE(loose.ok(), loose.error().message);
  check_common(m, policy, r, *loose);
  // All four node-0 GPUs: three with a VF under their switch, GPU 0 with one from its node.
  REQUIRE(loose->gpus.size() == 4);
  CHECK(loose->cells.size() == 1);
  CHECK(loose->gpus[0].gpu.address.to_string() == "0000:18:00.0");
  CHECK(loose->gpus[0].vfs[0].address.to_string() == "0000:2a:00.2");  // the first left on node 0
  CHECK(loose->gpus[0].vfs[0].host_node == std::optional<int>(0));
  for (std::size_t i = 1; i < 4; ++i) CHECK(loose->gpus[i].vfs[0].host_switch == loose->gpus[i].gpu.host_switch);
}

TEST_CASE("placement: a VF bound to vfio-pci by no known VM is not given") {
  const auto host = shared_builtin("vela2");
  HostModel m = host->model;
  const auto first_vf = *PciAddress::parse("0000:19:00.1");
  std::find_if(m.pci_devices.begin(), m.pci_devices.end(), [&](const PciFunction& f) {
    return f.address == first_vf;
  })->driver = "vfio-pci";
  const auto p = place(m, {}, vela2_policy(), one_gpu());
  REQUIRE_MESSAGE(p.ok(), p.error().message);
  CHECK(p->gpus[0].gpu.address.to_string() == "0000:18:00.0");
  CHECK(p->gpus[0].vfs[0].address.to_string() == "0000:19:00.2");
}

TEST_CASE("placement: an NVMe PF with its VFs enabled is not given whole") {
  HostModel model = shared_builtin("vela2")->model;
  const auto pf_address = PciAddress::parse("0000:1a:00.0").value();
  auto pf = std::find_if(model.pci_devices.begin(), model.pci_devices.end(),
                         [&](const PciFunction& f) { return f.address == pf_address; });
  REQUIRE(pf != model.pci_devices.end());
  REQUIRE(pf->role == PciRole::nvme);
  auto r = one_gpu();
  r.nvme = 1;
  const auto before = place(model, {}, vela2_policy(), r);
  REQUIRE_MESSAGE(before.ok(), before.error().message);
  CHECK(before->nvme[0].address == pf_address);  // under the GPU's switch, as below

  pf->sriov = Sriov{4, 2, {}};
  const auto after = place(model, {}, vela2_policy(), r);
  REQUIRE_MESSAGE(after.ok(), after.error().message);
  CHECK(after->nvme[0].address != pf_address);
  pf->sriov = Sriov{4, 0, {}};  // SR-IOV capable but off: a PF like any other
  const auto off = place(model, {}, vela2_policy(), r);
  REQUIRE_MESSAGE(off.ok(), off.error().message);
  CHECK(off->nvme[0].address == pf_address);
}

TEST_CASE("placement: extra VFs and NVMe follow the GPU and without GPUs they follow the vCPUs") {
  const auto host = shared_builtin("vela2");
  const auto policy = vela2_policy();
  auto r = one_gpu();
  r.extra_vfs = 2;
  r.nvme = 1;
  const auto p = place(host->model, {}, policy, r);
  REQUIRE_MESSAGE(p.ok(), p.error().message);
  check_common(host->model, policy, r, *p);
  CHECK(p->nvme[0].address.to_string() == "0000:1a:00.0");  // under the GPU's switch
  for (const auto& vf : p->extra_vfs) CHECK(vf.host_node == std::optional<int>(0));
  CHECK(p->cells.size() == 1);

  auto storage = cpus_only(120, 120 * kGiB);
  storage.nvme = 3;
  const auto s = place(host->model, {}, policy, storage);
  REQUIRE_MESSAGE(s.ok(), s.error().message);
  check_common(host->model, policy, storage, *s);
  REQUIRE(s->cells.size() == 2);  // 120 vCPUs need both nodes; the NVMe come from both, lowest first
  CHECK(s->nvme[0].address.to_string() == "0000:1a:00.0");
}

TEST_CASE("placement: guest_cells splits a one-node VM in two or folds a two-node VM into one cell") {
  const auto host = shared_builtin("vela2");
  const auto policy = vela2_policy();
  auto r = one_gpu(32, 64 * kGiB);
  r.guest_cells = 2;
  const auto split = place(host->model, {}, policy, r);
  REQUIRE_MESSAGE(split.ok(), split.error().message);
  check_common(host->model, policy, r, *split);
  REQUIRE(split->cells.size() == 2);
  CHECK(split->cells[0].host_node == 0);
  CHECK(split->cells[1].host_node == 0);
  CHECK(split->cells[1].vcpus.front() == 16);
  CHECK(split->topology.sockets == 2);

  auto full = vela2_full();
  full.guest_cells = 1;
  full.vcpus = 64;
  full.memory_bytes = 512 * kGiB;
  const auto folded = place(host->model, {}, policy, full);
  REQUIRE_MESSAGE(folded.ok(), folded.error().message);
  check_common(host->model, policy, full, *folded);
  REQUIRE(folded->cells.size() == 1);
  CHECK(folded->cells[0].host_node == 0);
  for (const auto& gpu : folded->gpus) CHECK(gpu.gpu.guest_cell == 0);
}

TEST_CASE("placement: requests no host could satisfy are invalid arguments") {
  const auto host = shared_builtin("vela2");
  const auto policy = vela2_policy();
  const auto invalid = [&](const PlacementRequest& r) {
    const auto p = place(host->model, {}, policy, r);
    REQUIRE_FALSE(p.ok());
    CHECK(p.error().code == ErrorCode::invalid_argument);
    return p.error().message;
  };
  CHECK(invalid(cpus_only(0, kGiB)) == "vcpus must be at least 1, got 0");
  CHECK(invalid(cpus_only(4, 0)) == "memory_bytes must be more than 0");
  CHECK(invalid(cpus_only(4, kGiB + 1)).find("not a whole number of 1 GiB hugepages") != std::string::npos);
  auto cells = cpus_only(9, 8 * kGiB);
  cells.guest_cells = 2;
  CHECK(invalid(cells) == "vcpus 9 do not divide evenly among 2 guest_cells");
  // Two host nodes for 8 GPUs make two cells, and 161 vCPUs do not split in two.
  auto odd = vela2_full();
  odd.vcpus = 161;
  const auto message = invalid(odd);
  CHECK(message.find("vcpus 161 do not divide evenly among 2 guest cells") != std::string::npos);
}

TEST_CASE("placement: the same inputs give the same placement") {
  const auto host = shared_builtin("vela2");
  const auto policy = vela2_policy();
  const auto a = place(host->model, {}, policy, vela2_full());
  const auto b = place(host->model, {}, policy, vela2_full());
  REQUIRE(a.ok());
  REQUIRE(b.ok());
  const auto x = allocation_of("x", *a, kGiB);
  const auto y = allocation_of("x", *b, kGiB);
  CHECK(x.cpus == y.cpus);
  CHECK(x.devices == y.devices);
  CHECK(x.hugepages == y.hugepages);
}

PlacementRequest h200_whole_nics(int gpus, int nics) {
  PlacementRequest r;
  r.vcpus = 16 * std::max(gpus, 1);
  r.memory_bytes = 64 * kGiB * static_cast<uint64_t>(std::max(gpus, 1));
  r.gpus = gpus;
  r.whole_nics = nics;
  return r;
}

TEST_CASE(
    "placement: whole HCAs on h200ib, each GPU paired with the HCA under its leaf switch (PIX) or its top (PXB)") {
  const auto host = shared_builtin("h200ib");
  const auto& m = host->model;
  const auto policy = vela2_policy();
  const auto r = h200_whole_nics(8, 4);
  const auto p = place(m, {}, policy, r);
  REQUIRE_MESSAGE(p.ok(), p.error().message);
  REQUIRE(p->whole_nics.size() == 4);
  REQUIRE(p->gpus.size() == 8);
  std::map<PciAddress, std::vector<Affinity>> served;  // HCA -> the codes of the GPUs paired with it
  for (const auto& gpu : p->gpus) {
    CAPTURE(gpu.gpu.address.to_string());
    REQUIRE(gpu.nic.has_value());
    REQUIRE(gpu.nic_affinity.has_value());
    CHECK(*gpu.nic_affinity == affinity(m, *m.find(gpu.gpu.address), *m.find(*gpu.nic)));
    served[*gpu.nic].push_back(*gpu.nic_affinity);
    CHECK(gpu.vfs.empty());
  }
  for (auto& [nic, codes] : served) {
    const std::string hca = nic.to_string();  // clang cannot capture a structured binding in CAPTURE's lambda
    CAPTURE(hca);
    std::sort(codes.begin(), codes.end());
    CHECK(codes == std::vector<Affinity>{Affinity::pix, Affinity::pxb});
  }
  for (const auto& nic : p->whole_nics) CHECK(nic.affinity == Affinity::pix);
  const auto allocation = allocation_of("vm", *p, r.hugepage_size_bytes);
  for (const auto& nic : p->whole_nics) {
    CHECK(std::count(allocation.devices.begin(), allocation.devices.end(), nic.address) == 1);
  }
  // A second VM finds the HCAs taken.
  const auto second = place(m, {allocation}, policy, h200_whole_nics(0, 1));
  REQUIRE_FALSE(second.ok());
  CHECK(second.error().message.find("needs 1 whole NIC (a NIC PF with no VF enabled); free: 0") != std::string::npos);
}

TEST_CASE("placement: strict whole NICs must share a switch with a GPU, and prefer takes one on the node") {
  const auto host = shared_builtin("h200ib");
  const auto policy = vela2_policy();
  auto r = h200_whole_nics(1, 2);  // one GPU shares a switch with one HCA only
  const auto strict = place(host->model, {}, policy, r);
  REQUIRE_FALSE(strict.ok());
  CHECK(strict.error().code == ErrorCode::does_not_fit);
  CHECK(strict.error().message.find("needs 2 whole NICs that share a PCIe switch with one of its GPUs "
                                    "(nics.placement strict); found 1") != std::string::npos);
  r.nic_strict = false;
  const auto prefer = place(host->model, {}, policy, r);
  REQUIRE_MESSAGE(prefer.ok(), prefer.error().message);
  REQUIRE(prefer->whole_nics.size() == 2);
  CHECK((prefer->whole_nics[0].affinity == Affinity::pix || prefer->whole_nics[0].affinity == Affinity::pxb));
  CHECK(prefer->whole_nics[1].affinity == Affinity::node);  // the other HCA of the GPU's socket
}

TEST_CASE("placement: a NIC whose VFs are enabled is never given whole") {
  const auto host = shared_builtin("vela2");
  const auto refused = place(host->model, {}, vela2_policy(), h200_whole_nics(1, 1));
  REQUIRE_FALSE(refused.ok());
  CHECK(refused.error().message.find("needs 1 whole NIC (a NIC PF with no VF enabled); free: 0") != std::string::npos);
}

// A Sub-NUMA-Clustering host by hand: nodes 0 and 2 with GPUs (the cells), node 1 with CPUs and
// only NVSwitches (no cell), node 3 without CPUs (GPU memory) nearest to node 2.
HostModel snc_host() {
  HostModel host;
  const auto node = [](int id, std::vector<int> cpus, std::map<int, int> distances) {
    NumaNode n;
    n.id = id;
    n.cpuless = cpus.empty();
    n.cpus = std::move(cpus);
    n.distances = std::move(distances);
    return n;
  };
  host.numa_nodes = {
      node(0, {0, 1}, {{0, 10}, {1, 12}, {2, 21}, {3, 30}}), node(1, {2, 3}, {{0, 12}, {1, 10}, {2, 21}, {3, 30}}),
      node(2, {4, 5}, {{0, 21}, {1, 21}, {2, 10}, {3, 14}}), node(3, {}, {{0, 30}, {1, 30}, {2, 14}, {3, 10}})};
  return host;
}

TEST_CASE("a device's guest cell: its node's, its CPU node's, else the nearest cell by SLIT, lowest id on a tie") {
  const auto host = snc_host();
  std::vector<GuestCell> cells(2);
  cells[0].id = 0;
  cells[0].host_node = 0;
  cells[1].id = 1;
  cells[1].host_node = 2;
  CHECK(guest_cell_for(host, cells, 0) == 0);
  CHECK(guest_cell_for(host, cells, 2) == 1);
  CHECK(guest_cell_for(host, cells, 1) == 0);  // no cell on node 1: node 0 is 12 away, node 2 21
  CHECK(guest_cell_for(host, cells, 3) == 1);  // CPU-less: lent to node 2, which has a cell
  CHECK(guest_cell_for(host, cells, 7) == 0);  // a node the host does not list
  CHECK(guest_cell_for(host, cells, std::nullopt) == 0);
  // A tie: node 1 as far from both cells' nodes; the lower cell id wins.
  auto tied = host;
  tied.numa_nodes[1].distances = {{0, 21}, {1, 10}, {2, 21}, {3, 30}};
  std::swap(cells[0].host_node, cells[1].host_node);  // cell 0 on node 2, cell 1 on node 0
  CHECK(guest_cell_for(tied, cells, 1) == 0);
  // One node with CPUs: a device of no known node is on it.
  HostModel single;
  single.numa_nodes = {snc_host().numa_nodes[0]};
  std::vector<GuestCell> one(1);
  one[0].host_node = 0;
  CHECK(guest_cell_for(single, one, std::nullopt) == 0);
}

}  // namespace
}  // namespace hostagent::numa
