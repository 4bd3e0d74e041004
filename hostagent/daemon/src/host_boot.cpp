// daemon/host_boot: the power record kept current, and what a reboot starts.
#include "host_boot.hpp"

#include <algorithm>

#include "daemon_log.hpp"

namespace hostagent::daemon {
namespace {

// A VM the host's going down would have stopped: running, or paused with its memory held.
bool runs(const LedgerEntry& entry) {
  return entry.state == virt::DomainState::running || entry.state == virt::DomainState::paused;
}

std::vector<state::RunningVm> running_now(const std::vector<LedgerEntry>& entries) {
  std::vector<state::RunningVm> out;
  for (const auto& entry : entries) {
    if (entry.managed && entry.record && runs(entry)) out.push_back({entry.name, entry.record->uuid});
  }
  std::sort(out.begin(), out.end(), [](const auto& a, const auto& b) { return a.vm < b.vm; });
  return out;
}

}  // namespace

std::vector<std::string> boot_starts(const std::string& on_host_boot, const state::PowerRecord& before,
                                     const std::vector<LedgerEntry>& entries) {
  std::vector<std::string> out;
  if (on_host_boot == "stay_off") return out;
  for (const auto& entry : entries) {
    if (!entry.managed || !entry.record || !entry.defined) continue;
    const bool ran = std::any_of(before.running.begin(), before.running.end(), [&](const state::RunningVm& vm) {
      return vm.vm == entry.name && vm.uuid == entry.record->uuid;
    });
    if (on_host_boot == "start" || ran) out.push_back(entry.name);
  }
  return out;
}

Status PowerKeeper::load() {
  if (boot_id_.empty()) return ok_status();
  std::lock_guard lock(mutex_);
  HA_TRY(loaded_, state::read_power_record(file_));
  written_ = loaded_;
  return ok_status();
}

std::optional<state::PowerRecord> PowerKeeper::reboot_record() const {
  std::lock_guard lock(mutex_);
  if (!loaded_ || loaded_->boot_id == boot_id_) return std::nullopt;
  return loaded_;
}

void PowerKeeper::hold(int boot_starts) {
  std::lock_guard lock(mutex_);
  pending_ += boot_starts;
}

void PowerKeeper::boot_start_ended(const std::vector<LedgerEntry>& entries) {
  std::lock_guard lock(mutex_);
  if (pending_ > 0) --pending_;
  save_locked(entries);
}

void PowerKeeper::save(const std::vector<LedgerEntry>& entries) {
  std::lock_guard lock(mutex_);
  save_locked(entries);
}

void PowerKeeper::save_locked(const std::vector<LedgerEntry>& entries) {
  if (boot_id_.empty() || pending_ > 0) return;
  state::PowerRecord now{boot_id_, running_now(entries)};
  if (written_ == now) return;
  if (auto written = state::write_power_record(file_, now); !written.ok()) {
    log(LogLevel::warning, "the record of which VMs run could not be written (" + written.error().message +
                               "): after a host reboot, operations.on_host_boot: restore would go by an older one");
    return;
  }
  written_ = std::move(now);
}

}  // namespace hostagent::daemon
