// daemon/maintenance (private): whether the host takes VMs: cordon, drain, uncordon, the one owner
// of state/maintenance.json. It decides and records; the service queues a drain's stops (it owns
// the queues) and tells this owner as each one ends. Thread-safe.
#pragma once

#include <chrono>
#include <filesystem>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "event_hub.hpp"
#include "hostagent/common/result.hpp"
#include "hostagent/daemon/clock.hpp"
#include "hostagent/service/vm_service.hpp"
#include "hostagent/state/maintenance_record.hpp"

namespace hostagent::daemon {

// How one drained VM's stop ended.
enum class DrainStop { stopped, powered_off };

class Maintenance {
 public:
  Maintenance(std::filesystem::path file, Clock& clock, EventHub& events)
      : file_(std::move(file)), clock_(clock), events_(events) {}

  // At start, before anything changes: an unreadable record stops the start.
  Status load();
  service::MaintenanceView view() const;
  // Draining or drained: nothing of the host's starts (a start, a boot start).
  bool drains() const;
  // ok in service; else conflict naming the maintenance, its reason and the way out.
  Status refuse_create() const;
  Status refuse_start(const std::string& vm) const;

  Result<service::MaintenanceView> cordon(const std::string& reason, const std::string& principal);
  // Records the drain (now + grace); the steady time its stops force at.
  Result<std::chrono::steady_clock::time_point> drain(const std::string& reason, std::chrono::seconds grace,
                                                      const std::string& principal);
  // At start, a drain a restart cut short: the steady time its stops force at (now when passed).
  std::optional<std::chrono::steady_clock::time_point> drain_underway() const;
  // The VMs whose stops the drain queued (those not already stopping); none left: drained.
  void stopping(const std::vector<std::string>& vms);
  // A VM's drain stop ended: how, or why it failed. The last one to end makes the host drained
  // when none failed.
  void stop_ended(const std::string& vm, const Result<DrainStop>& outcome);
  // The names the drain is still stopping.
  std::vector<std::string> still_stopping() const;
  Result<service::MaintenanceView> uncordon(const std::string& principal);

 private:
  Status write_locked(state::MaintenanceRecord record);
  void finish_if_done_locked();
  service::MaintenanceView view_locked() const;
  void publish(const service::MaintenanceView& view);

  const std::filesystem::path file_;
  Clock& clock_;
  EventHub& events_;
  // Held by each change from its view to its publish (before mutex_): two drain stops ending at once
  // otherwise published their views in either order, and a "draining" one could come after
  // "drained" (an asan run's drain test waited for a last event that had been overtaken).
  std::mutex publish_order_;
  mutable std::mutex mutex_;
  state::MaintenanceRecord record_;  // in_service with no `since` when the file is absent
  std::vector<service::DrainVmView> vms_;
};

}  // namespace hostagent::daemon
