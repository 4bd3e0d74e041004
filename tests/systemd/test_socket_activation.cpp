// Socket activation: the sockets systemd passes (sd_listen_fds(3)) checked and matched to api.listen
// in-process, then hostagentd serving its API on a passed socket: under systemd-socket-activate (as
// hostagent.socket would start it) and with LISTEN_FDS set by this test, and refusing one that
// api.listen does not name.
#include <doctest/doctest.h>

#include <signal.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cstring>
#include <thread>

#include "hostagent/systemd/socket_activation.hpp"
#include "systemd_fixture.hpp"
#include "test_support.hpp"

namespace hostagent::testing {
namespace {

namespace fs = std::filesystem;
using std::chrono::seconds;

// An fd closed when the test ends.
class Fd {
 public:
  explicit Fd(int fd) : fd_(fd) {}
  ~Fd() {
    if (fd_ >= 0) ::close(fd_);
  }
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  int get() const { return fd_; }

 private:
  int fd_;
};

// A unix socket of `type` bound at `path`, not listening.
int bound_unix(const fs::path& path, int type) {
  const int fd = ::socket(AF_UNIX, type | SOCK_CLOEXEC, 0);
  sockaddr_un address{};
  address.sun_family = AF_UNIX;
  std::strncpy(address.sun_path, path.c_str(), sizeof(address.sun_path) - 1);
  REQUIRE(::bind(fd, reinterpret_cast<const sockaddr*>(&address), sizeof(address)) == 0);
  return fd;
}

TEST_CASE("socket activation: a listening unix socket is matched to the api.listen address of its path") {
  TempDir dir;
  const fs::path api = dir.path() / "api.sock";
  Fd passed(listen_unix(api));
  REQUIRE(passed.get() >= 0);
  const auto matched = systemd::match_inherited_sockets({passed.get()}, {dir.path() / "other.sock", api});
  REQUIRE_MESSAGE(matched.ok(), (matched.ok() ? "" : matched.error().message));
  CHECK(matched->size() == 1);
  CHECK(matched->at(api) == passed.get());
  const auto none = systemd::match_inherited_sockets({}, {api});
  REQUIRE(none.ok());
  CHECK(none->empty());
}

TEST_CASE("socket activation: a socket api.listen does not name is refused with its path and the fix") {
  TempDir dir;
  const fs::path other = dir.path() / "other.sock";
  Fd passed(listen_unix(other));
  REQUIRE(passed.get() >= 0);
  const auto refused = systemd::match_inherited_sockets({passed.get()}, {dir.path() / "api.sock"});
  REQUIRE_FALSE(refused.ok());
  CHECK(refused.error().code == ErrorCode::invalid_argument);
  CHECK(refused.error().message == "socket activation: fd " + std::to_string(passed.get()) + " is the socket " +
                                       other.string() +
                                       ", which api.listen does not name (unix:" + (dir.path() / "api.sock").string() +
                                       "): hostagent.socket's ListenStream= and the configuration's api.listen must "
                                       "name the same unix socket paths");
}

TEST_CASE("socket activation: a socket that is not a listening unix stream socket is refused") {
  TempDir dir;
  const fs::path api = dir.path() / "api.sock";
  Fd stream(bound_unix(api, SOCK_STREAM));  // bound, never listen(2)ed
  const auto not_listening = systemd::match_inherited_sockets({stream.get()}, {api});
  REQUIRE_FALSE(not_listening.ok());
  CHECK(not_listening.error().message.find("fd " + std::to_string(stream.get()) +
                                           " is not a listening unix stream socket") != std::string::npos);
  Fd datagram(bound_unix(dir.path() / "dgram.sock", SOCK_DGRAM));
  const auto wrong_type = systemd::match_inherited_sockets({datagram.get()}, {dir.path() / "dgram.sock"});
  REQUIRE_FALSE(wrong_type.ok());
  CHECK(wrong_type.error().message.find("not a listening unix stream socket") != std::string::npos);
  Fd tcp(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  REQUIRE(::listen(tcp.get(), 1) == 0);  // bound to an ephemeral port
  const auto inet = systemd::match_inherited_sockets({tcp.get()}, {api});
  REQUIRE_FALSE(inet.ok());
  CHECK(inet.error().message.find("not a listening unix stream socket") != std::string::npos);
}

TEST_CASE("socket activation: the same path passed twice is refused") {
  TempDir dir;
  const fs::path api = dir.path() / "api.sock";
  Fd passed(listen_unix(api));
  Fd copy(::dup(passed.get()));
  const auto twice = systemd::match_inherited_sockets({passed.get(), copy.get()}, {api});
  REQUIRE_FALSE(twice.ok());
  CHECK(twice.error().message.find("two sockets passed for " + api.string()) != std::string::npos);
}

std::vector<std::string> daemon_args(const fs::path& dir, const fs::path& api) {
  fs::create_directories(dir / "state");
  return {"--simulated", "vela2", "--state-dir", (dir / "state").string(), "--listen", "unix:" + api.string()};
}

// Until the API answers on `api` (the daemon starts after the socket exists: the request waits in
// the socket's backlog), or two minutes pass.
std::string first_answer(const fs::path& api) {
  return http_get(api, "/v1/health/ready", seconds(120));
}

TEST_CASE("socket activation: hostagentd serves on the socket it was passed and leaves the file to systemd") {
  TempDir dir;
  const fs::path api = dir.path() / "api.sock";
  const int passed = listen_unix(api);
  REQUIRE(passed >= 0);
  auto argv = daemon_args(dir.path(), api);
  argv.insert(argv.begin(), hostagent_binary("hostagentd"));
  Child daemon({.argv = argv, .log = dir.path() / "hostagentd.log", .listen_fd = passed});
  ::close(passed);  // the daemon has its copy; a request answered now can only come from it
  const auto answer = first_answer(api);
  CHECK_MESSAGE(answer.rfind("HTTP/1.1 200", 0) == 0, (answer + read_text_file(dir.path() / "hostagentd.log")));
  daemon.signal(SIGTERM);
  CHECK(daemon.wait(seconds(120)) == 0);
  CHECK(fs::exists(api));  // the socket's file is systemd's: a restart finds it still listening there
}

TEST_CASE("socket activation: under systemd-socket-activate, the API answers on the socket") {
  const auto activate = program_or_skip("systemd-socket-activate", "systemd");
  if (!activate) return;
  TempDir dir;
  const fs::path api = dir.path() / "api.sock";
  std::vector<std::string> argv = {activate->string(), "-l", api.string(), hostagent_binary("hostagentd")};
  for (const auto& arg : daemon_args(dir.path(), api)) argv.push_back(arg);
  Child daemon({.argv = argv, .log = dir.path() / "activate.log"});
  // systemd-socket-activate makes the socket, then execs hostagentd at the first connection.
  wait_while_running(daemon, [&] { return fs::exists(api); });
  const auto answer = first_answer(api);
  CHECK_MESSAGE(answer.rfind("HTTP/1.1 200", 0) == 0, (answer + read_text_file(dir.path() / "activate.log")));
  CHECK(read_text_file(dir.path() / "activate.log").find("API listening on unix:" + api.string()) != std::string::npos);
  daemon.signal(SIGTERM);  // the same process: systemd-socket-activate execs in place
  CHECK(daemon.wait(seconds(120)) == 0);
}

TEST_CASE("socket activation: a passed socket api.listen does not name fails the start, naming it") {
  TempDir dir;
  const fs::path api = dir.path() / "api.sock";
  const fs::path other = dir.path() / "other.sock";
  const int passed = listen_unix(other);
  REQUIRE(passed >= 0);
  auto argv = daemon_args(dir.path(), api);
  argv.insert(argv.begin(), hostagent_binary("hostagentd"));
  Child daemon({.argv = argv, .log = dir.path() / "hostagentd.log", .listen_fd = passed});
  ::close(passed);
  CHECK(daemon.wait(seconds(120)) == 1);
  const auto log = read_text_file(dir.path() / "hostagentd.log");
  CHECK_MESSAGE(log.find("hostagentd: invalid_argument: socket activation: fd 3 is the socket " + other.string() +
                         ", which api.listen does not name (unix:" + api.string() + ")") != std::string::npos,
                log);
  CHECK(log.find("ListenStream=") != std::string::npos);
  CHECK_FALSE(fs::exists(api));  // it never bound its own
}

}  // namespace
}  // namespace hostagent::testing
