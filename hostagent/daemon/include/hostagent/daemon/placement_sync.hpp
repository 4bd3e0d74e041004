// hostagent/daemon/placement_sync: keeps the fleet's OpenStack Placement in step with this host
// (docs/placement.md, "In step"). Level-triggered: each pass reads what the host holds now (the
// service's usage, the tree fleet/provider_tree makes of it) and what Placement holds, and writes
// the difference: providers, inventories and traits, then each managed VM's allocation (consumer =
// its UUID) and the host's own (fleet::ProviderTree::host_holds), then the removal of allocations
// no VM holds. It merges: a trait it does not manage and each inventory's `reserved` are left as
// Placement has them, so an operator's marks survive every pass. A pass runs at start, after every change
// the service announces, at placement.interval, and again with a backoff while Placement cannot be
// reached. Nothing the host's own API does waits for it: a create goes on while Placement is away,
// and the next pass catches up.
#pragma once

#include <chrono>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "hostagent/common/result.hpp"
#include "hostagent/config/daemon_config.hpp"
#include "hostagent/daemon/clock.hpp"
#include "hostagent/fleet/placement_client.hpp"
#include "hostagent/service/vm_service.hpp"

namespace hostagent::daemon {

// What one pass changed in Placement ("inventory of host_numa0: VCPU 96 -> 94"), and what it could
// not ("allocation of train-3: ... exceed the capacity"): a pass goes on past a failed write.
struct SyncReport {
  std::vector<std::string> changes;
  std::vector<std::string> problems;
  int pending_claims = 0;  // claims no VM holds yet, within placement.claim_grace
  int providers = 0;
  int consumers = 0;  // managed VMs' allocations in step
};

// One pass's logic, apart from its thread: tests drive it against a real Placement.
class PlacementConverger {
 public:
  PlacementConverger(service::VmService& service, fleet::PlacementClient& placement, config::PlacementConfig config,
                     std::shared_ptr<Clock> clock);
  // unavailable when Placement cannot be reached (nothing after that point was tried); other
  // failures are the report's problems. A full pass (at start, every placement.interval, after a
  // pass with problems) lists the host's providers and reads again every one whose generation moved
  // on since this daemon last saw it, and the allocations on it; a quick one (after a change the
  // service announced) writes only what changed since the last pass wrote or read it, and removes
  // the allocations of this host's VMs that are gone.
  Result<SyncReport> run_once(bool full = true);

 private:
  Status ensure_names(const fleet::ProviderTree& tree);
  void forget_changed(const fleet::ProviderTree& tree, const std::map<std::string, fleet::ListedProvider>& listed);
  void sync_provider(const fleet::Provider& wanted, SyncReport& report);
  void remove_strays(const fleet::ProviderTree& tree, const std::map<std::string, fleet::ListedProvider>& listed,
                     SyncReport& report);
  Status read_changed_allocations(const fleet::ProviderTree& tree, std::set<std::string>& unknown);
  // One consumer's allocation as the host holds it: a managed VM's, or the host's own.
  struct ConsumerWrite {
    std::string consumer;
    const fleet::ProviderResources* wanted = nullptr;
    std::string label;  // for the report: the VM's name, or what the consumer is
    const char* type = fleet::kVmConsumer;
  };
  // Written (a claim the VM took becomes the VM's, unit for unit); the problem when it was not.
  std::optional<std::string> sync_consumer(const ConsumerWrite& write, SyncReport& report);
  // What the tree wants `consumer` to hold: a managed VM's allocation or the host's own; null for
  // any other consumer.
  const fleet::ProviderResources* wanted_of(const fleet::ProviderTree& tree, const std::string& consumer) const;
  void settle_unknown(const std::string& consumer, SyncReport& report);

  service::VmService& service_;
  fleet::PlacementClient& placement_;
  config::PlacementConfig config_;
  std::shared_ptr<Clock> clock_;
  std::string host_consumer_;        // the consumer of the host's own holdings (fleet::host_consumer_uuid)
  std::set<std::string> ensured_;    // custom classes and traits created this run
  std::set<std::string> known_vms_;  // consumers that were this host's VMs in an earlier pass
  // What Placement was last seen or made to hold: providers by UUID, managed VMs' allocations by
  // consumer. A quick pass trusts it; a full pass reads Placement again.
  std::map<std::string, fleet::Provider> synced_providers_;
  std::map<std::string, fleet::ProviderResources> synced_consumers_;
  // Each provider's generation when this daemon last read its allocations; a full pass reads again
  // only those whose generation moved on (changed_: to read).
  std::map<std::string, int64_t> generations_;
  std::set<std::string> changed_;
  std::map<std::string, std::chrono::steady_clock::time_point> claims_seen_;  // pending claims, first seen
};

// The pass on its own thread. start() returns at once; the first pass runs on the thread.
class PlacementSync {
 public:
  // `placement` is the composition root's (cli::placement_client), owned by the sync from here.
  static std::unique_ptr<PlacementSync> start(service::VmService& service,
                                              std::unique_ptr<fleet::PlacementClient> placement,
                                              const config::PlacementConfig& config, std::shared_ptr<Clock> clock);
  virtual ~PlacementSync() = default;
  // The last pass's report and when it ended; nullopt before the first.
  virtual std::optional<SyncReport> last() = 0;
  // Counts passes that ended (with or without problems), and those that could not reach Placement.
  virtual int passes() = 0;
  virtual int unreachable() = 0;
};

}  // namespace hostagent::daemon
