// daemon/host_boot (private): the host's reboots. Which of hostagent's VMs run is kept on disk with
// the boot of the host they run in (state/power_record). At the daemon's start a record from another
// boot means the host rebooted: every domain is off, every device it prepared is back with its
// host driver, and config.on_host_boot says which VMs start again.
#pragma once

#include <filesystem>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "hostagent/common/result.hpp"
#include "hostagent/state/power_record.hpp"
#include "ledger.hpp"

namespace hostagent::daemon {

// The VMs on_host_boot starts after a reboot, of the managed ones the ledger holds, by name:
// "restore" those the record says ran (the same VM: same UUID), "start" all, "stay_off" none.
std::vector<std::string> boot_starts(const std::string& on_host_boot, const state::PowerRecord& before,
                                     const std::vector<LedgerEntry>& entries);

class PowerKeeper {
 public:
  // boot_id "": the boot is unknown, and nothing is read, written or started.
  PowerKeeper(std::filesystem::path file, std::string boot_id) : file_(std::move(file)), boot_id_(std::move(boot_id)) {}

  // At start, before anything changes: the record an earlier run left. An unreadable record stops
  // the start (which VMs to start again must not be guessed).
  Status load();
  // The record from before, when it was written in another boot of the host; nullopt otherwise
  // (a restart of the daemon alone, a first start, an unknown boot).
  std::optional<state::PowerRecord> reboot_record() const;

  // Boot starts are in flight: until each has ended, the record stays as the last boot wrote it, so
  // a daemon killed midway starts the same VMs again at its next start.
  void hold(int boot_starts);
  // One boot start ended (either way); the last writes the record for this boot.
  void boot_start_ended(const std::vector<LedgerEntry>& entries);
  // Writes the VMs running now when that differs from what was last written. Any thread. A write
  // that fails is logged and tried again at the next change.
  void save(const std::vector<LedgerEntry>& entries);

 private:
  void save_locked(const std::vector<LedgerEntry>& entries);

  const std::filesystem::path file_;
  const std::string boot_id_;
  mutable std::mutex mutex_;
  std::optional<state::PowerRecord> loaded_;
  std::optional<state::PowerRecord> written_;
  int pending_ = 0;
};

}  // namespace hostagent::daemon
