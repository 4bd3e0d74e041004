// hostagent/state/power_record: which of hostagent's VMs were running, and in which boot of the
// host, kept on disk so that after the host reboots the daemon knows what was running when it went
// down (libvirt's own state of a running domain lives in /run and goes with the boot). One JSON file:
//
//   {"boot_id": "4f0e...", "running": [{"vm": "train-0", "uuid": "7c1e..."}]}
#pragma once

#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "hostagent/common/result.hpp"

namespace hostagent::state {

// The version of a power record's layout, written in its "format" (json_fields::format_version).
inline constexpr int kPowerRecordFormat = 1;

struct RunningVm {
  std::string vm;
  std::string uuid;  // a same-named VM made since is another VM: it is not started for this one
  bool operator==(const RunningVm&) const = default;
};

struct PowerRecord {
  std::string boot_id;  // the kernel's /proc/sys/kernel/random/boot_id when the record was written
  std::vector<RunningVm> running;
  bool operator==(const PowerRecord&) const = default;
};

// nullopt when the file does not exist (a first start). A file that cannot be read or parsed is an
// error naming it and the field: which VMs to start again must not be guessed.
Result<std::optional<PowerRecord>> read_power_record(const std::filesystem::path& file);
// Durably (common/durable_file). Refuses a record that read_power_record would not read back.
Status write_power_record(const std::filesystem::path& file, const PowerRecord& record);

}  // namespace hostagent::state
