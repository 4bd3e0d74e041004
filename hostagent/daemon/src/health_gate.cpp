// daemon/health_gate: baselines and the judgement of each reading.
#include "health_gate.hpp"

namespace hostagent::daemon {

std::optional<std::string> HealthGate::judge(const numa::DeviceHealth& device) {
  const std::lock_guard lock(mutex_);
  if (accepting_.erase(device.address) > 0) {
    baselines_[device.address] = numa::HealthBaseline{device, true};
    return std::nullopt;
  }
  const auto baseline = baselines_.try_emplace(device.address, numa::HealthBaseline{device, false}).first;
  return numa::health_fault(baseline->second, device, thresholds_);
}

void HealthGate::accept(const PciAddress& address) {
  const std::lock_guard lock(mutex_);
  accepting_.insert(address);
}

}  // namespace hostagent::daemon
