// devices/program_run: posix_spawn, a pipe read until EOF or the limit, then the child reaped.
#include "program_run.hpp"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <cerrno>

extern char** environ;

namespace hostagent::devices::detail {
namespace {

constexpr std::size_t kKeptOutput = 2048;

struct Pipe {
  int read = -1;
  int write = -1;
  ~Pipe() {
    if (read >= 0) ::close(read);
    if (write >= 0) ::close(write);
  }
};

Result<pid_t> spawn(const std::vector<std::string>& argv, int output) {
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, STDIN_FILENO, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_adddup2(&actions, output, STDOUT_FILENO);
  posix_spawn_file_actions_adddup2(&actions, output, STDERR_FILENO);
  posix_spawnattr_t attributes;
  posix_spawnattr_init(&attributes);
  // A group of its own, so a time limit kills whatever the program started too.
  posix_spawnattr_setflags(&attributes, POSIX_SPAWN_SETPGROUP);
  posix_spawnattr_setpgroup(&attributes, 0);
  std::vector<char*> args;
  args.reserve(argv.size() + 1);
  for (const auto& arg : argv) args.push_back(const_cast<char*>(arg.c_str()));
  args.push_back(nullptr);
  pid_t pid = -1;
  const int failed = posix_spawn(&pid, argv.front().c_str(), &actions, &attributes, args.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  posix_spawnattr_destroy(&attributes);
  if (failed != 0) return errno_error(failed, "run", argv.front());
  return pid;
}

void keep(std::string& output, const char* data, std::size_t size) {
  output.append(data, size);
  if (output.size() > kKeptOutput) output.erase(0, output.size() - kKeptOutput);
}

}  // namespace

Result<ProgramRun> run_program(const std::vector<std::string>& argv, std::chrono::milliseconds limit) {
  if (argv.empty() || argv.front().empty() || argv.front().front() != '/') {
    return Error{ErrorCode::invalid_argument, "a program to run needs an absolute path as argv[0]"};
  }
  Pipe pipe;
  std::array<int, 2> ends{};
  if (::pipe2(ends.data(), O_CLOEXEC) != 0) return errno_error(errno, "pipe2", argv.front());
  pipe.read = ends[0];
  pipe.write = ends[1];
  const auto start = std::chrono::steady_clock::now();
  HA_TRY(const pid_t pid, spawn(argv, pipe.write));
  ::close(pipe.write);
  pipe.write = -1;
  ProgramRun run;
  const auto deadline = start + limit;
  std::array<char, 4096> buffer{};
  for (;;) {
    const auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) {
      run.timed_out = true;
      ::kill(-pid, SIGKILL);
      break;
    }
    pollfd fd{pipe.read, POLLIN, 0};
    if (::poll(&fd, 1, static_cast<int>(left.count())) <= 0) continue;  // the limit, or EINTR: checked above
    const ssize_t got = ::read(pipe.read, buffer.data(), buffer.size());
    if (got <= 0) break;  // EOF: every writer, the program and what it started, closed it
    keep(run.output, buffer.data(), static_cast<std::size_t>(got));
  }
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  run.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  run.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return run;
}

}  // namespace hostagent::devices::detail
