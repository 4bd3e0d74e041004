// daemon/maintenance: cordon, drain and uncordon, recorded before they are answered.
#include "maintenance.hpp"

#include <algorithm>

#include "daemon_log.hpp"
#include "hostagent/common/text.hpp"

namespace hostagent::daemon {
namespace {

using service::MaintenanceMode;

constexpr std::string_view kWayOut = "hostagentctl host uncordon (POST /v1/host/uncordon) takes VMs again";

std::string worded(const state::MaintenanceRecord& record) {
  return "the host is " + std::string(service::to_string(record.mode)) + " since " + record.since + " by " +
         (record.principal.empty() ? std::string("an operator") : record.principal) + ": " +
         text::quoted(record.reason);
}

}  // namespace

Status Maintenance::load() {
  HA_TRY(const auto record, state::read_maintenance_record(file_));
  std::lock_guard lock(mutex_);
  if (record) record_ = *record;
  if (record_.mode != MaintenanceMode::in_service) log(LogLevel::info, "maintenance: " + worded(record_));
  return ok_status();
}

service::MaintenanceView Maintenance::view() const {
  std::lock_guard lock(mutex_);
  return view_locked();
}

service::MaintenanceView Maintenance::view_locked() const {
  return service::MaintenanceView{record_.mode,  record_.reason,   record_.principal,
                                  record_.since, record_.deadline, vms_};
}

bool Maintenance::drains() const {
  std::lock_guard lock(mutex_);
  return record_.mode == MaintenanceMode::draining || record_.mode == MaintenanceMode::drained;
}

Status Maintenance::refuse_create() const {
  std::lock_guard lock(mutex_);
  if (record_.mode == MaintenanceMode::in_service) return ok_status();
  return Error{ErrorCode::conflict, "no new VMs: " + worded(record_) + "; " + std::string(kWayOut)};
}

Status Maintenance::refuse_start(const std::string& vm) const {
  std::lock_guard lock(mutex_);
  if (record_.mode != MaintenanceMode::draining && record_.mode != MaintenanceMode::drained) return ok_status();
  return Error{ErrorCode::conflict, vm + " is not started: " + worded(record_) + "; " + std::string(kWayOut)};
}

Result<service::MaintenanceView> Maintenance::cordon(const std::string& reason, const std::string& principal) {
  std::lock_guard order(publish_order_);
  service::MaintenanceView view;
  {
    std::lock_guard lock(mutex_);
    if (record_.mode == MaintenanceMode::draining || record_.mode == MaintenanceMode::drained) {
      return Error{ErrorCode::conflict,
                   "cordon: " + worded(record_) + ", which keeps new VMs out already; uncordon ends the maintenance"};
    }
    HA_TRY_STATUS(write_locked({MaintenanceMode::cordoned, reason, principal, rfc3339(clock_.now()), ""}));
    view = view_locked();
  }
  log(LogLevel::info, "maintenance: cordoned by " + principal + ": " + text::quoted(reason));
  publish(view);
  return view;
}

Result<std::chrono::steady_clock::time_point> Maintenance::drain(const std::string& reason, std::chrono::seconds grace,
                                                                 const std::string& principal) {
  std::lock_guard order(publish_order_);
  const auto now = clock_.now();
  service::MaintenanceView view;
  {
    std::lock_guard lock(mutex_);
    HA_TRY_STATUS(write_locked({MaintenanceMode::draining, reason, principal, rfc3339(now), rfc3339(now + grace)}));
    // What the last drain left failed or stopped is stopped again (stopping() says which); a stop
    // still under way carries on to its own deadline.
    std::erase_if(vms_, [](const service::DrainVmView& vm) { return vm.state != "stopping"; });
    view = view_locked();
  }
  log(LogLevel::info, "maintenance: draining by " + principal + ", VMs powered off after " +
                          std::to_string(grace.count()) + " s: " + text::quoted(reason));
  publish(view);
  return clock_.steady_now() + grace;
}

std::optional<std::chrono::steady_clock::time_point> Maintenance::drain_underway() const {
  std::lock_guard lock(mutex_);
  if (record_.mode != MaintenanceMode::draining) return std::nullopt;
  const auto deadline = time_of(record_.deadline);
  const auto left = deadline ? *deadline - clock_.now() : std::chrono::system_clock::duration::zero();
  return clock_.steady_now() + std::max(std::chrono::system_clock::duration::zero(), left);
}

void Maintenance::stopping(const std::vector<std::string>& vms) {
  std::lock_guard order(publish_order_);
  service::MaintenanceView view;
  {
    std::lock_guard lock(mutex_);
    for (const auto& vm : vms) vms_.push_back({vm, "stopping", ""});
    std::sort(vms_.begin(), vms_.end(), [](const auto& a, const auto& b) { return a.vm < b.vm; });
    finish_if_done_locked();
    view = view_locked();
  }
  publish(view);
}

void Maintenance::stop_ended(const std::string& vm, const Result<DrainStop>& outcome) {
  std::lock_guard order(publish_order_);
  service::MaintenanceView view;
  {
    std::lock_guard lock(mutex_);
    const auto it = std::find_if(vms_.begin(), vms_.end(), [&](const auto& v) { return v.vm == vm; });
    if (it == vms_.end()) return;  // an uncordon and a new drain since: that drain's stop follows
    if (outcome.ok()) {
      it->state = *outcome == DrainStop::stopped ? "stopped" : "powered_off";
    } else if (outcome.error().code == ErrorCode::not_found) {
      it->state = "stopped";  // gone (a create the drain followed failed, or a delete came first)
    } else {
      it->state = "failed";
      it->error = outcome.error().message;
    }
    finish_if_done_locked();
    view = view_locked();
  }
  publish(view);
}

std::vector<std::string> Maintenance::still_stopping() const {
  std::lock_guard lock(mutex_);
  std::vector<std::string> out;
  for (const auto& vm : vms_) {
    if (vm.state == "stopping") out.push_back(vm.vm);
  }
  return out;
}

// Drained once no stop is left and none failed: a failure keeps the host draining, for a drain
// again or the operator to settle.
void Maintenance::finish_if_done_locked() {
  if (record_.mode != MaintenanceMode::draining) return;
  const bool done = std::none_of(vms_.begin(), vms_.end(),
                                 [](const auto& vm) { return vm.state == "stopping" || vm.state == "failed"; });
  if (!done) return;
  auto record = record_;
  record.mode = MaintenanceMode::drained;
  if (auto written = write_locked(record); !written.ok()) {
    log(LogLevel::error, "maintenance: the drain ended, and recording it failed (" + written.error().message +
                             "): the host stays draining, and a restart drains again");
    return;
  }
  log(LogLevel::info, "maintenance: drained: " + std::to_string(vms_.size()) + " VMs stopped");
}

Result<service::MaintenanceView> Maintenance::uncordon(const std::string& principal) {
  std::lock_guard order(publish_order_);
  service::MaintenanceView view;
  {
    std::lock_guard lock(mutex_);
    HA_TRY_STATUS(write_locked({MaintenanceMode::in_service, "", principal, rfc3339(clock_.now()), ""}));
    vms_.clear();
    view = view_locked();
  }
  log(LogLevel::info, "maintenance: back in service, by " + principal);
  publish(view);
  return view;
}

Status Maintenance::write_locked(state::MaintenanceRecord record) {
  HA_TRY_STATUS(state::write_maintenance_record(file_, record));
  record_ = std::move(record);
  return ok_status();
}

void Maintenance::publish(const service::MaintenanceView& view) {
  service::ServiceEvent event;
  event.kind = service::ServiceEvent::Kind::maintenance;
  event.maintenance = view;
  events_.publish(event);
}

}  // namespace hostagent::daemon
