// numa/device_health: judging a device's health against the thresholds that gate placement.
#include "hostagent/numa/device_health.hpp"

#include <sstream>

namespace hostagent::numa {
namespace {

// Each severity's name, the kernel's total line for it (drivers/pci/pcie/aer.c), its counters and
// its threshold, in AerSeverity's order.
struct SeverityFacts {
  const char* name;
  const char* total_key;
  std::map<std::string, uint64_t> DeviceHealth::*counters;
  uint64_t HealthThresholds::*rise;
};
constexpr SeverityFacts kFacts[] = {
    {"correctable", "TOTAL_ERR_COR", &DeviceHealth::aer_correctable, &HealthThresholds::aer_correctable_rise},
    {"nonfatal", "TOTAL_ERR_NONFATAL", &DeviceHealth::aer_nonfatal, &HealthThresholds::aer_nonfatal_rise},
    {"fatal", "TOTAL_ERR_FATAL", &DeviceHealth::aer_fatal, &HealthThresholds::aer_fatal_rise}};

const SeverityFacts& facts(AerSeverity severity) {
  return kFacts[static_cast<std::size_t>(severity)];
}

// "16 GT/s x16"; "?" for what the kernel did not say.
std::string link_text(std::optional<double> speed, std::optional<int> width) {
  std::ostringstream out;
  if (speed) {
    out << *speed << " GT/s";
  } else {
    out << "? GT/s";
  }
  out << " x" << (width ? std::to_string(*width) : "?");
  return out.str();
}

// Slower or narrower than the accepted link: either way, less than the operator accepted.
bool worse_link(const DeviceHealth& accepted, const DeviceHealth& now) {
  const bool slower = now.link_speed_gts && accepted.link_speed_gts && *now.link_speed_gts < *accepted.link_speed_gts;
  const bool narrower = now.link_width && accepted.link_width && *now.link_width < *accepted.link_width;
  return slower || narrower;
}

}  // namespace

const char* to_string(AerSeverity severity) {
  return facts(severity).name;
}

const std::map<std::string, uint64_t>& aer_counters(const DeviceHealth& device, AerSeverity severity) {
  return device.*facts(severity).counters;
}

uint64_t aer_total(const DeviceHealth& device, AerSeverity severity) {
  const auto& counters = aer_counters(device, severity);
  const auto it = counters.find(facts(severity).total_key);
  if (it != counters.end()) return it->second;
  uint64_t sum = 0;
  for (const auto& [name, count] : counters) sum += count;
  return sum;
}

std::optional<std::string> health_fault(const HealthBaseline& since, const DeviceHealth& now,
                                        const HealthThresholds& thresholds) {
  if (!now.present) return std::nullopt;
  for (const AerSeverity severity : kAerSeverities) {
    const uint64_t threshold = thresholds.*facts(severity).rise;
    if (threshold == 0) continue;
    const uint64_t before = aer_total(since.reading, severity);
    const uint64_t after = aer_total(now, severity);
    // A counter that fell (the device was reset, its driver reloaded) counts from where it is.
    if (after > before && after - before >= threshold) {
      return "AER " + std::string(to_string(severity)) + " errors rose from " + std::to_string(before) + " to " +
             std::to_string(after) + " (devices.health.aer_" + to_string(severity) + "_rise is " +
             std::to_string(threshold) + ")";
    }
  }
  if (thresholds.link_degraded && now.link_degraded && (!since.link_accepted || worse_link(since.reading, now))) {
    return "its PCIe link trained at " + link_text(now.link_speed_gts, now.link_width) + ", below its capability " +
           link_text(now.link_max_speed_gts, now.link_max_width) +
           (since.link_accepted ? " and below the link accepted when its quarantine was cleared" : "") +
           " (devices.health.link_degraded)";
  }
  return std::nullopt;
}

}  // namespace hostagent::numa
