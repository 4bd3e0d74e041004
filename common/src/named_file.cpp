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

#include <atomic>
#include <cerrno>
#include <climits>
#include <cstring>
#include <vector>

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

// openat2 beneath `dir`. RESOLVE_BENEATH refuses every absolute symlink, also one that points
// inside the directory (an operator's current.raw -> /srv/images/v2.raw). Such a name is resolved
// whole, and opened beneath again by where it leads when that is inside: a link changed in between
// is refused. The errno of a refusal is left in errno.
posix::FileDescriptor openat2_inside(int dir, const fs::path& directory, const fs::path& relative) {
  posix::FileDescriptor fd(openat2_beneath(dir, relative.c_str()));
  if (fd.get() >= 0 || errno != EXDEV) return fd;
  std::error_code file_ec;
  std::error_code dir_ec;
  const auto real = fs::canonical(directory / relative, file_ec);
  const auto real_dir = fs::canonical(directory, dir_ec);
  const auto inside = real.lexically_relative(real_dir);
  if (file_ec || dir_ec || inside.empty() || *inside.begin() == ".." || inside == ".") {
    errno = EXDEV;
    return fd;
  }
  return posix::FileDescriptor(openat2_beneath(dir, inside.c_str()));
}

// Whether this process may call openat2: not where the kernel predates it (ENOSYS), nor where a
// seccomp filter refuses it as unknown: systemd-nspawn answered ENOSYS in the package test, and a
// filter set to EPERM (as hostagent.service's SystemCallErrorNumber=) answers that. Learned once.
std::atomic<bool> openat2_refused{false};

bool refused_by_filter(int err) {
  return err == ENOSYS || err == EPERM;
}

// The user-space walk beneath `root` (an O_PATH descriptor of `root_path`): one component at a time,
// each opened O_PATH|O_NOFOLLOW relative to the one before, so the kernel follows no symlink. A
// symlink's text is read from its own descriptor (readlinkat(2) with an empty path on an O_PATH
// descriptor, Linux 2.6.39) and walked in its place; ".." pops the walk's own stack and never asks
// the kernel, so a directory moved away meanwhile cannot lead out. The same refusals as openat2
// with RESOLVE_BENEATH: ".." above the root and a link that leaves it are EXDEV, 40 links ELOOP.
// An absolute link is followed where it leads lexically inside the root, as configured or resolved.
class BeneathWalk {
 public:
  BeneathWalk(int root, const fs::path& root_path) : root_(root) {
    roots_.push_back(without_trailing_slash(root_path));
    std::error_code ec;
    auto real = fs::canonical(root_path, ec);
    if (!ec) roots_.push_back(std::move(real));
  }

  // The file opened for reading; an invalid descriptor where it is refused (why: error()).
  posix::FileDescriptor open(const fs::path& name) {
    push_parts(name);
    while (!pending_.empty()) {
      const std::string part = std::move(pending_.back());
      pending_.pop_back();
      if (part.empty() || part == ".") continue;
      const Step step = part == ".." ? up() : enter(part);
      if (step == Step::failed) {
        error_ = errno;
        return posix::FileDescriptor(-1);
      }
      if (step == Step::opened) return std::move(opened_);
    }
    // The name was the root itself, or led back to it: opened, to be refused as a directory.
    posix::FileDescriptor itself(::openat(at(), ".", kReadFlags));
    error_ = errno;
    return itself;
  }
  // The errno of a refused walk.
  int error() const { return error_; }

 private:
  enum class Step { next, opened, failed };
  static constexpr int kMaxLinks = 40;  // the kernel's own limit (MAXSYMLINKS, path_resolution(7))

  static Step fail(int err) {
    errno = err;
    return Step::failed;
  }
  int at() const { return directories_.empty() ? root_ : directories_.back().get(); }
  void push_parts(const fs::path& path) {
    std::vector<std::string> parts;
    for (const auto& part : path.relative_path()) parts.push_back(part.string());
    pending_.insert(pending_.end(), parts.rbegin(), parts.rend());
  }

  Step up() {
    if (directories_.empty()) return fail(EXDEV);
    directories_.pop_back();
    return Step::next;
  }

  // One component: a link replaced by its text, a directory entered, the last one opened.
  Step enter(const std::string& part) {
    posix::FileDescriptor found(::openat(at(), part.c_str(), O_PATH | O_NOFOLLOW | O_CLOEXEC));
    if (found.get() < 0) return Step::failed;
    struct stat st {};
    if (::fstat(found.get(), &st) != 0) return Step::failed;
    if (S_ISLNK(st.st_mode)) return follow(found.get());
    if (pending_.empty()) return open_last(part, st);
    if (!S_ISDIR(st.st_mode)) return fail(ENOTDIR);
    directories_.push_back(std::move(found));
    return Step::next;
  }

  Step follow(int link) {
    if (++links_ > kMaxLinks) return fail(ELOOP);
    std::string target(PATH_MAX, '\0');
    const ssize_t length = ::readlinkat(link, "", target.data(), target.size());
    if (length < 0) return Step::failed;
    target.resize(static_cast<std::size_t>(length));
    const fs::path to(target);
    if (to.is_relative()) {
      push_parts(to);
      return Step::next;
    }
    for (const auto& root : roots_) {
      const auto inside = to.lexically_normal().lexically_relative(root);
      if (inside.empty() || *inside.begin() == "..") continue;
      directories_.clear();
      push_parts(inside);
      return Step::next;
    }
    return fail(EXDEV);
  }

  // The last component, opened for reading without following a link, and proved to be the file the
  // walk found: a link swapped in between fails O_NOFOLLOW (ELOOP), another file is ESTALE.
  Step open_last(const std::string& part, const struct stat& found) {
    opened_ = posix::FileDescriptor(::openat(at(), part.c_str(), kReadFlags | O_NOFOLLOW));
    if (opened_.get() < 0) return Step::failed;
    struct stat st {};
    if (::fstat(opened_.get(), &st) != 0) return Step::failed;
    if (st.st_dev != found.st_dev || st.st_ino != found.st_ino) return fail(ESTALE);
    return Step::opened;
  }

  int root_;
  std::vector<fs::path> roots_;  // the root as configured and as resolved: an absolute link may name either
  std::vector<posix::FileDescriptor> directories_;  // entered below the root, innermost last
  std::vector<std::string> pending_;                // the components still to walk, the next one last
  posix::FileDescriptor opened_{-1};
  int links_ = 0;
  int error_ = 0;
};

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

namespace {

Result<OpenedFile> open_beneath_by(const fs::path& directory, const fs::path& name, const FileLimits& limits,
                                   const std::string& what, bool walk_only) {
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
  posix::FileDescriptor fd(-1);
  int err = 0;
  if (!walk_only && !openat2_refused.load(std::memory_order_relaxed)) {
    fd = openat2_inside(dir.get(), directory, relative);
    err = errno;
    if (fd.get() < 0 && refused_by_filter(err)) openat2_refused.store(true, std::memory_order_relaxed);
  }
  if (walk_only || openat2_refused.load(std::memory_order_relaxed)) {
    BeneathWalk walk(dir.get(), directory);
    fd = walk.open(relative);
    err = walk.error();
  }
  if (fd.get() < 0) return beneath_error(err, directory, relative, what);
  return checked(std::move(fd), directory / relative, limits, what);
}

}  // namespace

Result<OpenedFile> open_beneath(const fs::path& directory, const fs::path& name, const FileLimits& limits,
                                const std::string& what) {
  return open_beneath_by(directory, name, limits, what, false);
}

Result<OpenedFile> open_beneath_walking(const fs::path& directory, const fs::path& name, const FileLimits& limits,
                                        const std::string& what) {
  return open_beneath_by(directory, name, limits, what, true);
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
