// numa/device_health: the health of the host's PCI devices as sysfs shows it now: gone, a PCIe link
// trained below what both ends can do, AER error counters. The values; discovery/device_health_reader
// reads them on demand (for metrics), never cached: a link retrains and a device falls off the bus
// while the daemon runs.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "hostagent/numa/host_model.hpp"

namespace hostagent::numa {

struct DeviceHealth {
  PciAddress address;
  PciRole role = PciRole::other;
  bool present = true;  // false: its sysfs directory is gone (surprise removal, fell off the bus)
  // Link Status against Link Capabilities (current_link_* vs max_link_*); nullopt where the kernel
  // does not say (no PCIe capability, or the device is gone).
  std::optional<double> link_speed_gts;
  std::optional<double> link_max_speed_gts;
  std::optional<int> link_width;
  std::optional<int> link_max_width;
  bool link_degraded = false;  // trained below its capability in speed or width
  // AER counters (drivers/pci/pcie/aer.c aer_dev_{correctable,nonfatal,fatal}: "NAME COUNT" lines,
  // TOTAL_ERR_* included); empty when the device has no AER capability or the kernel no AER support.
  std::map<std::string, uint64_t> aer_correctable;
  std::map<std::string, uint64_t> aer_nonfatal;
  std::map<std::string, uint64_t> aer_fatal;
};

}  // namespace hostagent::numa
