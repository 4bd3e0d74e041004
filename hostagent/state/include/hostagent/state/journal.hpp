// hostagent/state/journal: operations in flight, on disk. An operation writes its entry before each
// step it takes and removes it when done, so after a crash the daemon knows, for every interrupted
// operation, which steps may have left effects, and can finish or roll back each one. One file per
// operation, replaced atomically (write, fsync, rename, fsync the directory): a crash leaves either
// the old entry or the new one, never half of one.
#pragma once

#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

#include "hostagent/common/result.hpp"
#include "hostagent/state/vm_record.hpp"

namespace hostagent::state {

enum class OperationKind { create, start, stop, reboot, remove };  // remove is written "delete"
std::string_view to_string(OperationKind kind) noexcept;

struct JournalEntry {
  std::string id;  // unique among entries; used as the file name: [A-Za-z0-9_.-]{1,128}
  OperationKind kind = OperationKind::create;
  std::string vm;
  std::string started_at;               // RFC 3339, UTC
  std::vector<std::string> steps_done;  // completed steps, in order
  std::string current_step;             // begun, not known to be complete: may have partial effects
  VmRecord record;                      // what the operation holds or is making
};

class Journal {
 public:
  // Creates the directory (mode 0700) when missing.
  static Result<Journal> open(const std::filesystem::path& directory);

  Status write(const JournalEntry& entry);
  Status remove(const std::string& id);  // absent: ok
  // Every entry on disk, oldest first. A file that cannot be parsed is an error naming it: the
  // daemon must not guess what an operation it cannot read had done.
  Result<std::vector<JournalEntry>> entries() const;

  const std::filesystem::path& directory() const { return directory_; }

 private:
  explicit Journal(std::filesystem::path directory) : directory_(std::move(directory)) {}
  std::filesystem::path directory_;
};

}  // namespace hostagent::state
