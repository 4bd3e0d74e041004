// numa/device_health: the judgement that gates placement on a device's health, value by value.
#include "hostagent/numa/device_health.hpp"

#include <doctest/doctest.h>

namespace hostagent::numa {
namespace {

DeviceHealth with_aer(uint64_t correctable, uint64_t nonfatal, uint64_t fatal) {
  DeviceHealth device;
  device.aer_correctable = {{"RxErr", correctable}, {"TOTAL_ERR_COR", correctable}};
  device.aer_nonfatal = {{"CmpltTO", nonfatal}, {"TOTAL_ERR_NONFATAL", nonfatal}};
  device.aer_fatal = {{"DLP", fatal}, {"TOTAL_ERR_FATAL", fatal}};
  return device;
}

DeviceHealth with_link(double speed, int width) {
  DeviceHealth device;
  device.link_speed_gts = speed;
  device.link_width = width;
  device.link_max_speed_gts = 32.0;
  device.link_max_width = 16;
  device.link_degraded = speed < 32.0 || width < 16;
  return device;
}

TEST_CASE("AER totals are the kernel's TOTAL_ERR_* line, or the lines' sum where an older kernel has none") {
  DeviceHealth device = with_aer(7, 0, 0);
  CHECK(aer_total(device, AerSeverity::correctable) == 7);
  device.aer_nonfatal = {{"CmpltTO", 2}, {"Undefined", 3}};
  CHECK(aer_total(device, AerSeverity::nonfatal) == 5);
  CHECK(aer_total(DeviceHealth{}, AerSeverity::fatal) == 0);
}

TEST_CASE("a rise of AER errors at or past its threshold is a fault naming the counts and the setting") {
  const HealthThresholds thresholds;  // fatal 1, nonfatal 1, correctable off, link on
  const HealthBaseline since{with_aer(100, 2, 0), false};
  CHECK_FALSE(health_fault(since, with_aer(100, 2, 0), thresholds));
  CHECK_FALSE(health_fault(since, with_aer(5000, 2, 0), thresholds));  // corrected errors: not judged by default
  CHECK(health_fault(since, with_aer(100, 3, 0), thresholds) ==
        "AER nonfatal errors rose from 2 to 3 (devices.health.aer_nonfatal_rise is 1)");
  CHECK(health_fault(since, with_aer(100, 2, 4), thresholds) ==
        "AER fatal errors rose from 0 to 4 (devices.health.aer_fatal_rise is 1)");
  HealthThresholds loose;
  loose.aer_nonfatal_rise = 10;
  loose.aer_correctable_rise = 1000;
  CHECK_FALSE(health_fault(since, with_aer(1099, 11, 0), loose));
  CHECK(health_fault(since, with_aer(1100, 11, 0), loose).has_value());
  CHECK(health_fault(since, with_aer(100, 12, 0), loose).has_value());
  // Counters that fell (a reset, a driver reload) are no rise.
  CHECK_FALSE(health_fault(since, with_aer(0, 0, 0), thresholds));
}

TEST_CASE("a downtrained link is a fault unless the operator accepted it, and then only a worse one is") {
  const HealthThresholds thresholds;
  const HealthBaseline first{with_link(32.0, 16), false};
  CHECK_FALSE(health_fault(first, with_link(32.0, 16), thresholds));
  CHECK(health_fault(first, with_link(8.0, 8), thresholds) ==
        "its PCIe link trained at 8 GT/s x8, below its capability 32 GT/s x16 (devices.health.link_degraded)");
  const HealthBaseline accepted{with_link(8.0, 8), true};
  CHECK_FALSE(health_fault(accepted, with_link(8.0, 8), thresholds));
  CHECK_FALSE(health_fault(accepted, with_link(16.0, 8), thresholds));  // better than accepted
  CHECK(health_fault(accepted, with_link(8.0, 4), thresholds).has_value());
  CHECK(health_fault(accepted, with_link(2.5, 8), thresholds).has_value());
  HealthThresholds off;
  off.link_degraded = false;
  CHECK_FALSE(health_fault(first, with_link(8.0, 8), off));
}

TEST_CASE("a device gone is not judged here: it is its own fault") {
  DeviceHealth gone = with_aer(0, 0, 9);
  gone.present = false;
  CHECK_FALSE(health_fault(HealthBaseline{with_aer(0, 0, 0), false}, gone, HealthThresholds{}));
}

}  // namespace
}  // namespace hostagent::numa
