// CPU confinement over sd-bus, against a private bus (dbus-daemon) with a stand-in for systemd's
// manager that records each SetUnitProperties call: the three units, runtime=true, AllowedCPUs' bytes;
// a refusal logged as an error naming the unit and the D-Bus error; hostagentd doing it at start.
#include <doctest/doctest.h>

#include <fstream>
#include <mutex>

#include "bus_stand_in.hpp"
#include "host_confinement.hpp"
#include "hostagent/systemd/cpu_confinement.hpp"
#include "hostagent/systemd/log.hpp"
#include "test_support.hpp"

namespace hostagent::testing {
namespace {

namespace fs = std::filesystem;
using std::chrono::seconds;

const std::vector<std::string> kUnits = {"system.slice", "user.slice", "init.scope"};

class RecordingNotifier final : public systemd::Notifier {
 public:
  Status notify(const std::string& assignments) override {
    sent.push_back(assignments);
    return ok_status();
  }
  std::vector<std::string> sent;
};

// The daemon's log lines, captured while this lives.
class CapturedLog {
 public:
  CapturedLog() {
    previous_ =
        systemd::set_log_sink([this](systemd::LogLevel level, const std::string& message, const systemd::LogContext&) {
          std::lock_guard lock(mutex_);
          lines_.emplace_back(level, message);
        });
  }
  ~CapturedLog() { systemd::set_log_sink(std::move(previous_)); }
  CapturedLog(const CapturedLog&) = delete;
  CapturedLog& operator=(const CapturedLog&) = delete;
  std::vector<std::pair<systemd::LogLevel, std::string>> lines() {
    std::lock_guard lock(mutex_);
    return lines_;
  }

 private:
  std::mutex mutex_;
  std::vector<std::pair<systemd::LogLevel, std::string>> lines_;
  systemd::LogSink previous_;
};

config::DaemonConfig confining(std::vector<int> cpus) {
  config::DaemonConfig config;
  config.housekeeping_cpus = std::move(cpus);
  config.confine_host_processes = true;
  return config;
}

TEST_CASE("confinement: AllowedCPUs is a bitmask, byte 0 bit 0 for CPU 0") {
  CHECK(systemd::cpu_bitmask({0, 1, 4}) == std::vector<uint8_t>{0x13});
  CHECK(systemd::cpu_bitmask({8}) == std::vector<uint8_t>{0x00, 0x01});
  CHECK(systemd::cpu_bitmask({0, 7, 15, 16}) == std::vector<uint8_t>{0x81, 0x80, 0x01});
  CHECK(systemd::cpu_bitmask({}).empty());
  CHECK(systemd::host_process_units() == kUnits);
}

TEST_CASE("confinement: SetUnitProperties on the three units, runtime, with the housekeeping CPUs' bitmask") {
  TempDir dir;
  const auto bus = PrivateBus::start_or_skip(dir.path());
  if (!bus) return;
  ManagerStandIn manager(bus->address(), {});
  REQUIRE(manager.serving());
  ScopedEnv system_bus("DBUS_SYSTEM_BUS_ADDRESS", bus->address());

  const auto results = systemd::confine_host_processes({0, 1, 4});
  REQUIRE_MESSAGE(results.ok(), (results.ok() ? "" : results.error().message));
  REQUIRE(results->size() == 3);
  for (std::size_t i = 0; i < kUnits.size(); ++i) {
    CAPTURE(i);
    CHECK((*results)[i].unit == kUnits[i]);
    CHECK((*results)[i].result.ok());
  }
  const auto calls = manager.calls();
  REQUIRE(calls.size() == 3);
  for (std::size_t i = 0; i < kUnits.size(); ++i) {
    CAPTURE(i);
    CHECK(calls[i].unit == kUnits[i]);
    CHECK(calls[i].runtime);
    CHECK(calls[i].properties == std::vector<std::string>{"AllowedCPUs"});
    CHECK(calls[i].allowed_cpus == std::vector<uint8_t>{0x13});
  }
}

TEST_CASE("confinement: a unit systemd refuses is logged as an error with the D-Bus error, the others still set") {
  TempDir dir;
  const auto bus = PrivateBus::start_or_skip(dir.path());
  if (!bus) return;
  ManagerStandIn manager(bus->address(), {"user.slice"});
  REQUIRE(manager.serving());
  ScopedEnv system_bus("DBUS_SYSTEM_BUS_ADDRESS", bus->address());
  CapturedLog log;
  RecordingNotifier notifier;

  CHECK_FALSE(cli::confine_host_processes(confining({0, 1, 4}), notifier));
  CHECK(manager.calls().size() == 3);  // the refusal did not stop the next unit
  const auto lines = log.lines();
  REQUIRE(lines.size() == 3);
  CHECK(lines[0] == std::pair(systemd::LogLevel::info,
                              std::string("confined system.slice to CPUs 0-1,4 (AllowedCPUs=, until reboot)")));
  CHECK(lines[1].first == systemd::LogLevel::error);
  CHECK(lines[1].second ==
        "could not confine user.slice to CPUs 0-1,4: systemd refused AllowedCPUs on user.slice: "
        "org.freedesktop.DBus.Error.AccessDenied: Access denied to user.slice (stand-in); VMs still run, but host "
        "processes may use their CPUs");
  CHECK(lines[2].second == "confined init.scope to CPUs 0-1,4 (AllowedCPUs=, until reboot)");
  CHECK(notifier.sent == std::vector<std::string>{"STATUS=host processes confined to CPUs 0-1,4: system.slice, "
                                                  "init.scope; refused for user.slice (see the log)"});
}

TEST_CASE("confinement: without a bus to reach, one error and the daemon goes on") {
  TempDir dir;
  ScopedEnv system_bus("DBUS_SYSTEM_BUS_ADDRESS", "unix:path=" + (dir.path() / "no-bus.sock").string());
  CapturedLog log;
  RecordingNotifier notifier;
  CHECK_FALSE(cli::confine_host_processes(confining({2, 3}), notifier));
  const auto lines = log.lines();
  REQUIRE(lines.size() == 1);
  CHECK(lines[0].first == systemd::LogLevel::error);
  CHECK(lines[0].second.find("host processes not confined to CPUs 2-3: cannot connect to unix:path=" +
                             (dir.path() / "no-bus.sock").string()) == 0);
  CHECK(notifier.sent == std::vector<std::string>{"STATUS=host processes NOT confined to CPUs 2-3 (see the log)"});
}

TEST_CASE("confinement: nothing is called when the configuration does not ask for it") {
  TempDir dir;
  const auto bus = PrivateBus::start_or_skip(dir.path());
  if (!bus) return;
  ManagerStandIn manager(bus->address(), {});
  REQUIRE(manager.serving());
  ScopedEnv system_bus("DBUS_SYSTEM_BUS_ADDRESS", bus->address());
  RecordingNotifier notifier;
  auto config = confining({0, 1});
  config.confine_host_processes = false;
  CHECK_FALSE(cli::confine_host_processes(config, notifier));
  CHECK(manager.calls().empty());
  CHECK(notifier.sent.empty());
}

TEST_CASE("confinement: hostagentd with host.confine_host_processes sets the three units at start") {
  TempDir dir;
  const auto bus = PrivateBus::start_or_skip(dir.path());
  if (!bus) return;
  ManagerStandIn manager(bus->address(), {});
  REQUIRE(manager.serving());
  // The embedded default (test:/// on vela2), written out, plus the confinement.
  const fs::path config = dir.path() / "hostagent.yaml";
  std::ofstream(config) << "libvirt: {uri: \"test:///default\", domain_type: test}\n"
                           "host:\n  simulated: vela2\n  housekeeping_cpus: 0-1,4\n  confine_host_processes: true\n"
                           "templates: {directories: [\""
                        << hostagent::testing::shipped_templates_dir().string()
                        << "\"]}\n"
                           "storage: {pool: default-pool}\n"
                           "state_directory: "
                        << (dir.path() / "state").string()
                        << "\nconsole_log_directory: " << (dir.path() / "console").string()
                        << "\napi: {audit_log: \"\"}\n";
  Child daemon({.argv = {hostagent_binary("hostagentd"), "--config", config.string(), "--exec", "status"},
                .env = {{"DBUS_SYSTEM_BUS_ADDRESS", bus->address()}},
                .log = dir.path() / "hostagentd.log"});
  const auto status = daemon.wait(seconds(120));
  const auto log = read_text_file(dir.path() / "hostagentd.log");
  REQUIRE_MESSAGE(status == 0, log);
  for (const auto& unit : kUnits) {
    CHECK_MESSAGE(log.find("<6>confined " + unit + " to CPUs 0-1,4 (AllowedCPUs=, until reboot)") != std::string::npos,
                  log);
  }
  const auto calls = manager.calls();
  REQUIRE(calls.size() == 3);
  for (std::size_t i = 0; i < kUnits.size(); ++i) {
    CHECK(calls[i].unit == kUnits[i]);
    CHECK(calls[i].allowed_cpus == std::vector<uint8_t>{0x13});
  }
}

}  // namespace
}  // namespace hostagent::testing
