// common/durable_file: atomic, durable replacement and removal of small files.
#include "hostagent/common/durable_file.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>

#include "hostagent/common/posix_file.hpp"

namespace hostagent::durable {
namespace {

using posix::FileDescriptor;

// Whatever errno says, a durable file failing is the environment failing us: never "not found"
// for the caller, even on ENOENT (the daemon's own directory vanished).
Error io_failure(int err, const std::string& operation, const std::filesystem::path& path) {
  return Error{ErrorCode::io_error, errno_error(err, operation, path.string()).message};
}

Status fsync_directory(const std::filesystem::path& directory) {
  auto synced = posix::fsync_directory(directory);
  if (!synced.ok()) return Error{ErrorCode::io_error, synced.error().message};
  return ok_status();
}

Status write_durably(const std::filesystem::path& path, std::string_view contents) {
  // 0600: journal entries hold SSH keys and request ids. O_NOFOLLOW: never write through a
  // planted link.
  FileDescriptor fd(::open(path.c_str(), O_CREAT | O_TRUNC | O_WRONLY | O_CLOEXEC | O_NOFOLLOW, 0600));
  if (fd.get() < 0) return io_failure(errno, "create", path);
  if (const int err = posix::write_all(fd.get(), contents); err != 0) return io_failure(err, "write", path);
  // The data must reach the disk before the rename does. Otherwise a crash can leave the rename
  // durable and the data not: a file that is empty or partial (ext4 with delayed allocation, XFS).
  if (::fsync(fd.get()) != 0) return io_failure(errno, "fsync", path);
  if (const int err = fd.close(); err != 0) return io_failure(err, "close", path);
  return ok_status();
}

}  // namespace

std::filesystem::path temporary_of(const std::filesystem::path& path) {
  auto temporary = path;
  temporary += kTemporarySuffix;
  return temporary;
}

Status replace_file(const std::filesystem::path& path, std::string_view contents) {
  const auto temporary = temporary_of(path);
  auto status = write_durably(temporary, contents);
  // rename(2) replaces the target atomically: a reader, or a crash, sees the old file or the new.
  if (status.ok() && ::rename(temporary.c_str(), path.c_str()) != 0) {
    status = io_failure(errno, "rename " + temporary.string() + " to", path);
  }
  if (!status.ok()) {
    ::unlink(temporary.c_str());  // best effort: the error above is the one to report
    return status;
  }
  return fsync_directory(path.parent_path());
}

Status remove_file(const std::filesystem::path& path) {
  if (::unlink(path.c_str()) != 0) {
    if (errno == ENOENT) return ok_status();
    return io_failure(errno, "remove", path);
  }
  // rename(2) and unlink(2) change the directory: a removal that comes back after a crash would,
  // for a journal entry, have its operation recovered a second time.
  return fsync_directory(path.parent_path());
}

Status discard_file(const std::filesystem::path& path) {
  if (::unlink(path.c_str()) != 0 && errno != ENOENT) return io_failure(errno, "remove", path);
  return ok_status();
}

Status append_file(const std::filesystem::path& path, std::string_view contents) {
  std::error_code ec;
  const bool created = !std::filesystem::exists(std::filesystem::symlink_status(path, ec));
  FileDescriptor fd(::open(path.c_str(), O_CREAT | O_APPEND | O_WRONLY | O_CLOEXEC | O_NOFOLLOW, 0600));
  if (fd.get() < 0) return io_failure(errno, "open for appending", path);
  if (const int err = posix::write_all(fd.get(), contents); err != 0) return io_failure(err, "append to", path);
  if (::fsync(fd.get()) != 0) return io_failure(errno, "fsync", path);
  if (const int err = fd.close(); err != 0) return io_failure(err, "close", path);
  return created ? fsync_directory(path.parent_path()) : ok_status();
}

Result<std::size_t> truncate_torn_tail(const std::filesystem::path& path, std::size_t max_bytes) {
  std::error_code ec;
  if (!std::filesystem::exists(std::filesystem::symlink_status(path, ec))) return std::size_t{0};
  HA_TRY(const auto text, read_file(path, max_bytes));
  if (text.empty() || text.back() == '\n') return std::size_t{0};
  const auto last_newline = text.rfind('\n');
  const std::size_t keep = last_newline == std::string::npos ? 0 : last_newline + 1;
  FileDescriptor fd(::open(path.c_str(), O_WRONLY | O_CLOEXEC | O_NOFOLLOW));
  if (fd.get() < 0) return io_failure(errno, "open", path);
  if (::ftruncate(fd.get(), static_cast<off_t>(keep)) != 0) return io_failure(errno, "truncate", path);
  if (::fsync(fd.get()) != 0) return io_failure(errno, "fsync", path);
  if (const int err = fd.close(); err != 0) return io_failure(err, "close", path);
  return text.size() - keep;
}

Result<std::string> read_file(const std::filesystem::path& path, std::size_t max_bytes) {
  FileDescriptor fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW));
  if (fd.get() < 0) return io_failure(errno, "open", path);
  std::string out;
  char buffer[16384];
  for (;;) {
    const ssize_t got = ::read(fd.get(), buffer, sizeof buffer);
    if (got < 0 && errno == EINTR) continue;
    if (got < 0) return io_failure(errno, "read", path);
    if (got == 0) break;
    out.append(buffer, static_cast<std::size_t>(got));
    if (out.size() > max_bytes) {
      return Error{ErrorCode::parse_error,
                   path.string() + ": larger than " + std::to_string(max_bytes) + " bytes, not a file hostagent wrote"};
    }
  }
  return out;
}

}  // namespace hostagent::durable
