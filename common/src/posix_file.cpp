// common/posix_file: file descriptors, whole writes, directory fsync.
#include "hostagent/common/posix_file.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>

namespace hostagent::posix {

FileDescriptor::~FileDescriptor() {
  if (fd_ >= 0) ::close(fd_);
}

FileDescriptor& FileDescriptor::operator=(FileDescriptor&& other) noexcept {
  if (this != &other) {
    if (fd_ >= 0) ::close(fd_);
    fd_ = other.fd_;
    other.fd_ = -1;
  }
  return *this;
}

int FileDescriptor::close() {
  const int rc = ::close(fd_);
  fd_ = -1;
  return rc == 0 ? 0 : errno;
}

int write_all(int fd, std::string_view data) {
  while (!data.empty()) {
    const ssize_t written = ::write(fd, data.data(), data.size());
    if (written < 0 && errno == EINTR) continue;
    if (written < 0) return errno;
    data.remove_prefix(static_cast<std::size_t>(written));
  }
  return 0;
}

Status fsync_directory(const std::filesystem::path& directory) {
  FileDescriptor fd(::open(directory.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (fd.get() < 0) return errno_error(errno, "open directory", directory.string());
  if (::fsync(fd.get()) != 0) return errno_error(errno, "fsync directory", directory.string());
  if (const int err = fd.close(); err != 0) return errno_error(err, "close directory", directory.string());
  return ok_status();
}

}  // namespace hostagent::posix
