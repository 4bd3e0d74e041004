// SIGHUP as logrotate's postrotate sends it (`systemctl kill -s HUP hostagent`, as rsyslog's does):
// the real hostagentd reopens its audit log, so after a rotation by rename the lines go to the new
// file and none is lost, and the signal neither stops nor kills it.
#include <doctest/doctest.h>

#include <signal.h>

#include <sstream>
#include <thread>

#include "systemd_fixture.hpp"
#include "test_support.hpp"

namespace hostagent::testing {
namespace {

namespace fs = std::filesystem;
using std::chrono::seconds;

std::vector<std::string> lines_of(const fs::path& path) {
  std::istringstream text(read_text_file(path));
  std::vector<std::string> lines;
  for (std::string line; std::getline(text, line);) lines.push_back(line);
  return lines;
}

TEST_CASE("SIGHUP reopens the audit log: after a rotation by rename new lines go to the new file") {
  TempDir dir;
  const fs::path api = dir.path() / "api.sock";
  const fs::path state = dir.path() / "state";
  const fs::path log = dir.path() / "hostagentd.log";
  fs::create_directories(state);
  // --simulated: the embedded default's audit log is STATE_DIR/audit.log.
  Child daemon({.argv = {hostagent_binary("hostagentd"), "--simulated", "vela2", "--state-dir", state.string(),
                         "--listen", "unix:" + api.string()},
                .log = log});
  const fs::path audit = state / "audit.log";
  // The daemon binds the socket once it has started.
  wait_while_running(daemon, [&] { return fs::exists(api); });
  const auto first = http_request(api, "POST", "/v1/vms/before/start", seconds(120));
  REQUIRE_MESSAGE(first.rfind("HTTP/1.1 404", 0) == 0, (first + read_text_file(log)));
  REQUIRE(lines_of(audit).size() == 1);

  fs::rename(audit, state / "audit.log.1");
  daemon.signal(SIGHUP);
  const auto reopened = [&] { return read_text_file(log).find("SIGHUP: audit log reopened") != std::string::npos; };
  REQUIRE_MESSAGE(wait_while_running(daemon, reopened), read_text_file(log));
  const auto second = http_request(api, "POST", "/v1/vms/after/start", seconds(60));
  CHECK(second.rfind("HTTP/1.1 404", 0) == 0);

  const auto rotated = lines_of(state / "audit.log.1");
  const auto fresh = lines_of(audit);
  REQUIRE(rotated.size() == 1);
  REQUIRE(fresh.size() == 1);
  CHECK(rotated[0].find("\"vm\":\"before\"") != std::string::npos);
  CHECK(fresh[0].find("\"vm\":\"after\"") != std::string::npos);
  CHECK(fs::status(audit).permissions() == (fs::perms::owner_read | fs::perms::owner_write | fs::perms::group_read));

  daemon.signal(SIGTERM);
  CHECK(daemon.wait(seconds(120)) == 0);
}

}  // namespace
}  // namespace hostagent::testing
