// The notify and watchdog protocol as systemd sees it: hostagentd started with NOTIFY_SOCKET at a
// datagram socket this test listens on, and WatchdogSec= of 200 ms (WATCHDOG_USEC, WATCHDOG_PID).
// The real sd_notify path is also checked in-process against the same kind of socket.
#include <doctest/doctest.h>

#include <signal.h>
#include <stdlib.h>

#include <algorithm>

#include "hostagent/systemd/notifier.hpp"
#include "systemd_fixture.hpp"
#include "test_support.hpp"

namespace hostagent::testing {
namespace {

namespace fs = std::filesystem;
using std::chrono::milliseconds;
using std::chrono::seconds;

// Every assignment of one datagram ("READY=1\nSTATUS=x" is two).
std::vector<std::string> assignments(const std::string& datagram) {
  std::vector<std::string> lines;
  std::size_t start = 0;
  while (start <= datagram.size()) {
    const auto end = std::min(datagram.find('\n', start), datagram.size());
    if (end > start) lines.push_back(datagram.substr(start, end - start));
    start = end + 1;
  }
  return lines;
}

bool has(const std::vector<std::string>& lines, const std::string& line) {
  return std::find(lines.begin(), lines.end(), line) != lines.end();
}

// The index of the first status that starts with `prefix`, or -1.
int position(const std::vector<std::string>& statuses, const std::string& prefix) {
  for (std::size_t i = 0; i < statuses.size(); ++i) {
    if (statuses[i].rfind(prefix, 0) == 0) return static_cast<int>(i);
  }
  return -1;
}

TEST_CASE("notify: STATUS lines during start, READY=1 when the API accepts, WATCHDOG=1, STOPPING=1 at SIGTERM") {
  TempDir dir;
  NotifySocket notify(dir.path() / "notify.sock");
  const fs::path api = dir.path() / "api.sock";
  fs::create_directories(dir.path() / "state");
  Child daemon({.argv = {hostagent_binary("hostagentd"), "--simulated", "vela2", "--state-dir",
                         (dir.path() / "state").string(), "--listen", "unix:" + api.string()},
                .env = {{"NOTIFY_SOCKET", (dir.path() / "notify.sock").string()},
                        {"WATCHDOG_USEC", "200000"},
                        {"WATCHDOG_PID", kChildPid}},
                .log = dir.path() / "hostagentd.log"});
  const auto log = [&] { return read_text_file(dir.path() / "hostagentd.log"); };

  // Until READY=1; a loaded machine may take a while to start (two minutes at most).
  std::vector<std::string> statuses;
  bool ready = false;
  bool accepted_at_ready = false;
  std::string health_at_ready;
  for (int waited = 0; !ready && waited < 1200 && !daemon.poll(); ++waited) {
    const auto datagram = notify.receive(milliseconds(100));
    if (!datagram) continue;
    const auto lines = assignments(*datagram);
    for (const auto& line : lines) {
      if (line.rfind("STATUS=", 0) == 0) statuses.push_back(line.substr(7));
    }
    if (has(lines, "READY=1")) {
      ready = true;
      accepted_at_ready = can_connect(api);
      health_at_ready = http_get(api, "/v1/health/ready", seconds(30));
    }
  }
  REQUIRE_MESSAGE(ready, log());
  CHECK(accepted_at_ready);
  CHECK_MESSAGE(health_at_ready.rfind("HTTP/1.1 200", 0) == 0, health_at_ready);

  // Start-up in order, each stage said as it was reached; the READY datagram's status names the API.
  CAPTURE(statuses);
  const int configuration = position(statuses, "configuration read: <embedded>");
  const int host = position(statuses, "host discovered: ");
  const int libvirt = position(statuses, "libvirt connected: test:///default");
  const int devices = position(statuses, "devices prepared (libvirt)");
  const int reconciled = position(statuses, "state reconciled: ");
  const int listening = position(statuses, "0 VMs, ");
  CHECK(configuration >= 0);
  CHECK(configuration < host);
  CHECK(host < libvirt);
  CHECK(libvirt < devices);
  CHECK(devices < reconciled);
  CHECK(reconciled < listening);
  REQUIRE(listening >= 0);
  CHECK(statuses[listening].find("API listening on unix:" + api.string()) != std::string::npos);

  // The watchdog: pings keep coming while the daemon runs (every 100 ms; a minute is plenty).
  int pings = 0;
  for (int waited = 0; pings < 3 && waited < 600; ++waited) {
    const auto datagram = notify.receive(milliseconds(100));
    if (datagram && has(assignments(*datagram), "WATCHDOG=1")) ++pings;
  }
  CHECK(pings == 3);

  daemon.signal(SIGTERM);
  bool stopping = false;
  for (int waited = 0; !stopping && waited < 600; ++waited) {
    const auto datagram = notify.receive(milliseconds(100));
    if (datagram && has(assignments(*datagram), "STOPPING=1")) stopping = true;
  }
  CHECK_MESSAGE(stopping, log());
  // Drained meanwhile: a full socket queue would hold the daemon's last pings.
  std::optional<int> status;
  for (int waited = 0; !status && waited < 1200; ++waited) {
    (void)notify.receive(milliseconds(50));
    status = daemon.poll();
  }
  CHECK_MESSAGE(status == 0, log());
}

TEST_CASE("notify: a start that fails says so in STATUS and sends no READY=1") {
  TempDir dir;
  NotifySocket notify(dir.path() / "notify.sock");
  Child daemon({.argv = {hostagent_binary("hostagentd"), "--config", (dir.path() / "missing.yaml").string()},
                .env = {{"NOTIFY_SOCKET", (dir.path() / "notify.sock").string()}},
                .log = dir.path() / "hostagentd.log"});
  const auto status = daemon.wait(seconds(120));
  REQUIRE(status.has_value());
  CHECK(*status == 1);
  std::vector<std::string> lines;
  while (const auto datagram = notify.receive(milliseconds(0))) {
    for (const auto& line : assignments(*datagram)) lines.push_back(line);
  }
  CAPTURE(lines);
  CHECK_FALSE(has(lines, "READY=1"));
  REQUIRE(lines.size() == 1);
  CHECK(lines[0].rfind("STATUS=failed: ", 0) == 0);
  CHECK(lines[0].find("missing.yaml") != std::string::npos);
}

TEST_CASE("notify: sd_notify reaches NOTIFY_SOCKET, one datagram per message, status text on one line") {
  TempDir dir;
  const fs::path path = dir.path() / "notify.sock";
  NotifySocket notify(path);
  const char* before = std::getenv("NOTIFY_SOCKET");
  const std::string saved = before != nullptr ? before : "";
  ::setenv("NOTIFY_SOCKET", path.c_str(), 1);
  const auto notifier = systemd::make_sd_notifier();
  CHECK(notifier->status("host discovered").ok());
  CHECK(notifier->ready("2 VMs\nREADY=0").ok());  // a newline cannot smuggle in an assignment
  CHECK(notifier->watchdog().ok());
  CHECK(notifier->stopping("stopping on signal 15").ok());
  CHECK(notify.receive(milliseconds(5000)) == "STATUS=host discovered");
  CHECK(notify.receive(milliseconds(5000)) == "READY=1\nSTATUS=2 VMs READY=0");
  CHECK(notify.receive(milliseconds(5000)) == "WATCHDOG=1");
  CHECK(notify.receive(milliseconds(5000)) == "STOPPING=1\nSTATUS=stopping on signal 15");

  ::setenv("NOTIFY_SOCKET", (dir.path() / "nobody.sock").c_str(), 1);
  const auto refused = notifier->status("x");
  REQUIRE_FALSE(refused.ok());
  CHECK(refused.error().message.find("nobody.sock") != std::string::npos);
  if (before != nullptr) {
    ::setenv("NOTIFY_SOCKET", saved.c_str(), 1);
  } else {
    ::unsetenv("NOTIFY_SOCKET");
  }
}

}  // namespace
}  // namespace hostagent::testing
