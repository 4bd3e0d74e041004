// daemon/quarantine: what is quarantined, on disk, in the ledger, in the log and on the event stream.
#include "quarantine.hpp"

#include <algorithm>
#include <array>

#include "daemon_log.hpp"

namespace hostagent::daemon {
namespace {

QuarantineView view_of(const state::QuarantinedDevice& device) {
  return QuarantineView{device.address, device.step, device.reason, device.vm, device.since};
}

// What happened to a quarantined device: the step and the account.
std::string account(const state::QuarantinedDevice& device) {
  return device.step + " failed" + (device.vm.empty() ? "" : " for vm " + device.vm) + " at " + device.since + ": " +
         device.reason;
}

// What placement says of it: the account, with how to clear it.
std::string placement_reason(const state::QuarantinedDevice& device) {
  return account(device) + "; once it is repaired, clear it with `hostagentctl quarantine clear " +
         device.address.to_string() + "`";
}

// The roles whose devices go to VMs: one of them gone is a device placement could still name.
constexpr std::array kPlacedRoles = {numa::PciRole::gpu, numa::PciRole::nvswitch, numa::PciRole::nic,
                                     numa::PciRole::nvme};

std::string holder_of(const std::vector<numa::Allocation>& held, const PciAddress& address) {
  for (const auto& allocation : held) {
    if (std::find(allocation.devices.begin(), allocation.devices.end(), address) != allocation.devices.end()) {
      return allocation.vm;
    }
  }
  return {};
}

}  // namespace

Status Quarantine::load() {
  HA_TRY(auto devices, state::read_quarantine(file_));
  std::lock_guard lock(mutex_);
  devices_ = std::move(devices);
  tell_ledger_locked();
  for (const auto& device : devices_) {
    log(LogLevel::warning,
        "quarantine: " + device.address.to_string() + " stays out of placement (" + placement_reason(device) + ")");
  }
  return ok_status();
}

void Quarantine::add(const PciAddress& address, const std::string& step, const std::string& reason,
                     const std::string& vm) {
  state::QuarantinedDevice device{address, step, reason, vm, rfc3339(clock_.now())};
  {
    std::lock_guard lock(mutex_);
    const auto known = std::any_of(devices_.begin(), devices_.end(),
                                   [&](const state::QuarantinedDevice& d) { return d.address == address; });
    if (known) return;
    devices_.push_back(device);
    if (auto written = state::write_quarantine(file_, devices_); !written.ok()) {
      log(LogLevel::error,
          "quarantine: " + address.to_string() + " is kept out for this run only: " + written.error().message);
    }
    tell_ledger_locked();
  }
  log(LogLevel::warning, "quarantine: " + address.to_string() + " out of placement (" + placement_reason(device) + ")",
      {.vm = vm});
  publish(address, view_of(device));
}

void Quarantine::note_health(const std::vector<numa::DeviceHealth>& health) {
  std::vector<numa::Allocation> held;
  for (const auto& device : health) {
    if (device.present) continue;
    if (std::find(kPlacedRoles.begin(), kPlacedRoles.end(), device.role) == kPlacedRoles.end()) continue;
    if (held.empty()) held = ledger_.holdings().held;
    add(device.address, "health",
        "gone from the bus: its sysfs directory is missing (surprise removal, a link down, or its VFs disabled)",
        holder_of(held, device.address));
  }
}

Result<QuarantineView> Quarantine::clear(const PciAddress& address, const std::string& principal) {
  state::QuarantinedDevice cleared;
  {
    std::lock_guard lock(mutex_);
    const auto it = std::find_if(devices_.begin(), devices_.end(),
                                 [&](const state::QuarantinedDevice& d) { return d.address == address; });
    if (it == devices_.end())
      return Error{ErrorCode::not_found, "device " + address.to_string() + " is not quarantined"};
    auto rest = devices_;
    rest.erase(rest.begin() + (it - devices_.begin()));
    HA_TRY_STATUS(state::write_quarantine(file_, rest));
    cleared = *it;
    devices_ = std::move(rest);
    tell_ledger_locked();
  }
  log(LogLevel::warning, "quarantine: " + address.to_string() + " cleared by " +
                             (principal.empty() ? std::string("an unnamed caller") : principal) +
                             ", back in placement (quarantined after " + account(cleared) + ")");
  publish(address, std::nullopt);
  return view_of(cleared);
}

std::vector<QuarantineView> Quarantine::list() const {
  std::lock_guard lock(mutex_);
  std::vector<QuarantineView> out;
  for (const auto& device : devices_) out.push_back(view_of(device));
  return out;
}

void Quarantine::tell_ledger_locked() {
  std::map<PciAddress, std::string> reasons;
  for (const auto& device : devices_) reasons.emplace(device.address, placement_reason(device));
  ledger_.set_quarantined(std::move(reasons));
}

void Quarantine::publish(const PciAddress& address, const std::optional<QuarantineView>& entry) {
  ServiceEvent event;
  event.kind = ServiceEvent::Kind::quarantine;
  event.vm = entry ? entry->vm : "";
  event.devices = {address};
  event.quarantine = entry;
  events_.publish(event);
}

}  // namespace hostagent::daemon
