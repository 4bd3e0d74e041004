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

enum class AerSeverity { correctable, nonfatal, fatal };
const char* to_string(AerSeverity severity);  // "correctable", "nonfatal", "fatal"
inline constexpr AerSeverity kAerSeverities[] = {AerSeverity::correctable, AerSeverity::nonfatal, AerSeverity::fatal};

// The device's AER counters of one severity: empty when it has no AER capability.
const std::map<std::string, uint64_t>& aer_counters(const DeviceHealth& device, AerSeverity severity);
// Their total: the kernel's own TOTAL_ERR_* line, or the sum of the lines where an older kernel
// writes none.
uint64_t aer_total(const DeviceHealth& device, AerSeverity severity);

// When a device's health takes it out of placement (devices.health, docs/devices.md "Health that
// gates"): AER errors of a severity that rose by at least so many since the reading they are
// counted from (0: that severity is not judged), and a link trained below its capability.
struct HealthThresholds {
  uint64_t aer_fatal_rise = 1;
  uint64_t aer_nonfatal_rise = 1;
  uint64_t aer_correctable_rise = 0;  // corrected errors are the link doing its job: off by default
  bool link_degraded = true;
  bool operator==(const HealthThresholds&) const = default;
};

// What a reading is judged against: the first the daemon took of the device, or the one taken when
// an operator cleared its quarantine, whose link the operator thereby accepted.
struct HealthBaseline {
  DeviceHealth reading;
  bool link_accepted = false;  // the link as it was then is not a fault; a slower or narrower one is
};

// Why `now` breaks the thresholds against `since`, worded for the quarantine and naming the setting
// ("AER fatal errors rose from 0 to 2 since 2026-...; devices.health.aer_fatal_rise is 1"); nullopt
// when it breaks none. A device gone is not judged here (it is its own fault).
std::optional<std::string> health_fault(const HealthBaseline& since, const DeviceHealth& now,
                                        const HealthThresholds& thresholds);

}  // namespace hostagent::numa
