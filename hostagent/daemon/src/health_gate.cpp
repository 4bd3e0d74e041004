// daemon/health_gate: baselines and the judgement of each reading.
#include "health_gate.hpp"

namespace hostagent::daemon {

std::vector<HealthGate::Fault> HealthGate::judge(const std::vector<numa::DeviceHealth>& health) {
  const std::lock_guard lock(mutex_);
  std::vector<Fault> faults;
  for (const auto& device : health) {
    if (!device.present) continue;
    if (accepting_.erase(device.address) > 0) {
      baselines_[device.address] = numa::HealthBaseline{device, true};
      continue;
    }
    const auto baseline = baselines_.try_emplace(device.address, numa::HealthBaseline{device, false}).first;
    if (auto reason = numa::health_fault(baseline->second, device, thresholds_)) {
      faults.push_back(Fault{device.address, std::move(*reason)});
    }
  }
  return faults;
}

void HealthGate::accept(const PciAddress& address) {
  const std::lock_guard lock(mutex_);
  accepting_.insert(address);
}

}  // namespace hostagent::daemon
