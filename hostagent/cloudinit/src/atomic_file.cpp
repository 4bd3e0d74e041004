// cloudinit/atomic_file: write to a temporary file, fsync, rename, fsync the directory.
#include "atomic_file.hpp"

#include <fcntl.h>
#include <stdlib.h>  // mkostemp
#include <unistd.h>

#include <cerrno>
#include <string>

#include "hostagent/common/posix_file.hpp"

namespace hostagent::cloudinit::detail {
namespace {

using posix::FileDescriptor;

// The data must be on disk before the rename is: otherwise a crash can leave the new name pointing
// at an empty or partial file (ext4 with delayed allocation, XFS).
Status write_durably(int fd, std::string_view contents, const std::filesystem::path& path) {
  if (const int err = posix::write_all(fd, contents); err != 0) return errno_error(err, "write", path.string());
  if (::fsync(fd) != 0) return errno_error(errno, "fsync", path.string());
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
  return posix::fsync_directory(path.parent_path());
}

}  // namespace hostagent::cloudinit::detail
