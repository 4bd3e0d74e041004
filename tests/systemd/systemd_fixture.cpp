// systemd suite helpers: child processes with a prepared environment, unix sockets.
#include "systemd_fixture.hpp"

#include <doctest/doctest.h>

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <stdexcept>
#include <thread>

#include "test_support.hpp"

extern char** environ;

namespace hostagent::testing {
namespace {

namespace fs = std::filesystem;

sockaddr_un unix_address(const fs::path& path) {
  sockaddr_un address{};
  address.sun_family = AF_UNIX;
  if (path.string().size() >= sizeof(address.sun_path))
    throw std::runtime_error("socket path too long: " + path.string());
  std::strncpy(address.sun_path, path.c_str(), sizeof(address.sun_path) - 1);
  return address;
}

// The child's environment, built before fork(): after it only async-signal-safe calls are allowed
// (the test process may have threads). Entries whose value is kChildPid get the pid written in
// place, so each keeps room for it.
struct Environment {
  std::vector<std::string> entries;
  std::vector<std::size_t> pid_entries;

  explicit Environment(const ChildOptions& options) {
    std::vector<std::pair<std::string, std::string>> env = options.env;
    if (options.listen_fd >= 0) {
      env.emplace_back("LISTEN_FDS", "1");
      env.emplace_back("LISTEN_PID", kChildPid);
    }
    const auto replaced = [&](const std::string& entry) {
      const std::string name = entry.substr(0, entry.find('='));
      for (const auto& [key, value] : env) {
        if (key == name) return true;
      }
      for (const auto& key : options.unset) {
        if (key == name) return true;
      }
      return false;
    };
    for (char** e = environ; *e != nullptr; ++e) {
      if (!replaced(*e)) entries.emplace_back(*e);
    }
    for (const auto& [key, value] : env) {
      if (value == kChildPid) {
        pid_entries.push_back(entries.size());
        entries.push_back(key + "=" + std::string(20, '\0'));
      } else {
        entries.push_back(key + "=" + value);
      }
    }
  }
};

// Async-signal-safe: writes the decimal pid after the '=' of entry.
void write_pid(std::string& entry, pid_t pid) {
  char digits[20];
  int count = 0;
  auto value = static_cast<unsigned long>(pid);
  do {
    digits[count++] = static_cast<char>('0' + value % 10);
    value /= 10;
  } while (value != 0);
  char* out = entry.data() + entry.find('=') + 1;
  for (int i = count - 1; i >= 0; --i) *out++ = digits[i];
  *out = '\0';
}

int exit_status(int status) {
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

}  // namespace

std::optional<fs::path> program_or_skip(const std::string& name, const std::string& package) {
  if (auto found = find_program(name)) return found;
  const std::string message = name + " is not installed (Debian package " + package + ")";
  const char* require = std::getenv("HOSTAGENT_REQUIRE_LIBVIRTD");
  if (require != nullptr && std::string(require) == "1") {
    FAIL_CHECK(message);
  } else {
    skip(message);
  }
  return std::nullopt;
}

std::string hostagent_binary(const std::string& name) {
  const char* dir = std::getenv("HOSTAGENT_BINARY_DIR");
  if (dir == nullptr) throw std::runtime_error("HOSTAGENT_BINARY_DIR is set by CTest");
  return (fs::path(dir) / "hostagent" / name).string();
}

Child::Child(const ChildOptions& options) {
  Environment environment(options);
  std::vector<char*> argv;
  argv.reserve(options.argv.size() + 1);
  for (const auto& arg : options.argv) argv.push_back(const_cast<char*>(arg.c_str()));
  argv.push_back(nullptr);
  std::vector<char*> envp;
  envp.reserve(environment.entries.size() + 1);
  for (auto& entry : environment.entries) envp.push_back(entry.data());
  envp.push_back(nullptr);
  const int log = ::open(options.log.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (log < 0) throw std::runtime_error("cannot open " + options.log.string());
  pid_ = fork();
  if (pid_ < 0) throw std::runtime_error("fork failed");
  if (pid_ == 0) {
    // The entries' buffers do not move: writing the pid in place changes no size.
    for (const auto index : environment.pid_entries) write_pid(environment.entries[index], getpid());
    dup2(log, STDOUT_FILENO);
    dup2(log, STDERR_FILENO);
    if (options.listen_fd >= 0) {
      // dup2 clears FD_CLOEXEC on the copy; when it already is fd 3, clear it by hand.
      if (options.listen_fd == 3) {
        fcntl(3, F_SETFD, 0);
      } else {
        dup2(options.listen_fd, 3);
      }
    }
    execve(argv[0], argv.data(), envp.data());
    _exit(127);
  }
  ::close(log);
}

Child::~Child() {
  if (!poll()) {
    ::kill(pid_, SIGKILL);
    int status = 0;
    waitpid(pid_, &status, 0);
  }
}

std::optional<int> Child::poll() {
  if (status_) return status_;
  int status = 0;
  if (waitpid(pid_, &status, WNOHANG) == pid_) status_ = exit_status(status);
  return status_;
}

std::optional<int> Child::wait(std::chrono::seconds limit) {
  const auto deadline = std::chrono::steady_clock::now() + limit;
  while (!poll() && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return status_;
}

void Child::signal(int number) const {
  ::kill(pid_, number);
}

NotifySocket::NotifySocket(const fs::path& path) {
  fd_ = ::socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  const auto address = unix_address(path);
  if (fd_ < 0 || ::bind(fd_, reinterpret_cast<const sockaddr*>(&address), sizeof(address)) != 0) {
    throw std::runtime_error("cannot bind " + path.string() + ": " + std::strerror(errno));
  }
}

NotifySocket::~NotifySocket() {
  ::close(fd_);
}

std::optional<std::string> NotifySocket::receive(std::chrono::milliseconds limit) {
  pollfd waiting{fd_, POLLIN, 0};
  if (::poll(&waiting, 1, static_cast<int>(limit.count())) <= 0) return std::nullopt;
  char buffer[4096];
  const ssize_t size = ::recv(fd_, buffer, sizeof(buffer), 0);
  if (size < 0) return std::nullopt;
  return std::string(buffer, static_cast<std::size_t>(size));
}

ScopedEnv::ScopedEnv(std::string name, const std::optional<std::string>& value) : name_(std::move(name)) {
  if (const char* before = std::getenv(name_.c_str())) saved_ = before;
  if (value) {
    ::setenv(name_.c_str(), value->c_str(), 1);
  } else {
    ::unsetenv(name_.c_str());
  }
}

ScopedEnv::~ScopedEnv() {
  if (saved_) {
    ::setenv(name_.c_str(), saved_->c_str(), 1);
  } else {
    ::unsetenv(name_.c_str());
  }
}

int listen_unix(const fs::path& path) {
  const int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  const auto address = unix_address(path);
  if (fd < 0 || ::bind(fd, reinterpret_cast<const sockaddr*>(&address), sizeof(address)) != 0 ||
      ::listen(fd, 16) != 0) {
    if (fd >= 0) ::close(fd);
    return -1;
  }
  return fd;
}

namespace {

int connect_unix(const fs::path& path) {
  const int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  const auto address = unix_address(path);
  if (fd >= 0 && ::connect(fd, reinterpret_cast<const sockaddr*>(&address), sizeof(address)) == 0) return fd;
  const int err = errno;
  if (fd >= 0) ::close(fd);
  errno = err;  // connect's, for a caller that retries a refusal
  return -1;
}

}  // namespace

bool can_connect(const fs::path& path) {
  const int fd = connect_unix(path);
  if (fd < 0) return false;
  ::close(fd);
  return true;
}

bool wait_while_running(Child& child, const std::function<bool()>& done) {
  for (int i = 0; i < 1200 && !child.poll(); ++i) {
    if (done()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  return done();
}

std::string http_get(const fs::path& socket, const std::string& target, std::chrono::seconds limit) {
  return http_request(socket, "GET", target, limit);
}

std::string http_request(const fs::path& socket, const std::string& method, const std::string& target,
                         std::chrono::seconds limit) {
  const auto deadline = std::chrono::steady_clock::now() + limit;
  // bind(2) makes the socket's file before listen(2) opens it: a connect between the two is refused
  // (ECONNREFUSED), and a listener seen by its file alone (systemd-socket-activate's) may be there.
  int fd = connect_unix(socket);
  while (fd < 0 && errno == ECONNREFUSED && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    fd = connect_unix(socket);
  }
  if (fd < 0) return "";
  const std::string request =
      method + " " + target + " HTTP/1.1\r\nHost: hostagent\r\nContent-Length: 0\r\nConnection: close\r\n\r\n";
  if (::send(fd, request.data(), request.size(), MSG_NOSIGNAL) != static_cast<ssize_t>(request.size())) {
    ::close(fd);
    return "";
  }
  std::string response;
  while (std::chrono::steady_clock::now() < deadline) {
    pollfd waiting{fd, POLLIN, 0};
    if (::poll(&waiting, 1, 100) <= 0) continue;
    char buffer[4096];
    const ssize_t size = ::recv(fd, buffer, sizeof(buffer), 0);
    if (size <= 0) break;
    response.append(buffer, static_cast<std::size_t>(size));
  }
  ::close(fd);
  return response;
}

}  // namespace hostagent::testing
