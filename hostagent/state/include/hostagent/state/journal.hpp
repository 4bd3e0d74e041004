// hostagent/state/journal: operations in flight, on disk. An operation writes its entry before its
// first step (and a create again at commit) and removes it when done, so after a crash the daemon
// knows every interrupted operation and the record of what it holds or was making, and can finish
// it or roll it back whole (daemon/operation says when it writes). One file per operation, replaced
// atomically (write, fsync, rename, fsync the directory): a crash leaves either the old entry or the
// new one, never half of one.
#pragma once

#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

#include "hostagent/common/result.hpp"
#include "hostagent/state/vm_record.hpp"

namespace hostagent::state {

// The version of a journal entry's layout, written in its "format" (json_fields::format_version).
inline constexpr int kJournalFormat = 1;

enum class OperationKind { create, start, stop, reboot, remove };  // remove is written "delete"
std::string_view to_string(OperationKind kind) noexcept;

// The journal's vocabulary: the steps of the operations it records, by the names it writes. Only
// create and delete are journaled; start, stop and reboot are not (libvirt's state of the domain is
// the whole truth about them). "commit" follows an operation's last step: from it on, a crash only
// finishes the operation.
namespace step {
inline constexpr std::string_view disk = "disk";
inline constexpr std::string_view seed = "seed";
inline constexpr std::string_view prepare_devices = "prepare_devices";
inline constexpr std::string_view define = "define";
inline constexpr std::string_view start = "start";
inline constexpr std::string_view destroy = "destroy";
inline constexpr std::string_view undefine = "undefine";
inline constexpr std::string_view delete_disk = "delete_disk";
inline constexpr std::string_view delete_seed = "delete_seed";
inline constexpr std::string_view release_devices = "release_devices";
inline constexpr std::string_view commit = "commit";
}  // namespace step

// A kind's steps in the order they run (commit not among them); empty for a kind not journaled.
// An entry naming any other step, or of a kind not journaled, is refused on write and on read:
// a file from another version of hostagent, or a corrupt one, stops the daemon with the file
// named rather than have it guess what the operation did.
const std::vector<std::string_view>& journaled_steps(OperationKind kind);

struct JournalEntry {
  std::string id;  // unique among entries; used as the file name: [A-Za-z0-9_.-]{1,128}
  OperationKind kind = OperationKind::create;
  std::string vm;
  std::string started_at;               // RFC 3339, UTC
  std::vector<std::string> steps_done;  // completed steps, in order, as of the last write
  std::string current_step;             // begun when last written, not known to be complete
  VmRecord record;                      // what the operation holds or is making
  bool operator==(const JournalEntry&) const = default;
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
