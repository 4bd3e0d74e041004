// systemd suite helpers: hostagentd (and other programs) run as systemd would run them, with
// chosen environment variables and passed sockets; unix sockets the tests listen or connect on.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <filesystem>
#include <functional>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace hostagent::testing {

// $HOSTAGENT_BINARY_DIR/hostagent/NAME: hostagentd, hostagentctl.
std::string hostagent_binary(const std::string& name);

// The tool on PATH; when missing, a visible skip naming the Debian package, or, under
// HOSTAGENT_REQUIRE_LIBVIRTD=1 (CI, where scripts/install-deps.sh installs it), a failure.
std::optional<std::filesystem::path> program_or_skip(const std::string& name, const std::string& package);

// The value an environment variable takes in the child to be its own pid (LISTEN_PID, WATCHDOG_PID).
inline constexpr const char* kChildPid = "$PID";

// Written with designated initializers; {} keeps GCC's -Wmissing-field-initializers quiet.
struct ChildOptions {
  std::vector<std::string> argv{};                         // argv[0] an absolute path
  std::vector<std::pair<std::string, std::string>> env{};  // set (or replaced) in the child
  std::vector<std::string> unset{};                        // removed from the child's environment
  std::filesystem::path log{};                             // stdout and stderr
  int listen_fd = -1;  // passed as fd 3 with LISTEN_FDS=1 and LISTEN_PID=the child (sd_listen_fds(3))
};

// A child process, SIGKILLed and reaped if still running when this goes.
class Child {
 public:
  explicit Child(const ChildOptions& options);
  ~Child();
  Child(const Child&) = delete;
  Child& operator=(const Child&) = delete;

  pid_t pid() const { return pid_; }
  // The exit status (128+signal when killed) once it has ended; nullopt while it runs.
  std::optional<int> poll();
  // Waits up to `limit` for it to end; nullopt when it has not.
  std::optional<int> wait(std::chrono::seconds limit);
  void signal(int number) const;

 private:
  pid_t pid_ = -1;
  std::optional<int> status_;
};

// An AF_UNIX datagram socket bound at `path`, as systemd's notification socket is.
class NotifySocket {
 public:
  explicit NotifySocket(const std::filesystem::path& path);
  ~NotifySocket();
  NotifySocket(const NotifySocket&) = delete;
  NotifySocket& operator=(const NotifySocket&) = delete;
  // The next datagram, or nullopt when none arrives within `limit`.
  std::optional<std::string> receive(std::chrono::milliseconds limit);

 private:
  int fd_ = -1;
};

// Sets (or, with nullopt, removes) an environment variable of this process until destroyed.
class ScopedEnv {
 public:
  ScopedEnv(std::string name, const std::optional<std::string>& value);
  ~ScopedEnv();
  ScopedEnv(const ScopedEnv&) = delete;
  ScopedEnv& operator=(const ScopedEnv&) = delete;

 private:
  std::string name_;
  std::optional<std::string> saved_;
};

// A listening AF_UNIX stream socket at `path` (what systemd makes for ListenStream=); -1 on failure.
int listen_unix(const std::filesystem::path& path);
// Whether a connection to the unix socket at `path` is accepted by the kernel (someone listens).
bool can_connect(const std::filesystem::path& path);
// "GET target" over HTTP/1.1 on the unix socket; the whole response, or "" when there is none within `limit`.
std::string http_get(const std::filesystem::path& socket, const std::string& target, std::chrono::seconds limit);
// Polls `done` every 100 ms while `child` runs, for two minutes at most (a loaded machine starts
// hostagentd slowly); whether it came true.
bool wait_while_running(Child& child, const std::function<bool()>& done);
// The same for any method, with an empty body (Content-Length: 0).
std::string http_request(const std::filesystem::path& socket, const std::string& method, const std::string& target,
                         std::chrono::seconds limit);

}  // namespace hostagent::testing
