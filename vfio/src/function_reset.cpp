// vfio/function_reset: reset, then config space read back.
#include "hostagent/vfio/function_reset.hpp"

#include <cstdio>

#include "hostagent/vfio/vfio_binding.hpp"

namespace hostagent::vfio {
namespace {

std::string hex4(uint16_t value) {
  char text[8];
  std::snprintf(text, sizeof text, "%04x", value);
  return text;
}

// reset_method (Linux 5.15+) lists the methods a reset may use, empty when none; before it, `reset`
// existed only for a function that had one (pci-sysfs.c reset_attr_is_visible).
Result<std::string> reset_methods(const SysfsRoot& sysfs, const PciAddress& function) {
  const std::string dir = "/sys/bus/pci/devices/" + function.to_string();
  if (sysfs.exists(dir + "/reset_method")) {
    HA_TRY(auto methods, sysfs.read(dir + "/reset_method"));
    if (!methods.empty()) return methods;
  } else if (sysfs.exists(dir + "/reset")) {
    return std::string();
  }
  return Error{ErrorCode::unsupported, function.to_string() +
                                           " has no reset method (reset_method is empty or missing): it cannot be "
                                           "reset between tenants, so it cannot be shown clean"};
}

// "" when every register of `identity` reads its value; else what they read ("ffff:ffff"). A
// function that does not answer reads as all ones.
Result<std::string> answers(ConfigSpace& config, const PciAddress& function, const FunctionIdentity& identity) {
  std::string read;
  bool all = true;
  for (const auto& [offset, value] : identity.registers) {
    HA_TRY(const uint16_t got, config.read16(function, offset));
    read += (read.empty() ? "" : ":") + hex4(got);
    all = all && got == value;
  }
  return all ? std::string() : read;
}

}  // namespace

FunctionIdentity function_identity(uint16_t vendor, uint16_t device) {
  // PCI Local Bus 6.1: vendor ID at 0x00, device ID at 0x02.
  return {{{0x00, vendor}, {0x02, device}}, hex4(vendor) + ":" + hex4(device)};
}

FunctionIdentity vf_identity(uint32_t class_code) {
  const auto upper = static_cast<uint16_t>(class_code >> 8U);
  return {{{0x0a, upper}}, "a VF of class " + hex4(upper)};
}

Result<ResetReport> reset_and_verify(const SysfsRoot& sysfs, SysfsWriter& writer, ConfigSpace& config,
                                     const PciAddress& function, const FunctionIdentity& identity,
                                     const ResetPolling& polling) {
  ResetReport report;
  HA_TRY(report.methods, reset_methods(sysfs, function));
  HA_TRY_STATUS(writer.write("/sys/bus/pci/devices/" + function.to_string() + "/reset", "1"));
  std::string answered = "nothing";
  for (int poll = 1; poll <= polling.polls; ++poll) {
    auto read = answers(config, function, identity);
    if (read.ok() && read->empty()) {
      report.polls = poll;
      return report;
    }
    answered = read.ok() ? *read : read.error().message;
    if (poll < polling.polls && polling.sleep) polling.sleep(polling.interval);
  }
  return Error{ErrorCode::io_error, function.to_string() + " did not come back from its reset as " + identity.name +
                                        ": config space answered " + answered + " after " +
                                        std::to_string(polling.polls) + " reads"};
}

Result<ResetReport> reset_unbound_and_verify(const SysfsRoot& sysfs, SysfsWriter& writer, ConfigSpace& config,
                                             const PciAddress& function, const FunctionIdentity& identity,
                                             const ResetPolling& polling) {
  const std::string name = function.to_string();
  HA_TRY(const auto driver, sysfs.read_link_name("/sys/bus/pci/devices/" + name + "/driver"));
  if (!driver || is_vfio_driver(*driver)) return reset_and_verify(sysfs, writer, config, function, identity, polling);
  if (!is_driver_name(*driver)) {
    return Error{ErrorCode::parse_error, name + "'s driver link names '" + *driver + "', which is not a driver name"};
  }
  const std::string drivers = "/sys/bus/pci/drivers/" + *driver;
  HA_TRY_STATUS(writer.write(drivers + "/unbind", name));
  auto report = reset_and_verify(sysfs, writer, config, function, identity, polling);
  if (!report.ok()) {
    auto error = std::move(report).error();
    error.message += "; it stays on no driver rather than go back to " + *driver;
    return error;
  }
  if (auto bound = writer.write(drivers + "/bind", name); !bound.ok()) {
    return Error{bound.error().code,
                 name + " was reset, but did not go back to " + *driver + ": " + bound.error().message};
  }
  report->host_driver = *driver;
  return report;
}

}  // namespace hostagent::vfio
