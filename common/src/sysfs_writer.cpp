// common/sysfs_writer: writing kernel attributes under a root.
#include "hostagent/common/sysfs_writer.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "hostagent/common/posix_file.hpp"
#include "hostagent/common/text.hpp"

namespace hostagent {
namespace {

class FileSysfsWriter final : public SysfsWriter {
 public:
  explicit FileSysfsWriter(std::filesystem::path root) : root_(std::move(root)) {}

  Status write(const std::string& kernel_path, std::string_view value) override {
    const std::filesystem::path file = root_ / std::filesystem::path(kernel_path).relative_path();
    // No O_CREAT: a missing attribute means the driver or device is not there, never "make one".
    posix::FileDescriptor fd(::open(file.c_str(), O_WRONLY | O_CLOEXEC));
    if (fd.get() < 0) return sysfs_write_error(errno, file, value);
    // One write(2), not a loop: a short write to a sysfs attribute is the kernel taking the whole
    // store() and returning its length; a partial retry would be a second, different request.
    const ssize_t written = ::write(fd.get(), value.data(), value.size());
    if (written < 0) return sysfs_write_error(errno, file, value);
    if (const int err = fd.close(); err != 0) return sysfs_write_error(err, file, value);
    return ok_status();
  }

  const std::filesystem::path& root() const override { return root_; }

 private:
  std::filesystem::path root_;
};

ErrorCode code_of(int err) {
  switch (err) {
    case ENOENT:
    case ENODEV:
    case ENOTDIR:
      return ErrorCode::not_found;
    case EBUSY:
    case EEXIST:
      return ErrorCode::conflict;
    case EINVAL:
    case ERANGE:
      return ErrorCode::invalid_argument;
    default:
      return ErrorCode::io_error;
  }
}

// Without the newline a sysfs write usually ends with: it is how the attribute is written, not
// what was asked for.
std::string_view trimmed(std::string_view value) {
  while (!value.empty() && (value.back() == '\n' || value.back() == ' ')) value.remove_suffix(1);
  return value;
}

}  // namespace

std::unique_ptr<SysfsWriter> make_sysfs_writer(std::filesystem::path root) {
  return std::make_unique<FileSysfsWriter>(std::move(root));
}

Error sysfs_write_error(int err, const std::filesystem::path& file, std::string_view value) {
  return Error{code_of(err),
               "write " + text::quoted(trimmed(value), 64) + " to " + file.string() + ": " + std::strerror(err)};
}

}  // namespace hostagent
