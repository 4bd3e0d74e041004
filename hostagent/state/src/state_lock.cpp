// state/state_lock: flock on the state directory's lock file, the holder written in it.
#include "hostagent/state/state_lock.hpp"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <cerrno>
#include <filesystem>
#include <utility>

#include "hostagent/common/text.hpp"

namespace hostagent::state {
namespace {

constexpr std::size_t kHolderLimit = 512;  // what a refusal quotes of the file: pid and a line

// What the holder wrote, read through the descriptor the refused process already has open.
std::string holder_of(int fd) {
  std::string text(kHolderLimit, '\0');
  const ssize_t got = ::pread(fd, text.data(), text.size(), 0);
  text.resize(got > 0 ? static_cast<std::size_t>(got) : 0);
  while (!text.empty() && (text.back() == '\n' || text.back() == ' ')) text.pop_back();
  return text.empty() ? std::string("it has not yet written its pid") : "pid and task: " + text::quoted(text);
}

}  // namespace

Result<StateLock> StateLock::take(const std::filesystem::path& directory, const std::string& what) {
  // Made as the stores below it would make it (their own directories are private): not 0700
  // itself, since QEMU, as libvirt's user, opens the seeds under it (STATE_DIR/seeds).
  std::error_code made;
  std::filesystem::create_directories(directory, made);
  if (made) return Error{ErrorCode::io_error, "create state directory " + directory.string() + ": " + made.message()};
  auto path = directory / "hostagentd.lock";
  const int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW | O_NOCTTY, 0600);
  if (fd < 0) return errno_error(errno, "open", path.string());
  if (::flock(fd, LOCK_EX | LOCK_NB) != 0) {
    const int err = errno;
    if (err != EWOULDBLOCK) {
      ::close(fd);
      return errno_error(err, "lock", path.string());
    }
    const std::string holder = holder_of(fd);
    ::close(fd);
    return Error{ErrorCode::conflict,
                 "state directory " + directory.string() + " is in use by another hostagentd (" + holder +
                     "; it holds " + path.string() +
                     "): two processes that reconcile one state directory undo each other's work. Stop that one "
                     "first, or drive it through its API with hostagentctl"};
  }
  StateLock lock(fd, std::move(path));
  const std::string holder = std::to_string(::getpid()) + " " + what + "\n";
  if (::ftruncate(fd, 0) != 0 || ::pwrite(fd, holder.data(), holder.size(), 0) != static_cast<ssize_t>(holder.size())) {
    return errno_error(errno, "write", lock.path_.string());
  }
  return lock;
}

StateLock::StateLock(StateLock&& other) noexcept : fd_(std::exchange(other.fd_, -1)), path_(std::move(other.path_)) {}

StateLock& StateLock::operator=(StateLock&& other) noexcept {
  if (this != &other) {
    if (fd_ >= 0) ::close(fd_);
    fd_ = std::exchange(other.fd_, -1);
    path_ = std::move(other.path_);
  }
  return *this;
}

StateLock::~StateLock() {
  if (fd_ >= 0) ::close(fd_);
}

}  // namespace hostagent::state
