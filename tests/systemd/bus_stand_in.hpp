// A private D-Bus (dbus-daemon, started by the test) and, on it, a stand-in for systemd's manager:
// org.freedesktop.systemd1 at /org/freedesktop/systemd1 with org.freedesktop.systemd1.Manager's
// SetUnitProperties, which records each call (or refuses it, for chosen units) instead of acting.
#pragma once

#include <systemd/sd-bus.h>

#include <atomic>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "systemd_fixture.hpp"

namespace hostagent::testing {

// dbus-daemon on a unix socket in `dir`, with a policy that lets anyone own any name; null when
// dbus-daemon is not installed (after program_or_skip's skip or failure).
class PrivateBus {
 public:
  static std::unique_ptr<PrivateBus> start_or_skip(const std::filesystem::path& dir);
  const std::string& address() const { return address_; }  // "unix:path=..."

 private:
  std::string address_;
  std::unique_ptr<Child> daemon_;
};

struct RecordedCall {
  std::string unit;
  bool runtime = false;
  std::vector<std::string> properties;  // names, in order
  std::vector<uint8_t> allowed_cpus;    // AllowedCPUs' bytes, when set
};

class ManagerStandIn {
 public:
  // Connects to `address`, takes the name and serves until destroyed. Calls for a unit in `refuse`
  // fail with org.freedesktop.DBus.Error.AccessDenied, as polkit's refusal would.
  ManagerStandIn(std::string address, std::set<std::string> refuse);
  ~ManagerStandIn();
  ManagerStandIn(const ManagerStandIn&) = delete;
  ManagerStandIn& operator=(const ManagerStandIn&) = delete;

  bool serving() const { return serving_.load(); }
  std::vector<RecordedCall> calls();

 private:
  void run();
  static int set_unit_properties(sd_bus_message* message, void* self, sd_bus_error* error);
  int record(sd_bus_message* message, sd_bus_error* error);

  const std::string address_;
  const std::set<std::string> refuse_;
  std::atomic<bool> stop_{false};
  std::atomic<bool> serving_{false};
  std::atomic<bool> started_{false};
  std::mutex mutex_;
  std::vector<RecordedCall> calls_;
  std::thread thread_;
};

}  // namespace hostagent::testing
