// hostagent/state/operation_records: the operations a control plane polls, on disk, so that the
// recent history survives a restart of the daemon: one JSON file per operation, named by its id
// (unique across restarts), written when it is queued and again when it ends. After a restart, an
// operation whose file says it never ended was cut short by the stop. A VM's last creates and
// starts are kept past the operations' hour, until the VM is deleted: its start history.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

#include "hostagent/common/result.hpp"

namespace hostagent::state {

// The version of a operation record's layout, written in its "format" (json_fields::format_version).
inline constexpr int kOperationRecordFormat = 1;

// One phase of a create's or start's way to a running guest (daemon/timeline).
struct PhaseRecord {
  std::string name;      // placement, render, ..., launch, resume, kernel, up (docs/operations.md)
  std::string ended_at;  // RFC 3339, UTC
  double seconds = 0;    // from the end of the phase before (the operation's start for the first)
  std::string detail;    // what was measured with it; "" none
  bool operator==(const PhaseRecord&) const = default;
};

struct OperationRecord {
  std::string id;    // "op-RUN-N"; the file's name
  std::string kind;  // create | delete | start | stop | reboot
  std::string vm;
  std::string request_id;     // the create's; "" otherwise
  std::string template_name;  // the create's, or the started VM's; "" otherwise
  std::string state;          // queued | running | succeeded | failed
  std::string step;           // the last step run; "" before the first
  int step_number = 0;
  int step_count = 0;
  std::string error_code;    // failed: to_string(ErrorCode); "" otherwise
  std::string error;         // failed: why; "" otherwise
  std::string submitted_at;  // RFC 3339, UTC
  std::string started_at;    // "" while queued
  std::string finished_at;   // "" until it ends
  double duration_seconds = 0;
  std::vector<PhaseRecord> timeline;  // create and start; in order; absent from records before it was kept
  bool operator==(const OperationRecord&) const = default;
};

class OperationRecords {
 public:
  // Creates the directory (mode 0700) when missing.
  static Result<OperationRecords> open(const std::filesystem::path& directory);

  Status write(const OperationRecord& record);
  // Absent: ok. Without a directory fsync: a record a power loss brings back is an operation past
  // its hour, or a start of a VM that is gone, and the next start forgets it again.
  Status remove(const std::string& id);
  // Every record on disk. A file that cannot be parsed is an error naming it and the field.
  Result<std::vector<OperationRecord>> records() const;

 private:
  explicit OperationRecords(std::filesystem::path directory) : directory_(std::move(directory)) {}
  std::filesystem::path directory_;
};

// The start history as releases before this one wrote it: each VM's last starts in one JSON file,
// <name>.json, {"vm": NAME, "starts": [record, ...]} oldest first, beside the operation records
// that held the same starts. A VM's starts are now its operation records, kept until it is deleted
// (daemon/operation_tracker); these files are read once, at the first start of this release, their
// records moved into operation records and the files removed. Nothing writes them.
class StartHistory {
 public:
  static constexpr std::size_t kKept = 10;  // per VM, what the older release kept

  // Creates the directory (mode 0700) when missing.
  static Result<StartHistory> open(const std::filesystem::path& directory);

  // Oldest first; none for a VM with no file.
  Result<std::vector<OperationRecord>> starts(const std::string& vm) const;
  Status forget(const std::string& vm);  // absent: ok
  // The VMs that have a file.
  Result<std::vector<std::string>> vms() const;

 private:
  explicit StartHistory(std::filesystem::path directory) : directory_(std::move(directory)) {}
  std::filesystem::path file_of(const std::string& vm) const;
  std::filesystem::path directory_;
};

}  // namespace hostagent::state
