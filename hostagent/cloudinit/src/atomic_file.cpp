// cloudinit/atomic_file: write to a temporary file, fsync, rename, fsync the directory.
#include "atomic_file.hpp"

#include <fcntl.h>
#include <stdlib.h>  // mkostemp
#include <unistd.h>

#include <cerrno>
#include <string>

namespace hostagent::cloudinit::detail {
namespace {

// Owns a file descriptor; close() reports the error a destructor would have to drop.
class FileDescriptor {
 public:
  explicit FileDescriptor(int fd) : fd_(fd) {}
  ~FileDescriptor() {
    if (fd_ >= 0) ::close(fd_);
  }
  FileDescriptor(const FileDescriptor&) = delete;
  FileDescriptor& operator=(const FileDescriptor&) = delete;
  int get() const { return fd_; }
  // close(2) may be where a write error surfaces (NFS); the descriptor is gone either way.
  int close() {
    const int rc = ::close(fd_);
    fd_ = -1;
    return rc == 0 ? 0 : errno;
  }

 private:
  int fd_;
};

Status write_all(int fd, std::string_view data, const std::filesystem::path& path) {
  while (!data.empty()) {
    const ssize_t written = ::write(fd, data.data(), data.size());
    if (written < 0 && errno == EINTR) continue;
    if (written < 0) return errno_error(errno, "write", path.string());
    data.remove_prefix(static_cast<std::size_t>(written));
  }
  return ok_status();
}

// The data must be on disk before the rename is: otherwise a crash can leave the new name pointing
// at an empty or partial file (ext4 with delayed allocation, XFS).
Status write_durably(int fd, std::string_view contents, const std::filesystem::path& path) {
  HA_TRY_STATUS(write_all(fd, contents, path));
  if (::fsync(fd) != 0) return errno_error(errno, "fsync", path.string());
  return ok_status();
}

// rename(2) changes the directory, not the file: the directory needs its own fsync(2).
Status fsync_directory(const std::filesystem::path& directory) {
  FileDescriptor fd(::open(directory.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (fd.get() < 0) return errno_error(errno, "open directory", directory.string());
  if (::fsync(fd.get()) != 0) return errno_error(errno, "fsync directory", directory.string());
  if (const int err = fd.close(); err != 0) return errno_error(err, "close directory", directory.string());
  return ok_status();
}

}  // namespace

Status replace_file_atomically(const std::filesystem::path& path, std::string_view contents) {
  // A unique name, so that two writers of one path never share a temporary file; a leading '.' keeps
  // it out of the way of anything listing the directory.
  std::string temporary = (path.parent_path() / ("." + path.filename().string() + ".tmp-XXXXXX")).string();
  FileDescriptor fd(::mkostemp(temporary.data(), O_CLOEXEC));  // mode 0600
  if (fd.get() < 0) return errno_error(errno, "create a temporary file for", path.string());
  auto status = write_durably(fd.get(), contents, temporary);
  if (status.ok()) {
    if (const int err = fd.close(); err != 0) status = errno_error(err, "close", temporary);
  }
  // rename(2) replaces the target atomically.
  if (status.ok() && ::rename(temporary.c_str(), path.c_str()) != 0) {
    status = errno_error(errno, "rename " + temporary + " to", path.string());
  }
  if (!status.ok()) {
    ::unlink(temporary.c_str());  // best effort: the error above is the one to report
    return status;
  }
  return fsync_directory(path.parent_path());
}

}  // namespace hostagent::cloudinit::detail
