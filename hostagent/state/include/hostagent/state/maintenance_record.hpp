// hostagent/state/maintenance_record: whether the host takes VMs, kept on disk so that a cordon
// outlives a restart and a drained host starts nothing at its next boot (docs/operations.md,
// "Maintenance"). One JSON file, every field always written:
//
//   {"format": 1, "mode": "draining", "reason": "PSU swap, INC-4411", "principal": "uid:0",
//    "since": "2026-12-07T05:00:00Z", "deadline": "2026-12-07T05:05:00Z"}
//
// `format` is this file's version: a file of a newer format is refused, naming it, and never
// rewritten; the file's absence is a host in service.
#pragma once

#include <filesystem>
#include <optional>
#include <string>

#include "hostagent/common/result.hpp"
#include "hostagent/service/vm_service.hpp"

namespace hostagent::state {

inline constexpr int kMaintenanceFormat = 1;

struct MaintenanceRecord {
  service::MaintenanceMode mode = service::MaintenanceMode::in_service;
  std::string reason;     // "" only in service
  std::string principal;  // who made the change
  std::string since;      // when (RFC 3339, UTC)
  std::string deadline;   // draining and drained: the drain's deadline; "" otherwise
  bool operator==(const MaintenanceRecord&) const = default;
};

// nullopt when the file does not exist (a host never in maintenance). A file that cannot be read,
// parsed or is of a newer format is an error naming it: whether the host may take VMs is never
// guessed.
Result<std::optional<MaintenanceRecord>> read_maintenance_record(const std::filesystem::path& file);
// Durably (common/durable_file). Refuses a record that read_maintenance_record would not read back.
Status write_maintenance_record(const std::filesystem::path& file, const MaintenanceRecord& record);

}  // namespace hostagent::state
