// Placement in shared NVSwitch mode on the simulated Vela-2 host (8 H100 on one HGX baseboard, 4
// NVSwitches): a VM's GPUs are exactly one free Fabric Manager partition of its size, named by
// module ID, and the NVSwitches stay on the host.
#include <doctest/doctest.h>

#include <algorithm>
#include <set>

#include "hgx_partitions.hpp"
#include "hostagent/numa/nvlink.hpp"
#include "hostagent/numa/placement.hpp"
#include "simulated_hosts.hpp"
#include "test_support.hpp"

namespace hostagent::numa {
namespace {

using hostagent::testing::contains;
using hostagent::testing::kGiB;

const HostModel& vela2_model() {
  static const HostModel model = testing::discover_shared("vela2");
  return model;
}

// The baseboard as FM would report it: module IDs out of PCI order (the GPUs by address are
// modules 2, 4, 1, 3 on node 0 and 6, 8, 5, 7 on node 1), the 15 partitions of an 8-GPU board.
FabricReport vela2_fabric() {
  std::vector<PciAddress> gpus;
  for (const auto& f : vela2_model().pci_devices) {
    if (f.role == PciRole::gpu) gpus.push_back(f.address);
  }
  std::sort(gpus.begin(), gpus.end());
  REQUIRE(gpus.size() == 8);
  const std::vector<size_t> by_module = {2, 0, 3, 1, 6, 4, 7, 5};  // module m is gpus[by_module[m - 1]]
  const auto gpu = [&](uint32_t module) { return PartitionGpu{module, gpus[by_module[module - 1]], 18, 18}; };
  const auto& sets = testing::hgx_8gpu_partitions();
  FabricReport report;
  for (uint32_t id = 0; id < sets.size(); ++id) {
    FabricPartition partition{id, false, {}};
    for (const uint32_t module : sets[id]) partition.gpus.push_back(gpu(module));
    report.partitions.push_back(std::move(partition));
  }
  return report;
}

HostPolicy shared_policy(FabricReport report) {
  HostPolicy policy;
  policy.housekeeping_cpus = {0, 96, 48, 144};
  policy.fabric = std::move(report);
  return policy;
}

PlacementRequest gpus_request(int gpus) {
  PlacementRequest r;
  r.gpus = gpus;
  r.vcpus = 16 * gpus;
  r.memory_bytes = 128 * kGiB * static_cast<uint64_t>(gpus);
  r.vfs_per_gpu = 1;
  return r;
}

std::set<PciAddress> gpus_of(const Placement& p) {
  std::set<PciAddress> out;
  for (const auto& gpu : p.gpus) out.insert(gpu.gpu.address);
  return out;
}

std::set<PciAddress> gpus_of(const FabricPartition& partition) {
  std::set<PciAddress> out;
  for (const auto& gpu : partition.gpus) out.insert(gpu.address);
  return out;
}

// Places the request and marks its partition active, as FM would once its VM starts.
Placement place_and_activate(std::vector<Allocation>& existing, HostPolicy& policy, const PlacementRequest& r,
                             const std::string& vm) {
  auto p = place(vela2_model(), existing, policy, r);
  REQUIRE_MESSAGE(p.ok(), p.error().message);
  REQUIRE(p->fabric_partition.has_value());
  existing.push_back(allocation_of(vm, *p, r.hugepage_size_bytes));
  for (auto& partition : policy.fabric->partitions) {
    if (partition.id == p->fabric_partition->id) partition.active = true;
  }
  return std::move(p).value();
}

}  // namespace

TEST_CASE(
    "shared NVSwitch mode: four 2-GPU VMs take the four 2-GPU partitions, each GPU with the VF under its switch") {
  HostPolicy policy = shared_policy(vela2_fabric());
  std::vector<Allocation> existing;
  std::set<PartitionId> taken;
  for (int vm = 0; vm < 4; ++vm) {
    const Placement p = place_and_activate(existing, policy, gpus_request(2), "pair-" + std::to_string(vm));
    const FabricPartition& partition = *p.fabric_partition;
    CHECK(partition.gpus.size() == 2);
    CHECK(gpus_of(p) == gpus_of(partition));  // exactly the partition's GPUs, mapped by module ID
    CHECK(p.nvswitches.empty());              // FM keeps them on the host
    for (const auto& gpu : p.gpus) {
      REQUIRE(gpu.vfs.size() == 1);
      CHECK(gpu.vfs[0].host_switch == gpu.gpu.host_switch);
    }
    CHECK(existing.back().fabric_partition == partition.id);
    // FM trains the partition's NVLinks on the host: the guest's driver keeps them on.
    CHECK(guest_nvlink(vela2_model(), existing.back().devices, partition.id) == GuestNvlink::partition);
    CHECK(nvlink_summary(vela2_model(), existing.back()) ==
          "Fabric Manager partition " + std::to_string(partition.id) +
              " (shared NVSwitch mode): Fabric Manager on the host trains its GPUs' NVLinks");
    taken.insert(partition.id);
  }
  CHECK(taken == std::set<PartitionId>{3, 4, 5, 6});

  const auto fifth = place(vela2_model(), existing, policy, gpus_request(2));
  REQUIRE_FALSE(fifth.ok());
  CHECK(fifth.error().code == ErrorCode::does_not_fit);
  CHECK(contains(fifth.error().message, "needs a free Fabric Manager partition of 2 GPUs"));
  CHECK(contains(fifth.error().message, "free partitions: none"));
  CHECK(contains(fifth.error().message, "partition 3 active"));
}

TEST_CASE("shared NVSwitch mode: a 2-GPU VM spares a 4-GPU partition where it can, modules before addresses") {
  HostPolicy policy = shared_policy(vela2_fabric());
  std::vector<Allocation> existing;
  const Placement first = place_and_activate(existing, policy, gpus_request(2), "a");
  CHECK(first.fabric_partition->id == 3);  // modules 1,2: the first in FM's order
  // Modules 1 and 2 are the host's third and first GPUs by address: the mapping is FM's.
  CHECK(describe(*first.fabric_partition) ==
        "partition 3 (modules 1,2: " + first.fabric_partition->gpus[0].address.to_string() + ", " +
            first.fabric_partition->gpus[1].address.to_string() + ")");
  const Placement second = place_and_activate(existing, policy, gpus_request(2), "b");
  CHECK(second.fabric_partition->id == 4);  // modules 3,4: partition 2 (modules 5-8) stays whole
  const Placement four = place_and_activate(existing, policy, gpus_request(4), "c");
  CHECK(four.fabric_partition->id == 2);
  CHECK(four.cells.size() == 1);
}

TEST_CASE("shared NVSwitch mode: an 8-GPU VM is refused while any partition is active, naming it") {
  HostPolicy policy = shared_policy(vela2_fabric());
  auto eight = gpus_request(8);
  eight.vcpus = 128;
  eight.memory_bytes = 1024 * kGiB;
  const auto alone = place(vela2_model(), {}, policy, eight);
  REQUIRE_MESSAGE(alone.ok(), alone.error().message);
  CHECK(alone->fabric_partition->id == 0);
  CHECK(alone->nvswitches.empty());

  std::vector<Allocation> existing;
  place_and_activate(existing, policy, gpus_request(1), "single");
  const auto refused = place(vela2_model(), existing, policy, eight);
  REQUIRE_FALSE(refused.ok());
  CHECK(refused.error().code == ErrorCode::does_not_fit);
  CHECK(contains(refused.error().message, "partition 0 shares GPUs with active partition 7"));
}

TEST_CASE("shared NVSwitch mode: a gated partition is never given, and an FM not ready refuses every GPU VM") {
  FabricReport fabric = vela2_fabric();
  fabric.failed_gpus = {fabric.partitions[3].gpus[0].address};  // module 1
  HostPolicy policy = shared_policy(fabric);
  const auto pair = place(vela2_model(), {}, policy, gpus_request(2));
  REQUIRE_MESSAGE(pair.ok(), pair.error().message);
  CHECK(pair->fabric_partition->id != 3);
  auto four = gpus_request(4);
  std::vector<Allocation> existing;
  place_and_activate(existing, policy, four, "four");  // partition 2: partition 1 holds module 1
  const auto none = place(vela2_model(), existing, policy, four);
  REQUIRE_FALSE(none.ok());
  CHECK(contains(none.error().message, "partition 1 GPU " + fabric.partitions[3].gpus[0].address.to_string() +
                                           " (module 1) has failed NVLinks (Fabric Manager)"));

  policy.fabric->ready = false;
  const auto waiting = place(vela2_model(), {}, policy, gpus_request(1));
  REQUIRE_FALSE(waiting.ok());
  CHECK(waiting.error().code == ErrorCode::unavailable);
  CHECK(contains(waiting.error().message, "Fabric Manager is not ready"));
  // A VM without GPUs does not need FM.
  auto cpus = gpus_request(0);
  cpus.vcpus = 4;
  cpus.memory_bytes = 4 * kGiB;
  CHECK(place(vela2_model(), {}, policy, cpus).ok());
}

}  // namespace hostagent::numa
