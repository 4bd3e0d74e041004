// common/named_file: opening a file someone named without blocking, beneath its directory where it
// has one, and reading it within a bound.
#include "hostagent/common/named_file.hpp"

#include <fcntl.h>
#include <linux/fs.h>
#include <linux/openat2.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "hostagent/common/text.hpp"

namespace hostagent {
namespace {

namespace fs = std::filesystem;

constexpr int kReadFlags = O_RDONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC;

Error refused(const std::string& what, const std::string& why) {
  Error error{ErrorCode::invalid_argument, what + " " + why};
  error.field = what;
  return error;
}

std::string kind_of(mode_t mode) {
  if (S_ISDIR(mode)) return "a directory";
  if (S_ISFIFO(mode)) return "a FIFO";
  if (S_ISCHR(mode)) return "a character device";
  if (S_ISBLK(mode)) return "a block device";
  if (S_ISSOCK(mode)) return "a socket";
  return "not a regular file";
}

// What the descriptor is, checked against the limits: the file opened, whatever its name says now.
Result<OpenedFile> checked(posix::FileDescriptor fd, fs::path path, const FileLimits& limits, const std::string& what) {
  struct stat st {};
  if (::fstat(fd.get(), &st) != 0) return errno_error(errno, "stat", path.string());
  const std::string named = text::quoted(path.string());
  if (S_ISBLK(st.st_mode) && limits.block_device) {
    std::uint64_t bytes = 0;
    if (::ioctl(fd.get(), BLKGETSIZE64, &bytes) != 0) return errno_error(errno, "find the size of", path.string());
    return OpenedFile{std::move(fd), std::move(path), bytes};
  }
  if (!S_ISREG(st.st_mode)) {
    return refused(what, named + " is " + kind_of(st.st_mode) + ", not a regular file" +
                             (limits.block_device ? " or block device" : ""));
  }
  const auto size = static_cast<std::uintmax_t>(st.st_size);
  if (limits.max_bytes != 0 && size > limits.max_bytes) {
    return refused(what, named + " is " + std::to_string(size) + " bytes, more than the " +
                             std::to_string(limits.max_bytes) + " it may hold");
  }
  return OpenedFile{std::move(fd), std::move(path), size};
}

// openat2(2) has no glibc wrapper in Debian 12 (glibc 2.36).
int openat2_beneath(int directory, const char* name) {
  open_how how{};
  how.flags = static_cast<std::uint64_t>(kReadFlags);
  how.resolve = RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS;
  return static_cast<int>(::syscall(SYS_openat2, directory, name, &how, sizeof how));
}

// Why openat2 refused, in words that say nothing of what lies outside the directory.
Error beneath_error(int err, const fs::path& directory, const fs::path& name, const std::string& what) {
  const std::string named = text::quoted(name.string());
  const std::string in = " in " + directory.string();
  switch (err) {
    case ENOENT: {
      Error missing = refused(what, named + " does not exist" + in);
      missing.code = ErrorCode::not_found;
      return missing;
    }
    case ENOTDIR:
      return refused(what, named + ": a part of it is not a directory" + in);
    case EXDEV:
      return refused(what, named + " leads outside " + directory.string() + " (a symlink out of it)");
    case ELOOP:
      return refused(what, named + " passes through too many symlinks, or a /proc magic link");
    case ENAMETOOLONG:
      return refused(what, named + " is too long a path");
    case EACCES:
    case EPERM:
      return refused(what, named + " cannot be read by hostagentd (permission denied)");
    case ENOSYS:
      return Error{ErrorCode::unsupported, what + ": this kernel has no openat2(2) (Linux 5.6 and later)"};
    default:
      return errno_error(err, "open", (directory / name).string());
  }
}

}  // namespace

fs::path without_trailing_slash(const fs::path& directory) {
  auto normal = directory.lexically_normal();
  return normal.has_filename() ? normal : normal.parent_path();
}

Result<OpenedFile> open_named_file(const fs::path& path, const FileLimits& limits, const std::string& what) {
  posix::FileDescriptor fd(::open(path.c_str(), kReadFlags));
  if (fd.get() < 0) return errno_error(errno, "open", path.string());
  return checked(std::move(fd), path, limits, what);
}

Result<OpenedFile> open_beneath(const fs::path& directory, const fs::path& name, const FileLimits& limits,
                                const std::string& what) {
  fs::path relative = name;
  if (name.is_absolute()) {
    relative = name.lexically_normal().lexically_relative(without_trailing_slash(directory));
    if (relative.empty() || *relative.begin() == "..") {
      return refused(what, text::quoted(name.string()) + " is not in " + directory.string());
    }
  }
  if (relative.empty() || relative == ".") return refused(what, "names no file in " + directory.string());
  posix::FileDescriptor dir(::open(directory.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC));
  if (dir.get() < 0) {
    const int err = errno;
    if (err == ENOENT) return beneath_error(err, directory, relative, what);
    return errno_error(err, "open directory", directory.string());
  }
  posix::FileDescriptor fd(openat2_beneath(dir.get(), relative.c_str()));
  if (fd.get() < 0 && errno == EXDEV) {
    // RESOLVE_BENEATH refuses every absolute symlink, also one that points inside the directory
    // (an operator's current.raw -> /srv/images/v2.raw). Such a name is resolved whole, and opened
    // beneath again by where it leads when that is inside: a link changed in between is refused.
    std::error_code file_ec;
    std::error_code dir_ec;
    const auto real = fs::canonical(directory / relative, file_ec);
    const auto real_dir = fs::canonical(directory, dir_ec);
    const auto inside = real.lexically_relative(real_dir);
    if (!file_ec && !dir_ec && !inside.empty() && *inside.begin() != ".." && inside != ".") {
      fd = posix::FileDescriptor(openat2_beneath(dir.get(), inside.c_str()));
    } else {
      errno = EXDEV;
    }
  }
  if (fd.get() < 0) return beneath_error(errno, directory, relative, what);
  return checked(std::move(fd), directory / relative, limits, what);
}

Result<std::string> read_opened(OpenedFile& file, std::uintmax_t max_bytes, const std::string& what) {
  std::string text;
  char buffer[65536];
  for (;;) {
    const ssize_t got = ::read(file.fd.get(), buffer, sizeof buffer);
    if (got < 0 && errno == EINTR) continue;
    if (got < 0) return errno_error(errno, "read", file.path.string());
    if (got == 0) return text;
    text.append(buffer, static_cast<std::size_t>(got));
    if (max_bytes != 0 && text.size() > max_bytes) {
      return refused(what, text::quoted(file.path.string()) + " holds more than the " + std::to_string(max_bytes) +
                               " bytes it may hold");
    }
  }
}

}  // namespace hostagent
