// daemon/health_gate (private): which devices' health takes them out of placement. Each reading of
// a device is judged (numa::health_fault, by devices.health) against its baseline: its first reading
// in this run, or the one after an operator cleared its quarantine, whose link the operator thereby
// accepted. In memory: a restart judges from its own first reading (AER counters run from the
// host's boot, so only what rises while the daemon watches is counted). Thread-safe.
#pragma once

#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <string>

#include "hostagent/common/pci_address.hpp"
#include "hostagent/numa/device_health.hpp"

namespace hostagent::daemon {

class HealthGate {
 public:
  explicit HealthGate(numa::HealthThresholds thresholds) : thresholds_(thresholds) {}

  // Why this reading of a present device breaks a threshold; nullopt when it breaks none (a device
  // gone is its own fault, found apart). The first reading of a device, and the first after accept(),
  // is its baseline.
  std::optional<std::string> judge(const numa::DeviceHealth& device);
  // An operator cleared the device: its next reading is its baseline, its link as it is then accepted.
  void accept(const PciAddress& address);

 private:
  const numa::HealthThresholds thresholds_;
  std::mutex mutex_;
  std::map<PciAddress, numa::HealthBaseline> baselines_;  // under mutex_
  std::set<PciAddress> accepting_;                        // under mutex_: cleared, awaiting a reading
};

}  // namespace hostagent::daemon
