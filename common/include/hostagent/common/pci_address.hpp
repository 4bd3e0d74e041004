// common/pci_address: the PCI function address (domain:bus:device.function) as a value, shared by
// what reads the kernel (numa/) and what fakes it (simhost/).
#pragma once

#include <compare>
#include <cstdint>
#include <string>
#include <string_view>

#include "hostagent/common/result.hpp"

namespace hostagent {

struct PciAddress {
  uint32_t domain = 0;
  uint8_t bus = 0;
  uint8_t device = 0;
  uint8_t function = 0;

  // "0000:1b:00.0", the kernel's canonical form (lower-case hex, 4-digit domain).
  std::string to_string() const;
  // Accepts exactly the canonical form (domains above 0xffff, as on VMD or Hyper-V, too).
  static Result<PciAddress> parse(std::string_view text);

  auto operator<=>(const PciAddress&) const = default;  // NOLINT(modernize-use-nullptr): clang-tidy 14 misreads <=>
};

// Where the kernel lists every PCI function, as a link named by its canonical address
// (Documentation/ABI/testing/sysfs-bus-pci: /sys/bus/pci/devices/.../).
inline const std::string kPciDevicesDir = "/sys/bus/pci/devices/";

}  // namespace hostagent
