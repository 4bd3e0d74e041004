// The daemon's Placement sync and the Placement client against a real Placement (Debian's
// placement-api, started by scripts/placement.sh): the host published as its capacity says, each
// VM's allocation following its create and delete, a claim honoured unit for unit, stale claims and
// gone VMs removed, another service's consumers left alone, and Placement away.
#include <doctest/doctest.h>

#include "assembly.hpp"
#include "daemon_fixture.hpp"
#include "hostagent/common/names.hpp"
#include "hostagent/daemon/placement_sync.hpp"
#include "hostagent/fleet/candidates_query.hpp"
#include "hostagent/fleet/placement_answers.hpp"
#include "hostagent/numa/capacity.hpp"
#include "placement_support.hpp"
#include "test_support.hpp"

namespace hostagent::fleet {
namespace {

using testing::DaemonFixture;
using testing::kTwoGpus;

// A daemon on vela2 publishing under a name of its own, its converger, and Placement's client.
struct Fleet {
  std::string url;
  DaemonFixture fixture;
  std::shared_ptr<testing::ManualClock> clock = std::make_shared<testing::ManualClock>();
  std::unique_ptr<service::VmService> service;
  std::unique_ptr<PlacementClient> placement;
  std::unique_ptr<daemon::PlacementConverger> converger;

  explicit Fleet(std::string placement_url) : url(std::move(placement_url)) {
    fixture.placement.url = url;
    fixture.placement.host_name = testing::unique_host_name("vela2");
    fixture.placement.token_file = fixture.scratch() / "placement-token";
    testing::write_text_file(fixture.placement.token_file, "admin\n");  // noauth2's administrator
    service = testing::started(fixture, nullptr, clock);
    placement = testing::placement_client(url);
    converger = std::make_unique<daemon::PlacementConverger>(*service, *placement, fixture.placement, clock);
  }
  ~Fleet() { testing::remove_tree(*placement, provider_uuid(fixture.placement.host_name, "root")); }
  Fleet(const Fleet&) = delete;
  Fleet& operator=(const Fleet&) = delete;

  daemon::SyncReport pass(bool full = true) const {
    auto report = converger->run_once(full);
    REQUIRE_MESSAGE(report.ok(), report.error().message);
    for (const auto& problem : report->problems) MESSAGE(problem);
    CHECK(report->problems.empty());
    return std::move(report).value();
  }
  ProviderTree tree() const {
    const auto usage = service->usage();
    const auto capacity = numa::capacity(*usage.host, usage.held, usage.policy);
    std::map<std::string, std::string> managed;
    for (const auto& vm : service->list_vms()) {
      if (vm.managed) managed[vm.name] = vm.uuid;
    }
    return provider_tree(
        {fixture.placement.host_name, usage.host, &capacity, &usage.held, usage.policy.housekeeping_cpus, managed});
  }
  std::string create(const std::string& name, const std::string& uuid = "", const ProviderResources& claim = {}) {
    auto request = fixture.request(name, kTwoGpus);
    if (!uuid.empty()) request.uuid = Uuid::parse(uuid, "uuid").value();
    request.claim = claim;
    auto created = service::create_vm(*service, request);
    REQUIRE_MESSAGE(created.ok(), created.error().message);
    return created->uuid;
  }
};

ProviderResources allocations_of(PlacementClient& placement, const std::string& consumer) {
  auto state = placement.consumer(consumer);
  REQUIRE_MESSAGE(state.ok(), state.error().message);
  return state->allocations;
}

TEST_CASE("the client speaks Placement's generations, capacity and consumer rules") {
  const auto url = testing::placement_url();
  if (!url) return;
  auto placement = testing::placement_client(*url);
  REQUIRE(placement->ensure_trait("CUSTOM_HOSTAGENT_TEST").ok());
  REQUIRE(placement->ensure_trait("CUSTOM_HOSTAGENT_TEST").ok());  // idempotent
  const std::string name = testing::unique_host_name("client");
  const std::string uuid = provider_uuid(name, "root");
  auto created = placement->create_provider(uuid, name, "");
  REQUIRE_MESSAGE(created.ok(), created.error().message);
  auto duplicate = placement->create_provider(provider_uuid(name, "other"), name, "");
  REQUIRE_FALSE(duplicate.ok());
  CHECK(duplicate.error().code == ErrorCode::does_not_fit);  // 409 duplicate name
  auto generation = placement->set_inventories(uuid, created->generation, {{kVcpu, {4, 0, 4, 1}}});
  REQUIRE_MESSAGE(generation.ok(), generation.error().message);
  auto stale = placement->set_inventories(uuid, created->generation, {{kVcpu, {8, 0, 8, 1}}});
  REQUIRE_FALSE(stale.ok());
  CHECK(stale.error().code == ErrorCode::conflict);
  CHECK(stale.error().message.find("placement.concurrent_update") != std::string::npos);

  const std::string consumer = random_uuid();
  ConsumerWrite claim{consumer, {{uuid, {{kVcpu, 3}}}}, std::nullopt, kClaimConsumer};
  REQUIRE(placement->write_allocations(claim).ok());
  auto again = placement->write_allocations(claim);  // a new consumer's generation is null only once
  REQUIRE_FALSE(again.ok());
  CHECK(again.error().code == ErrorCode::conflict);
  ConsumerWrite more{random_uuid(), {{uuid, {{kVcpu, 2}}}}, std::nullopt, kClaimConsumer};
  auto full = placement->write_allocations(more);
  REQUIRE_FALSE(full.ok());
  CHECK(full.error().code == ErrorCode::does_not_fit);
  CHECK(full.error().message.find("capacity") != std::string::npos);
  auto state = placement->consumer(consumer);
  REQUIRE(state.ok());
  CHECK(state->consumer_type == kClaimConsumer);
  REQUIRE(state->generation.has_value());
  REQUIRE(placement->write_allocations({consumer, {}, state->generation, kClaimConsumer}).ok());
  CHECK(allocations_of(*placement, consumer).empty());
  CHECK(placement->delete_provider(uuid).ok());
}

TEST_CASE("a pass publishes the host as its capacity says, and the next changes nothing") {
  const auto url = testing::placement_url();
  if (!url) return;
  Fleet fleet(*url);
  const auto first = fleet.pass();
  CHECK(first.providers == 11);
  CHECK_FALSE(first.changes.empty());
  const auto tree = fleet.tree();
  for (const auto& wanted : tree.providers) {
    CAPTURE(wanted.name);
    auto state = fleet.placement->provider(wanted.uuid);
    REQUIRE(state.ok());
    REQUIRE(state->has_value());
    CHECK((*state)->name == wanted.name);
    CHECK((*state)->parent_uuid == wanted.parent_uuid);
    CHECK((*state)->inventories == wanted.inventories);
    CHECK((*state)->traits == wanted.traits);
  }
  // What the host holds itself (vela2's boot disk among it) is the host consumer's allocation.
  REQUIRE_FALSE(tree.host_holds.empty());
  CHECK(allocations_of(*fleet.placement, host_consumer_uuid(fleet.fixture.placement.host_name)) == tree.host_holds);
  CHECK(fleet.pass().changes.empty());
  CHECK(fleet.pass(false).changes.empty());
}

TEST_CASE("an operator's trait and reserved value on the host's providers survive ten passes") {
  const auto url = testing::placement_url();
  if (!url) return;
  Fleet fleet(*url);
  fleet.pass();
  const auto tree = fleet.tree();
  const std::string root = tree.root_uuid();
  const std::string numa0 = tree.providers[1].uuid;
  // As an operator disables a host the way Nova does, and keeps CPUs back on a node.
  REQUIRE(fleet.placement->ensure_trait("CUSTOM_RACK_A7").ok());
  auto state = fleet.placement->provider(root);
  REQUIRE(state.ok());
  auto traits = (*state)->traits;
  traits.insert({"COMPUTE_STATUS_DISABLED", "CUSTOM_RACK_A7"});
  REQUIRE(fleet.placement->set_traits(root, (*state)->generation, traits).ok());
  auto node = fleet.placement->provider(numa0);
  REQUIRE(node.ok());
  auto inventories = (*node)->inventories;
  inventories.at(kVcpu).reserved = 8;
  REQUIRE(fleet.placement->set_inventories(numa0, (*node)->generation, inventories).ok());

  fleet.create("after");  // a change the passes write, beside the operator's marks
  for (int pass = 0; pass < 10; ++pass) fleet.pass(pass % 2 == 0);
  const auto after = fleet.placement->provider(root);
  REQUIRE(after.ok());
  CHECK((*after)->traits.count("COMPUTE_STATUS_DISABLED") == 1);
  CHECK((*after)->traits.count("CUSTOM_RACK_A7") == 1);
  CHECK((*after)->traits.count(kHostTrait) == 1);
  const auto node_after = fleet.placement->provider(numa0);
  REQUIRE(node_after.ok());
  CHECK((*node_after)->inventories.at(kVcpu).reserved == 8);
  CHECK((*node_after)->inventories.at(kVcpu).total == fleet.tree().providers[1].inventories.at(kVcpu).total);
}

// Placement's candidates for two GPUs in the fleet's host.
auto candidates_in(const Fleet& fleet) {
  numa::PlacementRequest two;
  two.vcpus = 32;
  two.memory_bytes = 256ULL << 30;
  two.gpus = 2;
  two.vfs_per_gpu = 1;
  QueryOptions options;
  options.in_tree = fleet.tree().root_uuid();
  options.max_slots = 8;
  auto query = candidates_query(two, options);
  REQUIRE(query.ok());
  auto answer = fleet.placement->get(query->target);
  REQUIRE_MESSAGE(answer.ok(), answer.error().message);
  auto requests = answers::allocation_candidates(*answer);
  REQUIRE_MESSAGE(requests.ok(), requests.error().message);
  return std::move(requests).value();
}

std::set<std::string> root_traits(const Fleet& fleet) {
  auto root = fleet.placement->provider(fleet.tree().root_uuid());
  REQUIRE(root.ok());
  REQUIRE(root->has_value());
  return (*root)->traits;
}

TEST_CASE("a cordon takes the host out of the candidates within one pass, and the uncordon brings it back") {
  const auto url = testing::placement_url();
  if (!url) return;
  Fleet fleet(*url);
  fleet.pass();
  REQUIRE_FALSE(candidates_in(fleet).empty());
  REQUIRE(fleet.service->cordon("rack move", "uid:0").ok());
  fleet.pass(false);  // the quick pass a change pokes
  CHECK(root_traits(fleet).count(kDisabledTrait) == 1);
  CHECK(root_traits(fleet).count(kMaintenanceTrait) == 1);
  CHECK(candidates_in(fleet).empty());
  REQUIRE(fleet.service->uncordon("uid:0").ok());
  fleet.pass(false);
  CHECK(root_traits(fleet).count(kDisabledTrait) == 0);
  CHECK(root_traits(fleet).count(kMaintenanceTrait) == 0);
  CHECK_FALSE(candidates_in(fleet).empty());
}

TEST_CASE("an operator's own COMPUTE_STATUS_DISABLED outlives a cordon and its uncordon") {
  const auto url = testing::placement_url();
  if (!url) return;
  Fleet fleet(*url);
  fleet.pass();
  const std::string root = fleet.tree().root_uuid();
  auto state = fleet.placement->provider(root);
  REQUIRE(state.ok());
  auto traits = (*state)->traits;
  traits.insert(kDisabledTrait);
  REQUIRE(fleet.placement->set_traits(root, (*state)->generation, traits).ok());
  REQUIRE(fleet.service->cordon("rack move", "uid:0").ok());
  fleet.pass();
  CHECK(root_traits(fleet).count(kMaintenanceTrait) == 0);  // the disabled mark is the operator's
  REQUIRE(fleet.service->uncordon("uid:0").ok());
  fleet.pass();
  CHECK(root_traits(fleet).count(kDisabledTrait) == 1);
  CHECK(candidates_in(fleet).empty());
}

TEST_CASE("a VM's allocation follows its create and its delete") {
  const auto url = testing::placement_url();
  if (!url) return;
  Fleet fleet(*url);
  fleet.pass();
  const std::string uuid = fleet.create("train-0");
  const auto after_create = fleet.pass(false);
  CHECK(after_create.consumers == 1);
  const auto wanted = fleet.tree().allocations.at(uuid);
  CHECK(allocations_of(*fleet.placement, uuid) == wanted);
  auto state = fleet.placement->consumer(uuid);
  REQUIRE(state.ok());
  CHECK(state->consumer_type == kVmConsumer);
  REQUIRE(service::delete_vm(*fleet.service, testing::vm_name("train-0")).ok());
  const auto after_delete = fleet.pass(false);
  CHECK(allocations_of(*fleet.placement, uuid).empty());
  CHECK(after_delete.changes.size() >= 1);
}

TEST_CASE("a claimed create gets exactly its claim, and the claim becomes the VM's allocation") {
  const auto url = testing::placement_url();
  if (!url) return;
  Fleet fleet(*url);
  fleet.pass();
  const auto requests = candidates_in(fleet);
  REQUIRE(requests.size() >= 2);
  // The last candidate: not what the host's own placement would choose first.
  const auto claim = std::optional<ProviderResources>(requests.back().allocations);
  const std::string consumer = random_uuid();
  REQUIRE(fleet.placement->write_allocations({consumer, *claim, std::nullopt, kClaimConsumer}).ok());
  CHECK(fleet.create("train-1", consumer, *claim) == consumer);
  CHECK(fleet.tree().allocations.at(consumer) == *claim);
  fleet.pass(false);
  auto state = fleet.placement->consumer(consumer);
  REQUIRE(state.ok());
  CHECK(state->allocations == *claim);
  CHECK(state->consumer_type == kVmConsumer);
  // The same UUID again is another VM's: refused before anything is placed.
  auto twin = fleet.fixture.request("train-2", kTwoGpus);
  twin.uuid = Uuid::parse(consumer, "uuid").value();
  auto refused = service::create_vm(*fleet.service, twin);
  REQUIRE_FALSE(refused.ok());
  CHECK(refused.error().code == ErrorCode::conflict);
}

TEST_CASE("a claim no create takes goes after the grace, and another service's consumer stays") {
  const auto url = testing::placement_url();
  if (!url) return;
  Fleet fleet(*url);
  fleet.pass();
  const auto tree = fleet.tree();
  const std::string gpu = tree.providers.back().uuid;
  const std::string claim = random_uuid();
  const std::string other = random_uuid();
  REQUIRE(fleet.placement->write_allocations({claim, {{gpu, {{kGpu, 1}}}}, std::nullopt, kClaimConsumer}).ok());
  REQUIRE(
      fleet.placement->write_allocations({other, {{tree.providers[1].uuid, {{kVcpu, 2}}}}, std::nullopt, "INSTANCE"})
          .ok());
  CHECK(fleet.pass().pending_claims == 1);
  CHECK_FALSE(allocations_of(*fleet.placement, claim).empty());
  fleet.clock->sleep_for(fleet.fixture.placement.claim_grace + std::chrono::seconds(1));
  const auto report = fleet.pass();
  CHECK(report.pending_claims == 0);
  CHECK(allocations_of(*fleet.placement, claim).empty());
  CHECK_FALSE(allocations_of(*fleet.placement, other).empty());
}

TEST_CASE("a restart reconciles both ways: a VM made meanwhile is written, one gone is removed, drift is undone") {
  const auto url = testing::placement_url();
  if (!url) return;
  Fleet fleet(*url);
  fleet.pass();
  const std::string kept = fleet.create("kept");
  // A VM that existed in Placement but not on the host any more (deleted while the daemon was down).
  const auto tree = fleet.tree();
  const std::string gone = random_uuid();
  REQUIRE(
      fleet.placement->write_allocations({gone, {{tree.providers[2].uuid, {{kVcpu, 4}}}}, std::nullopt, kVmConsumer})
          .ok());
  // Inventory changed behind the host's back.
  auto numa = fleet.placement->provider(tree.providers[1].uuid);
  REQUIRE(numa.ok());
  REQUIRE(numa->has_value());
  auto drifted = (*numa)->inventories;
  drifted[kVcpu].total = 200;
  drifted[kVcpu].max_unit = 200;
  drifted[kVcpu].reserved = 7;  // the operator's: kept
  REQUIRE(fleet.placement->set_inventories((*numa)->uuid, (*numa)->generation, drifted).ok());
  // The restarted daemon's first pass (a converger of its own: it knows nothing of the first).
  daemon::PlacementConverger restarted(*fleet.service, *fleet.placement, fleet.fixture.placement, fleet.clock);
  auto report = restarted.run_once(true);
  REQUIRE(report.ok());
  CHECK(allocations_of(*fleet.placement, kept) == fleet.tree().allocations.at(kept));
  CHECK(allocations_of(*fleet.placement, gone).empty());
  auto fixed = fleet.placement->provider(tree.providers[1].uuid);
  REQUIRE(fixed.ok());
  auto wanted = fleet.tree().providers[1].inventories;
  wanted[kVcpu].reserved = 7;
  CHECK((*fixed)->inventories == wanted);
  std::string said;
  for (const auto& change : report->changes) said += change + "\n";
  CHECK(said.find("its VM is gone") != std::string::npos);
  CHECK(said.find("VCPU 200 (7 reserved) -> 96 (7 reserved)") != std::string::npos);
}

TEST_CASE("with Placement away a pass says so, and the host's creates go on") {
  const auto url = testing::placement_url();
  if (!url) return;
  Fleet fleet(*url);
  auto away = PlacementClient::make({"http://127.0.0.1:1", "admin", ""});
  REQUIRE(away.ok());
  daemon::PlacementConverger converger(*fleet.service, **away, fleet.fixture.placement, fleet.clock);
  auto report = converger.run_once(true);
  REQUIRE_FALSE(report.ok());
  CHECK(report.error().code == ErrorCode::unavailable);
  CHECK(report.error().message.find("is Placement running") != std::string::npos);
  const std::string uuid = fleet.create("during-outage");
  // Placement back: the next pass catches up.
  fleet.pass();
  CHECK(allocations_of(*fleet.placement, uuid) == fleet.tree().allocations.at(uuid));
}

TEST_CASE("the sync's thread publishes at start and follows a create without being asked") {
  const auto url = testing::placement_url();
  if (!url) return;
  Fleet fleet(*url);
  auto client = cli::placement_client(fleet.fixture.placement);
  REQUIRE(client.ok());
  auto sync =
      daemon::PlacementSync::start(*fleet.service, std::move(client).value(), fleet.fixture.placement, fleet.clock);
  const std::string uuid = fleet.create("watched");
  // Placement tells no one of a write, so it is asked until the allocation is there; the pass that
  // wrote it counts itself only once it ends, after its last write (the host's own holdings), so
  // both are waited for (CI's asan run once read the allocation while that pass was still going).
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  ProviderResources seen;
  while (std::chrono::steady_clock::now() < deadline) {
    seen = allocations_of(*fleet.placement, uuid);
    if (!seen.empty() && sync->passes() >= 1) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  CHECK(seen == fleet.tree().allocations.at(uuid));
  CHECK(sync->passes() >= 1);
}

}  // namespace
}  // namespace hostagent::fleet
