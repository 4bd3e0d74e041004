// fleet/provider_tree: the simulated vela2 host as Placement sees it, what a VM uses of it, and a
// claim read back into what placement may take.
#include <doctest/doctest.h>

#include <set>

#include "hostagent/common/names.hpp"
#include "hostagent/fleet/provider_tree.hpp"
#include "hostagent/numa/capacity.hpp"
#include "hostagent/numa/placement.hpp"
#include "simulated_hosts.hpp"
#include "test_support.hpp"

namespace hostagent::fleet {
namespace {

using hostagent::testing::kGiB;

struct Host {
  numa::HostModel model = testing::discover_shared("vela2");
  numa::HostPolicy policy;
  std::vector<numa::Allocation> held;

  numa::Capacity capacity() const { return numa::capacity(model, held, policy); }
  ProviderTree tree(const std::map<std::string, std::string>& managed = {}, bool in_maintenance = false) const {
    const auto counted = capacity();
    return provider_tree({"vela2-07", &model, &counted, &held, policy.housekeeping_cpus, managed, in_maintenance});
  }
};

numa::PlacementRequest two_gpus() {
  numa::PlacementRequest request;
  request.vcpus = 32;
  request.memory_bytes = 256 * kGiB;
  request.gpus = 2;
  request.vfs_per_gpu = 1;
  return request;
}

const Provider& named(const ProviderTree& tree, const std::string& name) {
  for (const auto& provider : tree.providers) {
    if (provider.name == name) return provider;
  }
  FAIL("no provider named " << name);
  return tree.providers.front();
}

int64_t sum_of(const ProviderTree& tree, const std::string& rc, int64_t InventoryRecord::*field) {
  int64_t sum = 0;
  for (const auto& provider : tree.providers) {
    const auto it = provider.inventories.find(rc);
    if (it != provider.inventories.end()) sum += it->second.*field;
  }
  return sum;
}

int64_t used(const ProviderResources& allocation, const std::string& rc) {
  int64_t sum = 0;
  for (const auto& [provider, resources] : allocation) {
    const auto it = resources.find(rc);
    if (it != resources.end()) sum += it->second;
  }
  return sum;
}

TEST_CASE("vela2 is a root, two NUMA nodes and one provider per GPU, parents first") {
  const Host host;
  const auto tree = host.tree();
  REQUIRE(tree.providers.size() == 11);
  CHECK(tree.providers[0].name == "vela2-07");
  CHECK(tree.providers[0].parent_uuid.empty());
  CHECK(tree.providers[0].traits.count(kHostTrait) == 1);
  std::set<std::string> seen;
  for (const auto& provider : tree.providers) {
    CAPTURE(provider.name);
    CHECK(is_uuid(provider.uuid));
    CHECK(provider.uuid[14] == '8');  // RFC 9562 version 8
    if (!provider.parent_uuid.empty()) CHECK(seen.count(provider.parent_uuid) == 1);
    seen.insert(provider.uuid);
  }
  const auto& numa0 = named(tree, "vela2-07_numa0");
  CHECK(numa0.parent_uuid == tree.root_uuid());
  CHECK(numa0.traits.count(kNumaTrait) == 1);
  CHECK(numa0.inventories.at(kMemory1G) == InventoryRecord{921600, 0, 921600, 1024});
  const auto& gpu = named(tree, "vela2-07_gpu_0000:18:00.0");
  CHECK(gpu.parent_uuid == numa0.uuid);
  CHECK(gpu.inventories.at(kGpu) == InventoryRecord{1, 0, 1, 1});
  CHECK(gpu.traits.count(slot_trait(0)) == 1);
  CHECK(gpu.traits.count(model_trait(0x10de, 0x2330)) == 1);
  CHECK(gpu.traits.count(kSwitchTrait) == 1);
}

TEST_CASE("the tree's totals are the host's capacity, and its UUIDs are stable and the host's own") {
  const Host host;
  const auto tree = host.tree();
  const auto capacity = host.capacity();
  CHECK(sum_of(tree, kVcpu, &InventoryRecord::total) == capacity.totals.cpus.free + capacity.totals.cpus.held);
  CHECK(sum_of(tree, kGpu, &InventoryRecord::total) == capacity.totals.gpus.total);
  CHECK(sum_of(tree, kVf, &InventoryRecord::total) == capacity.totals.vfs.total);
  CHECK(sum_of(tree, kNvme, &InventoryRecord::total) == capacity.totals.nvme.total);
  // The host's own NVMe (its boot disk) is the host's allocation, and no inventory is reserved.
  CHECK(used(tree.host_holds, kNvme) == capacity.totals.nvme.total - capacity.totals.nvme.free);
  CHECK(used(tree.host_holds, kNvme) > 0);
  for (const auto& rc : {kVcpu, kGpu, kVf, kNvme, kMemory1G}) CHECK(sum_of(tree, rc, &InventoryRecord::reserved) == 0);
  CHECK(host.tree().root_uuid() == tree.root_uuid());
  CHECK(provider_uuid("vela2-08", "root") != tree.root_uuid());
}

TEST_CASE("a VF counts on a GPU under its own switch, so a GPU's group finds its VF in one provider") {
  const Host host;
  const auto tree = host.tree();
  int checked = 0;
  for (const auto& [address, count] : tree.devices) {
    if (count.resource_class != kVf) continue;
    const auto* vf = host.model.find(address);
    REQUIRE(vf != nullptr);
    const Provider* provider = tree.find(count.provider);
    REQUIRE(provider != nullptr);
    if (provider->inventories.count(kGpu) == 0) continue;  // a VF under no GPU's switch counts on its node
    const std::string gpu_address = provider->name.substr(provider->name.rfind('_') + 1);
    const auto* gpu = host.model.find(PciAddress::parse(gpu_address).value());
    REQUIRE(gpu != nullptr);
    CHECK(gpu->pcie_switch == vf->pcie_switch);
    ++checked;
  }
  CHECK(checked > 0);
}

TEST_CASE("a managed VM's holdings are its allocation, and a foreign domain's are the host's") {
  Host host;
  auto placed = numa::place(host.model, host.held, host.policy, two_gpus());
  REQUIRE(placed.ok());
  host.held.push_back(numa::allocation_of("train-0", *placed, kGiB));
  const std::string uuid = "6f1c2a9e-0b7d-4a55-9c3e-1d2e3f405162";

  const auto managed = host.tree({{"train-0", uuid}});
  REQUIRE(managed.allocations.count(uuid) == 1);
  const auto& allocation = managed.allocations.at(uuid);
  CHECK(used(allocation, kGpu) == 2);
  CHECK(used(allocation, kVf) == 2);
  CHECK(used(allocation, kVcpu) == 32);
  CHECK(used(allocation, kMemory1G) == 256 * 1024);
  CHECK(used(managed.host_holds, kGpu) == 0);
  CHECK(used(managed.host_holds, kVcpu) == 0);
  CHECK(used(managed.host_holds, kMemory1G) == 0);

  const auto foreign = host.tree();
  CHECK(foreign.allocations.empty());
  CHECK(used(foreign.host_holds, kGpu) == 2);
  CHECK(used(foreign.host_holds, kVf) == 2);
  CHECK(used(foreign.host_holds, kVcpu) == 32);
  CHECK(used(foreign.host_holds, kMemory1G) == 256 * 1024);
  for (const auto& rc : {kVcpu, kGpu, kVf, kMemory1G}) CHECK(sum_of(foreign, rc, &InventoryRecord::reserved) == 0);
  CHECK(host_consumer_uuid("vela2-07") != host_consumer_uuid("vela2-08"));
  CHECK(host_consumer_uuid("vela2-07") != foreign.root_uuid());
}

TEST_CASE("a device in cleaning or quarantine is the host's on its provider") {
  Host host;
  const auto gpu = PciAddress::parse("0000:18:00.0").value();
  host.policy.withheld[gpu] = {numa::Withheld::Why::cleaning, "cleaning after train-0"};
  auto tree = host.tree();
  const std::string provider = named(tree, "vela2-07_gpu_0000:18:00.0").uuid;
  CHECK(tree.host_holds.at(provider).at(kGpu) == 1);
  host.policy.withheld[gpu] = {numa::Withheld::Why::quarantined, "reset failed"};
  tree = host.tree();
  CHECK(tree.host_holds.at(provider).at(kGpu) == 1);
  CHECK(used(tree.host_holds, kGpu) == 1);
  CHECK(sum_of(tree, kGpu, &InventoryRecord::reserved) == 0);
}

TEST_CASE("a pass keeps what is not hostagent's: other traits, and each inventory's reserved within its total") {
  const std::set<std::string> current{kHostTrait, "CUSTOM_HOSTAGENT_SLOT_9", "CUSTOM_PCI_10DE_0000",
                                      "COMPUTE_STATUS_DISABLED", "CUSTOM_RACK_A7"};
  const std::set<std::string> wanted{kHostTrait, slot_trait(0)};
  CHECK(merged_traits(current, wanted) ==
        std::set<std::string>{kHostTrait, slot_trait(0), "COMPUTE_STATUS_DISABLED", "CUSTOM_RACK_A7"});
  CHECK(is_managed_trait(kNumaTrait));
  CHECK(is_managed_trait(model_trait(0x10de, 0x2330)));
  CHECK_FALSE(is_managed_trait("CUSTOM_HOSTAGENTX"));
  CHECK_FALSE(is_managed_trait("COMPUTE_STATUS_DISABLED"));

  const std::map<std::string, InventoryRecord> now{{kVcpu, {96, 8, 96, 1}}, {kGpu, {1, 1, 1, 1}}, {kVf, {4, 6, 4, 1}}};
  const std::map<std::string, InventoryRecord> want{
      {kVcpu, {94, 0, 94, 1}}, {kVf, {2, 0, 2, 1}}, {kNvme, {1, 0, 1, 1}}};
  const auto merged = merged_inventories(now, want);
  CHECK(merged.at(kVcpu) == InventoryRecord{94, 8, 94, 1});  // the operator's 8 kept
  CHECK(merged.at(kVf) == InventoryRecord{2, 2, 2, 1});      // lowered to the new total
  CHECK(merged.at(kNvme) == InventoryRecord{1, 0, 1, 1});
  CHECK(merged.count(kGpu) == 0);  // a class the host no longer has goes, reserved or not
}

TEST_CASE("maintenance disables the root Nova's way, and the uncordon takes away only the disabled mark it set") {
  const std::set<std::string> in_service{kHostTrait};
  const std::set<std::string> in_maintenance{kHostTrait, kMaintenanceTrait};
  // The cordon: both marks; the next passes keep them as they are.
  const auto cordoned = merged_traits({kHostTrait, "CUSTOM_RACK_A7"}, in_maintenance);
  CHECK(cordoned == std::set<std::string>{kHostTrait, kMaintenanceTrait, kDisabledTrait, "CUSTOM_RACK_A7"});
  CHECK(merged_traits(cordoned, in_maintenance) == cordoned);
  // The uncordon: both go, the operator's own trait stays.
  CHECK(merged_traits(cordoned, in_service) == std::set<std::string>{kHostTrait, "CUSTOM_RACK_A7"});
  // An operator disabled the host before the cordon: the mark stays theirs, before and after.
  const std::set<std::string> operators{kHostTrait, kDisabledTrait};
  CHECK(merged_traits(operators, in_maintenance) == operators);
  CHECK(merged_traits(operators, in_service) == operators);
  // The tree marks its root in maintenance, and no other provider.
  const Host host;
  const auto tree = host.tree({}, true);
  CHECK(tree.providers[0].traits.count(kMaintenanceTrait) == 1);
  for (std::size_t i = 1; i < tree.providers.size(); ++i) CHECK(tree.providers[i].traits.count(kMaintenanceTrait) == 0);
  CHECK(host.tree().providers[0].traits.count(kMaintenanceTrait) == 0);
}

TEST_CASE("a claim lets placement take exactly what it names, and the host's placement then equals it") {
  Host host;
  // What Placement would grant: the allocation of the same request placed on this host.
  auto first = numa::place(host.model, host.held, host.policy, two_gpus());
  REQUIRE(first.ok());
  std::vector<numa::Allocation> alone{numa::allocation_of("probe", *first, kGiB)};
  const auto counted = numa::capacity(host.model, alone, host.policy);
  const std::string consumer = "0b5c1d2e-3f40-4152-8637-48596a7b8c9d";
  const auto granted =
      provider_tree({"vela2-07", &host.model, &counted, &alone, {}, {{"probe", consumer}}}).allocations.at(consumer);
  // A claim for the GPUs the placement would not choose first: the last two GPU providers' own.
  const auto tree = host.tree();
  ProviderResources claim;
  int gpus = 0;
  for (auto it = tree.providers.rbegin(); it != tree.providers.rend() && gpus < 2; ++it) {
    if (it->inventories.count(kGpu) == 0) continue;
    claim[it->uuid] = {{kGpu, 1}, {kVf, 1}};
    ++gpus;
  }
  const auto& numa1 = named(tree, "vela2-07_numa1");
  claim[numa1.uuid] = {{kVcpu, 32}, {kMemory1G, 256 * 1024}};
  CHECK(claim != granted);

  const auto capacity = host.capacity();
  auto limits = claim_limits(tree, capacity, claim);
  REQUIRE(limits.ok());
  CHECK(limits->devices.size() == 4);  // two GPUs, one VF each
  CHECK(limits->nodes == std::set<int>{1});
  auto held = host.held;
  held.push_back(outside_claim(host.model, capacity, *limits));
  auto placed = numa::place(host.model, held, host.policy, two_gpus());
  REQUIRE(placed.ok());
  held.pop_back();
  held.push_back(numa::allocation_of("train-1", *placed, kGiB));
  const auto after = numa::capacity(host.model, held, host.policy);
  const auto actual = provider_tree({"vela2-07", &host.model, &after, &held, {}, {{"train-1", consumer}}});
  CHECK(actual.allocations.at(consumer) == claim);
}

TEST_CASE("a claim the host cannot honour is refused with the field and why") {
  Host host;
  const auto tree = host.tree();
  const auto capacity = host.capacity();
  auto unknown = claim_limits(tree, capacity, {{"00000000-0000-4000-8000-000000000000", {{kGpu, 1}}}});
  REQUIRE_FALSE(unknown.ok());
  CHECK(unknown.error().code == ErrorCode::invalid_argument);
  CHECK(unknown.error().field == "placement.allocations");
  CHECK(unknown.error().message.find("is not one of this host's") != std::string::npos);
  const auto& gpu = named(tree, "vela2-07_gpu_0000:18:00.0");
  auto wrong_class = claim_limits(tree, capacity, {{gpu.uuid, {{kNvme, 1}}}});
  REQUIRE_FALSE(wrong_class.ok());
  CHECK(wrong_class.error().message.find("has no " + std::string(kNvme)) != std::string::npos);
  // More VFs than the GPU's provider has free: Placement is behind the host.
  auto too_many = claim_limits(tree, capacity, {{gpu.uuid, {{kGpu, 1}, {kVf, 5}}}});
  REQUIRE_FALSE(too_many.ok());
  CHECK(too_many.error().code == ErrorCode::conflict);
}

TEST_CASE("placement names: upper-case letters, digits and underscores, at most 255") {
  CHECK(is_placement_name("CUSTOM_PCI_10DE_2330"));
  CHECK(is_placement_name("VCPU"));
  CHECK_FALSE(is_placement_name(""));
  CHECK_FALSE(is_placement_name("custom_x"));
  CHECK_FALSE(is_placement_name("CUSTOM-X"));
  CHECK_FALSE(is_placement_name(std::string(256, 'A')));
  CHECK(model_trait(0x10de, 0x2330) == "CUSTOM_PCI_10DE_2330");
}

}  // namespace
}  // namespace hostagent::fleet
