// state/state_lock: one process at a time owns a state directory. Everything under it (the
// journal, the records, the device states, a simulated host's sysfs tree) assumes one writer: a
// second process that reconciles the same directory rolls back the first one's creates in flight,
// deletes its journal entries and frees what it holds. So every process that reconciles (hostagentd
// serving, and `hostagentd --exec`, which reconciles before its first command) takes this lock
// before it reads or writes anything there, and keeps it for its life.
//
// flock(2) on STATE_DIR/hostagentd.lock: the lock belongs to the open file description, so the
// kernel drops it when the holder exits however it exits (SIGKILL included) and a stale lock
// cannot outlive its process; O_CLOEXEC keeps it from leaking into the programs the daemon runs
// (a scrubber), which would otherwise hold it past the daemon. The file carries the holder's pid
// and what it is doing, so a refusal names who to stop. The file itself is never removed: removing
// it would let a third process lock a new inode while the second still holds the old one.
#pragma once

#include <filesystem>
#include <string>

#include "hostagent/common/result.hpp"

namespace hostagent::state {

class StateLock {
 public:
  // Takes the lock, making the directory when missing (not private: QEMU opens the seeds under
  // it), and writes "PID WHAT" in the
  // file. conflict when another process holds it: the message names the directory, the holder's pid
  // and what it said it was doing, and what to do instead.
  static Result<StateLock> take(const std::filesystem::path& directory, const std::string& what);

  StateLock(StateLock&& other) noexcept;
  StateLock& operator=(StateLock&& other) noexcept;
  StateLock(const StateLock&) = delete;
  StateLock& operator=(const StateLock&) = delete;
  ~StateLock();

  const std::filesystem::path& path() const { return path_; }

 private:
  StateLock(int fd, std::filesystem::path path) : fd_(fd), path_(std::move(path)) {}
  int fd_ = -1;
  std::filesystem::path path_;
};

}  // namespace hostagent::state
