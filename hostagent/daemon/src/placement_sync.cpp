// daemon/placement_sync: one pass converges Placement to the host; a thread runs passes.
#include "hostagent/daemon/placement_sync.hpp"

#include <algorithm>
#include <condition_variable>
#include <exception>
#include <mutex>
#include <thread>

#include "daemon_log.hpp"
#include "hostagent/numa/capacity.hpp"

namespace hostagent::daemon {
namespace {

constexpr int kGenerationRetries = 5;  // a provider's generation moved on (a claim landed): read, write again

std::string describe_change(const std::string& rc, const fleet::InventoryRecord* was,
                            const fleet::InventoryRecord* now) {
  const auto text = [](const fleet::InventoryRecord* r) {
    return r == nullptr
               ? std::string("none")
               : std::to_string(r->total) + (r->reserved > 0 ? " (" + std::to_string(r->reserved) + " reserved)" : "");
  };
  return rc + " " + text(was) + " -> " + text(now);
}

// What Placement's inventories lack or have wrong, worded: "" when they match.
// "+COMPUTE_STATUS_DISABLED -CUSTOM_HOSTAGENT_SLOT_3": what a trait write adds and takes away.
std::string trait_diff(const std::set<std::string>& before, const std::set<std::string>& after) {
  std::string out;
  for (const auto& trait : after) {
    if (before.count(trait) == 0) out += (out.empty() ? "+" : " +") + trait;
  }
  for (const auto& trait : before) {
    if (after.count(trait) == 0) out += (out.empty() ? "-" : " -") + trait;
  }
  return out;
}

std::string inventory_diff(const std::map<std::string, fleet::InventoryRecord>& have,
                           const std::map<std::string, fleet::InventoryRecord>& want) {
  std::string out;
  const auto add = [&out](const std::string& text) { out += (out.empty() ? "" : "; ") + text; };
  for (const auto& [rc, record] : want) {
    const auto it = have.find(rc);
    if (it == have.end() || !(it->second == record))
      add(describe_change(rc, it == have.end() ? nullptr : &it->second, &record));
  }
  for (const auto& [rc, record] : have) {
    if (want.count(rc) == 0) add(describe_change(rc, &record, nullptr));
  }
  return out;
}

// Managed VMs by name -> UUID, and UUID -> name.
struct Managed {
  std::map<std::string, std::string> uuid_of;
  std::map<std::string, std::string> name_of;
};

Managed managed_vms(service::VmService& service) {
  Managed out;
  for (const auto& vm : service.list_vms()) {
    if (!vm.managed || !vm.record || vm.uuid.empty()) continue;
    out.uuid_of[vm.name] = vm.uuid;
    out.name_of[vm.uuid] = vm.name;
  }
  return out;
}

}  // namespace

PlacementConverger::PlacementConverger(service::VmService& service, fleet::PlacementClient& placement,
                                       config::PlacementConfig config, std::shared_ptr<Clock> clock)
    : service_(service),
      placement_(placement),
      config_(std::move(config)),
      clock_(std::move(clock)),
      host_consumer_(fleet::host_consumer_uuid(config_.host_name)) {}

const fleet::ProviderResources* PlacementConverger::wanted_of(const fleet::ProviderTree& tree,
                                                              const std::string& consumer) const {
  if (consumer == host_consumer_) return &tree.host_holds;
  const auto it = tree.allocations.find(consumer);
  return it == tree.allocations.end() ? nullptr : &it->second;
}

Result<SyncReport> PlacementConverger::run_once(bool full) {
  const auto managed = managed_vms(service_);
  // Every VM listed is remembered (here and where a pass asks again below), not only those a tree
  // held: a VM made and deleted while a pass ran, whose allocation that pass read (recording its
  // providers' generations), is otherwise in no tree and on no changed provider when it goes, and
  // its allocation would stay (the fleet test found two, 255 s after their deletes).
  for (const auto& [uuid, name] : managed.name_of) known_vms_.insert(uuid);
  const service::HostUsage usage = service_.usage();
  const auto capacity = numa::capacity(*usage.host, usage.held, usage.policy);
  fleet::TreeInput input{config_.host_name,
                         usage.host,
                         &capacity,
                         &usage.held,
                         usage.policy.housekeeping_cpus,
                         managed.uuid_of,
                         service_.maintenance().mode != service::MaintenanceMode::in_service};
  // A VM listed after usage() was read holds nothing in it yet: its allocation waits for the next pass.
  for (auto it = input.managed.begin(); it != input.managed.end();) {
    const bool holds =
        std::any_of(usage.held.begin(), usage.held.end(), [&](const numa::Allocation& a) { return a.vm == it->first; });
    it = holds ? std::next(it) : input.managed.erase(it);
  }
  const auto tree = fleet::provider_tree(input);
  HA_TRY_STATUS(ensure_names(tree));
  SyncReport report;
  std::set<std::string> unknown;
  if (full) {
    HA_TRY(const auto listed, placement_.tree(tree.root_uuid()));
    forget_changed(tree, listed);
    remove_strays(tree, listed, report);
  }
  for (const auto& provider : tree.providers) sync_provider(provider, report);
  report.providers = static_cast<int>(tree.providers.size());
  if (full) {
    HA_TRY_STATUS(read_changed_allocations(tree, unknown));
    for (const auto& [consumer, seen] : claims_seen_) unknown.insert(consumer);
  }
  for (const auto& consumer : known_vms_) {
    if (tree.allocations.count(consumer) == 0) unknown.insert(consumer);
  }
  std::vector<ConsumerWrite> refused;  // tried again below, once what they need may have been freed
  const auto write = [&](ConsumerWrite consumer) {
    const auto synced = synced_consumers_.find(consumer.consumer);
    if (synced != synced_consumers_.end() && synced->second == *consumer.wanted) return;
    if (sync_consumer(consumer, report)) refused.push_back(std::move(consumer));
  };
  for (const auto& [consumer, wanted] : tree.allocations) {
    const auto name = managed.name_of.find(consumer);
    write({consumer, &wanted, name == managed.name_of.end() ? consumer : name->second, fleet::kVmConsumer});
    known_vms_.insert(consumer);
  }
  // A VM made while this pass ran is not in `tree`: asked again now, so that its allocation (a claim
  // the control plane already handed over to it) is not taken for a gone VM's.
  if (!unknown.empty()) {
    for (const auto& [uuid, name] : managed_vms(service_).name_of) {
      unknown.erase(uuid);
      known_vms_.insert(uuid);  // the pass recorded its providers' generations: when it goes, it is known
    }
  }
  for (const auto& consumer : unknown) settle_unknown(consumer, report);
  // The host's own holdings after the removals, and then once more each write Placement refused:
  // a device passes from a gone VM to a cleaning, or from a cleaning to a new VM, and the write
  // that takes it fits only once the one that lets it go is made.
  write({host_consumer_, &tree.host_holds, "the host's own holdings", fleet::kHostConsumer});
  for (const auto& again : refused) {
    if (auto problem = sync_consumer(again, report)) report.problems.push_back(*problem);
  }
  report.consumers = static_cast<int>(tree.allocations.size());
  return report;
}

// Custom resource classes and traits exist before a provider names them (PUT is idempotent).
Status PlacementConverger::ensure_names(const fleet::ProviderTree& tree) {
  std::set<std::string> classes;
  std::set<std::string> traits;
  for (const auto& provider : tree.providers) {
    for (const auto& [rc, record] : provider.inventories) classes.insert(rc);
    traits.insert(provider.traits.begin(), provider.traits.end());
  }
  for (const auto& rc : classes) {
    if (rc.rfind("CUSTOM_", 0) != 0 || ensured_.count(rc) != 0) continue;
    HA_TRY_STATUS(placement_.ensure_resource_class(rc));
    ensured_.insert(rc);
  }
  for (const auto& trait : traits) {
    if (trait.rfind("CUSTOM_", 0) != 0 || ensured_.count(trait) != 0) continue;
    HA_TRY_STATUS(placement_.ensure_trait(trait));
    ensured_.insert(trait);
  }
  return ok_status();
}

// Created when missing; inventories, then traits, written at the generation just read, again on a
// generation conflict (a claim or another writer moved it on).
void PlacementConverger::sync_provider(const fleet::Provider& wanted, SyncReport& report) {
  const auto synced = synced_providers_.find(wanted.uuid);
  if (synced != synced_providers_.end() && synced->second.inventories == wanted.inventories &&
      synced->second.traits == wanted.traits) {
    return;
  }
  synced_providers_.erase(wanted.uuid);
  for (int attempt = 0; attempt < kGenerationRetries; ++attempt) {
    auto state = placement_.provider(wanted.uuid);
    if (!state.ok()) {
      report.problems.push_back("read provider " + wanted.name + ": " + state.error().message);
      return;
    }
    if (!*state) {
      auto created = placement_.create_provider(wanted.uuid, wanted.name, wanted.parent_uuid);
      if (!created.ok()) {
        report.problems.push_back("create provider " + wanted.name + ": " + created.error().message);
        return;
      }
      report.changes.push_back("provider " + wanted.name + " created");
      state = std::optional<fleet::ProviderState>(std::move(created).value());
    }
    int64_t generation = (*state)->generation;
    // Each inventory's `reserved` as Placement has it: the operator's (fleet::merged_inventories).
    const auto inventories = fleet::merged_inventories((*state)->inventories, wanted.inventories);
    const std::string diff = inventory_diff((*state)->inventories, inventories);
    if (!diff.empty()) {
      auto written = placement_.set_inventories(wanted.uuid, generation, inventories);
      if (!written.ok() && written.error().code == ErrorCode::conflict) continue;
      if (!written.ok()) {
        report.problems.push_back("inventory of " + wanted.name + ": " + written.error().message);
        return;
      }
      generation = *written;
      report.changes.push_back("inventory of " + wanted.name + ": " + diff);
    }
    // Merged, never replaced: a trait someone else put on the provider stays (fleet::merged_traits).
    const auto traits = fleet::merged_traits((*state)->traits, wanted.traits);
    if ((*state)->traits != traits) {
      auto written = placement_.set_traits(wanted.uuid, generation, traits);
      if (!written.ok() && written.error().code == ErrorCode::conflict) continue;
      if (!written.ok()) {
        report.problems.push_back("traits of " + wanted.name + ": " + written.error().message);
        return;
      }
      report.changes.push_back("traits of " + wanted.name + ": " + trait_diff((*state)->traits, traits));
    }
    synced_providers_[wanted.uuid] = wanted;
    changed_.insert(wanted.uuid);  // its allocations are read in a full pass
    return;
  }
  report.problems.push_back("provider " + wanted.name + ": its generation kept moving; the next pass tries again");
}

// A provider whose generation moved on since this daemon last read or wrote it was changed by
// someone else (an allocation, an operator): what this daemon knew of it, and of the allocations on
// it, is read again. An unchanged one costs nothing beyond the listing.
void PlacementConverger::forget_changed(const fleet::ProviderTree& tree,
                                        const std::map<std::string, fleet::ListedProvider>& listed) {
  for (const auto& provider : tree.providers) {
    const auto now = listed.find(provider.uuid);
    const auto seen = generations_.find(provider.uuid);
    if (now != listed.end() && seen != generations_.end() && seen->second == now->second.generation) continue;
    synced_providers_.erase(provider.uuid);
    changed_.insert(provider.uuid);
  }
}

// Providers under this host's root that the tree no longer has (a GPU gone from the bus): leaves first.
void PlacementConverger::remove_strays(const fleet::ProviderTree& tree,
                                       const std::map<std::string, fleet::ListedProvider>& listed, SyncReport& report) {
  std::vector<std::pair<bool, std::string>> strays;  // (has a parent under the root, uuid): deeper first
  for (const auto& [uuid, provider] : listed) {
    if (tree.find(uuid) == nullptr) strays.emplace_back(provider.parent_uuid != tree.root_uuid(), uuid);
  }
  std::sort(strays.rbegin(), strays.rend());
  for (const auto& [deep, uuid] : strays) {
    const std::string& name = listed.at(uuid).name;
    if (auto removed = placement_.delete_provider(uuid); !removed.ok()) {
      report.problems.push_back("remove provider " + name + " the host no longer has: " + removed.error().message);
    } else {
      report.changes.push_back("provider " + name + " removed: the host no longer has it");
    }
  }
}

// The allocations on each changed provider: consumers the host does not hold go to `unknown`, and a
// VM's whose part there differs from the host's is written again.
Status PlacementConverger::read_changed_allocations(const fleet::ProviderTree& tree, std::set<std::string>& unknown) {
  for (const auto& uuid : changed_) {
    if (tree.find(uuid) == nullptr) continue;
    HA_TRY(const auto held, placement_.provider_allocations(uuid));
    generations_[uuid] = held.generation;
    for (const auto& [consumer, resources] : held.consumers) {
      const auto* wanted = wanted_of(tree, consumer);
      if (wanted == nullptr) {
        unknown.insert(consumer);
        continue;
      }
      const auto part = wanted->find(uuid);
      if (part == wanted->end() || part->second != resources) synced_consumers_.erase(consumer);
    }
    // A consumer the tree puts here that Placement has not: written again.
    const auto forget_if_absent = [&](const std::string& consumer, const fleet::ProviderResources& wanted) {
      if (wanted.count(uuid) != 0 && held.consumers.count(consumer) == 0) synced_consumers_.erase(consumer);
    };
    for (const auto& [consumer, wanted] : tree.allocations) forget_if_absent(consumer, wanted);
    forget_if_absent(host_consumer_, tree.host_holds);
  }
  changed_.clear();
  return ok_status();
}

// What the host holds for `consumer` (a managed VM's, or the host's own, of `type`), written as the
// consumer's allocation: a claim the VM took becomes the VM's, unit for unit what the claim named.
std::optional<std::string> PlacementConverger::sync_consumer(const ConsumerWrite& write, SyncReport& report) {
  for (int attempt = 0; attempt < kGenerationRetries; ++attempt) {
    auto state = placement_.consumer(write.consumer);
    if (!state.ok()) return "read allocation of " + write.label + ": " + state.error().message;
    if (state->allocations == *write.wanted && (write.wanted->empty() || state->consumer_type == write.type)) {
      synced_consumers_[write.consumer] = *write.wanted;
      return std::nullopt;
    }
    auto written = placement_.write_allocations(fleet::rewrite_of(write.consumer, *state, *write.wanted, write.type));
    if (!written.ok() && written.error().code == ErrorCode::conflict) continue;
    if (!written.ok()) return "allocation of " + write.label + ": " + written.error().message;
    synced_consumers_[write.consumer] = *write.wanted;
    claims_seen_.erase(write.consumer);
    report.changes.push_back("allocation of " + write.label + " written (" + std::to_string(write.wanted->size()) +
                             " providers)" +
                             (state->consumer_type == fleet::kClaimConsumer ? ": its claim taken" : ""));
    return std::nullopt;
  }
  return "allocation of " + write.label + ": its generation kept moving; the next pass tries again";
}

// An allocation on this host no VM of it holds: a VM deleted (now, or while the daemon was down),
// or a claim whose create has not come (kept for placement.claim_grace, then removed). Another
// service's consumers are left alone.
void PlacementConverger::settle_unknown(const std::string& consumer, SyncReport& report) {
  auto state = placement_.consumer(consumer);
  if (!state.ok()) {
    report.problems.push_back("read consumer " + consumer + ": " + state.error().message);
    return;
  }
  if (state->allocations.empty()) {  // gone already (a control plane removed it)
    known_vms_.erase(consumer);
    synced_consumers_.erase(consumer);
    return;
  }
  const bool was_vm = known_vms_.count(consumer) != 0 || state->consumer_type == fleet::kVmConsumer;
  std::string why;
  if (was_vm) {
    why = "its VM is gone";
  } else if (state->consumer_type == fleet::kClaimConsumer) {
    const auto now = clock_->steady_now();
    const auto seen = claims_seen_.emplace(consumer, now).first->second;
    if (now - seen < config_.claim_grace) {
      ++report.pending_claims;
      return;
    }
    why = "a claim no create took within placement.claim_grace";
  } else {
    return;
  }
  if (auto removed = placement_.write_allocations(fleet::rewrite_of(consumer, *state, {}, state->consumer_type));
      !removed.ok()) {
    report.problems.push_back("remove allocation of " + consumer + ": " + removed.error().message);
    return;
  }
  known_vms_.erase(consumer);
  synced_consumers_.erase(consumer);
  claims_seen_.erase(consumer);
  report.changes.push_back("allocation of consumer " + consumer + " on " + std::to_string(state->allocations.size()) +
                           " providers removed: " + why);
}

namespace {

class SyncThread final : public PlacementSync {
 public:
  SyncThread(service::VmService& service, std::unique_ptr<fleet::PlacementClient> client,
             config::PlacementConfig config, std::shared_ptr<Clock> clock)
      : service_(service),
        client_(std::move(client)),
        interval_(config.interval),
        clock_(*clock),
        converger_(service, *client_, std::move(config), std::move(clock)) {
    // What changes holdings: a VM defined or gone, devices changing hands, cleaning and quarantine.
    // An operation's progress changes nothing Placement sees.
    subscription_ = service_.subscribe([this](const service::ServiceEvent& event) {
      if (event.kind != service::ServiceEvent::Kind::operation) poke();
    });
    thread_ = std::thread([this] { loop(); });
  }
  ~SyncThread() override {
    service_.unsubscribe(subscription_);
    {
      std::lock_guard lock(mutex_);
      stopping_ = true;
    }
    wake_.notify_all();
    thread_.join();
  }
  SyncThread(const SyncThread&) = delete;
  SyncThread& operator=(const SyncThread&) = delete;

  std::optional<SyncReport> last() override {
    std::lock_guard lock(mutex_);
    return last_;
  }
  int passes() override {
    std::lock_guard lock(mutex_);
    return passes_;
  }
  int unreachable() override {
    std::lock_guard lock(mutex_);
    return unreachable_;
  }

 private:
  void poke() {
    {
      std::lock_guard lock(mutex_);
      poked_ = true;
    }
    wake_.notify_all();
  }

  // After a pass that could not reach Placement: 1 s, doubling to the interval.
  void loop() {
    std::chrono::milliseconds wait{0};
    std::unique_lock lock(mutex_);
    while (!stopping_) {
      clock_.wait_until(wake_, lock, clock_.steady_now() + wait, [this] { return stopping_ || poked_; });
      if (stopping_) break;
      const bool poked = poked_;
      poked_ = false;
      // A quick pass for a change, while the last pass was clean and the interval has not passed.
      const auto now = clock_.steady_now();
      const bool full = !poked || !clean_ || now - last_full_ >= interval_;
      if (full) last_full_ = now;
      lock.unlock();
      auto report = contained_pass(full);
      log_pass(report);
      lock.lock();
      ++passes_;
      clean_ = report.ok() && report->problems.empty();
      if (report.ok()) {
        last_ = std::move(report).value();
        wait = interval_;
      } else {
        ++unreachable_;
        wait = std::min(interval_, std::max(std::chrono::milliseconds(1000), wait * 2));
      }
    }
  }

  // The answers are read strictly (fleet/client), so nothing here should throw; whatever still
  // does (a library's bad_alloc, a defect) ends this pass as a failed one, and the thread and the
  // daemon go on: a sync thread that let an exception out would std::terminate the host.
  Result<SyncReport> contained_pass(bool full) {
    try {
      return converger_.run_once(full);
    } catch (const std::exception& thrown) {
      return Error{ErrorCode::internal, std::string("the pass was cut short by an exception: ") + thrown.what()};
    }
  }

  static void log_pass(const Result<SyncReport>& report) {
    if (!report.ok()) {
      log(LogLevel::warning, "placement: " + report.error().message + "; the host goes on, and the sync tries again");
      return;
    }
    for (const auto& change : report->changes) log(LogLevel::info, "placement: " + change);
    for (const auto& problem : report->problems) log(LogLevel::warning, "placement: " + problem);
  }

  service::VmService& service_;
  std::unique_ptr<fleet::PlacementClient> client_;
  std::chrono::milliseconds interval_;
  Clock& clock_;  // the converger's, which it keeps alive
  PlacementConverger converger_;
  uint64_t subscription_ = 0;
  std::mutex mutex_;
  std::condition_variable wake_;
  bool stopping_ = false;
  bool poked_ = true;   // the first pass runs at once,
  bool clean_ = false;  // and in full
  std::chrono::steady_clock::time_point last_full_;
  std::optional<SyncReport> last_;
  int passes_ = 0;
  int unreachable_ = 0;
  std::thread thread_;
};

}  // namespace

std::unique_ptr<PlacementSync> PlacementSync::start(service::VmService& service,
                                                    std::unique_ptr<fleet::PlacementClient> placement,
                                                    const config::PlacementConfig& config,
                                                    std::shared_ptr<Clock> clock) {
  return std::make_unique<SyncThread>(service, std::move(placement), config, std::move(clock));
}

}  // namespace hostagent::daemon
