// common/posix_file: the POSIX file primitives that durable writes (common/durable_file) and the
// audit log are made of. Callers keep their own policy for names and error codes.
#pragma once

#include <filesystem>
#include <string_view>

#include "hostagent/common/result.hpp"

namespace hostagent::posix {

// Owns a file descriptor; close() reports the error that a destructor would have to drop.
class FileDescriptor {
 public:
  explicit FileDescriptor(int fd) : fd_(fd) {}
  ~FileDescriptor();
  FileDescriptor(const FileDescriptor&) = delete;
  FileDescriptor& operator=(const FileDescriptor&) = delete;
  FileDescriptor(FileDescriptor&& other) noexcept : fd_(other.fd_) { other.fd_ = -1; }
  FileDescriptor& operator=(FileDescriptor&& other) noexcept;
  int get() const { return fd_; }
  // close(2): on NFS and some other filesystems a write error may surface only here. The
  // descriptor is gone either way (Linux frees it even on EINTR), so it is never retried.
  // Returns 0, or the errno.
  int close();

 private:
  int fd_;
};

// Writes all of data, retrying after EINTR and short writes. Returns 0, or the errno.
int write_all(int fd, std::string_view data);

// rename(2) and unlink(2) change the directory, not the file: fsync(2) on the file does not make
// them durable ("an explicit fsync() on a file descriptor for the directory is also needed").
Status fsync_directory(const std::filesystem::path& directory);

}  // namespace hostagent::posix
