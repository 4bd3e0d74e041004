// vfio/function_reset: reset, then config space read back.
#include "hostagent/vfio/function_reset.hpp"

#include <cstdio>

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

}  // namespace

Result<ResetReport> reset_and_verify(const SysfsRoot& sysfs, SysfsWriter& writer, ConfigSpace& config,
                                     const PciAddress& function, uint16_t vendor, uint16_t device,
                                     const ResetPolling& polling) {
  ResetReport report;
  HA_TRY(report.methods, reset_methods(sysfs, function));
  HA_TRY_STATUS(writer.write("/sys/bus/pci/devices/" + function.to_string() + "/reset", "1"));
  std::string answered = "nothing";
  for (int poll = 1; poll <= polling.polls; ++poll) {
    // PCI Local Bus 6.1: vendor ID at 0x00, device ID at 0x02; a function that does not answer
    // reads as all ones.
    const auto read_vendor = config.read16(function, 0x00);
    const auto read_device = config.read16(function, 0x02);
    if (read_vendor.ok() && read_device.ok()) {
      if (*read_vendor == vendor && *read_device == device) {
        report.polls = poll;
        return report;
      }
      answered = hex4(*read_vendor) + ":" + hex4(*read_device);
    } else {
      answered = (read_vendor.ok() ? read_device : read_vendor).error().message;
    }
    if (poll < polling.polls && polling.sleep) polling.sleep(polling.interval);
  }
  return Error{ErrorCode::io_error, function.to_string() + " did not come back from its reset as " + hex4(vendor) +
                                        ":" + hex4(device) + ": config space answered " + answered + " after " +
                                        std::to_string(polling.polls) + " reads"};
}

}  // namespace hostagent::vfio
