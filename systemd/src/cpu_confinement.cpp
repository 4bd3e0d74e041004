// systemd/cpu_confinement: SetUnitProperties calls over sd-bus.
#include "hostagent/systemd/cpu_confinement.hpp"

#include <systemd/sd-bus.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <memory>

namespace hostagent::systemd {
namespace {

constexpr const char* kDestination = "org.freedesktop.systemd1";
constexpr const char* kPath = "/org/freedesktop/systemd1";
constexpr const char* kInterface = "org.freedesktop.systemd1.Manager";
constexpr uint64_t kCallTimeoutUsec = 25'000'000;  // D-Bus's customary default

struct BusUnref {
  void operator()(sd_bus* bus) const { sd_bus_flush_close_unref(bus); }
};
struct MessageUnref {
  void operator()(sd_bus_message* message) const { sd_bus_message_unref(message); }
};
using BusPtr = std::unique_ptr<sd_bus, BusUnref>;
using MessagePtr = std::unique_ptr<sd_bus_message, MessageUnref>;

std::string system_bus_name() {
  const char* address = std::getenv("DBUS_SYSTEM_BUS_ADDRESS");
  return address != nullptr ? address : "the system bus (/run/dbus/system_bus_socket)";
}

// SetUnitProperties(s name, b runtime, a(sv) [("AllowedCPUs", <ay bitmask>)]).
Result<MessagePtr> build_call(sd_bus* bus, const std::string& unit, const std::vector<uint8_t>& mask) {
  sd_bus_message* raw = nullptr;
  int rc = sd_bus_message_new_method_call(bus, &raw, kDestination, kPath, kInterface, "SetUnitProperties");
  if (rc < 0) return errno_error(-rc, "build SetUnitProperties for", unit);
  MessagePtr message(raw);
  auto* m = message.get();
  if ((rc = sd_bus_message_append(m, "sb", unit.c_str(), 1)) >= 0 &&
      (rc = sd_bus_message_open_container(m, 'a', "(sv)")) >= 0 &&
      (rc = sd_bus_message_open_container(m, 'r', "sv")) >= 0 &&
      (rc = sd_bus_message_append(m, "s", "AllowedCPUs")) >= 0 &&
      (rc = sd_bus_message_open_container(m, 'v', "ay")) >= 0 &&
      (rc = sd_bus_message_append_array(m, 'y', mask.data(), mask.size())) >= 0 &&
      (rc = sd_bus_message_close_container(m)) >= 0 && (rc = sd_bus_message_close_container(m)) >= 0) {
    rc = sd_bus_message_close_container(m);
  }
  if (rc < 0) return errno_error(-rc, "build SetUnitProperties for", unit);
  return message;
}

Status set_allowed_cpus(sd_bus* bus, const std::string& unit, const std::vector<uint8_t>& mask) {
  HA_TRY(auto message, build_call(bus, unit, mask));
  sd_bus_error error = SD_BUS_ERROR_NULL;
  sd_bus_message* reply = nullptr;
  const int rc = sd_bus_call(bus, message.get(), kCallTimeoutUsec, &error, &reply);
  sd_bus_message_unref(reply);
  if (rc >= 0) {
    sd_bus_error_free(&error);
    return ok_status();
  }
  std::string why = sd_bus_error_is_set(&error) ? std::string(error.name) + ": " + (error.message ? error.message : "")
                                                : std::string(std::strerror(-rc));
  sd_bus_error_free(&error);
  return Error{ErrorCode::io_error, "systemd refused AllowedCPUs on " + unit + ": " + why};
}

}  // namespace

const std::vector<std::string>& host_process_units() {
  static const std::vector<std::string> units = {"system.slice", "user.slice", "init.scope"};
  return units;
}

std::vector<uint8_t> cpu_bitmask(const std::vector<int>& cpus) {
  std::vector<uint8_t> mask;
  for (const int cpu : cpus) {
    if (cpu < 0) continue;
    const auto byte = static_cast<std::size_t>(cpu / 8);
    if (mask.size() <= byte) mask.resize(byte + 1, 0);
    mask[byte] = static_cast<uint8_t>(mask[byte] | (1U << (cpu % 8)));
  }
  return mask;
}

Result<std::vector<UnitConfinement>> confine_host_processes(const std::vector<int>& cpus) {
  if (cpus.empty()) {
    return Error{ErrorCode::invalid_argument,
                 "host.confine_host_processes: host.housekeeping_cpus is empty; list the CPUs host processes keep"};
  }
  sd_bus* raw = nullptr;
  const int rc = sd_bus_open_system(&raw);
  if (rc < 0) {
    return Error{ErrorCode::unavailable, "cannot connect to " + system_bus_name() +
                                             " to set AllowedCPUs: " + std::strerror(-rc) + "; is dbus running?"};
  }
  BusPtr bus(raw);
  const auto mask = cpu_bitmask(cpus);
  std::vector<UnitConfinement> results;
  for (const auto& unit : host_process_units()) results.push_back({unit, set_allowed_cpus(bus.get(), unit, mask)});
  return results;
}

}  // namespace hostagent::systemd
