// discovery/device_health_reader: the health of the host's PCI devices (numa::DeviceHealth) read
// from sysfs now: whether each endpoint's directory still exists, its PCIe link against its
// capability, its AER counters.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "hostagent/common/result.hpp"
#include "hostagent/common/sysfs_root.hpp"
#include "hostagent/numa/device_health.hpp"
#include "hostagent/numa/host_model.hpp"

namespace hostagent::discovery {

// One entry per endpoint in `host` (bridges and switch ports aside), in address order. A device
// whose directory is gone is reported with present = false, not as an error; an attribute that
// exists but cannot be parsed is a parse_error naming the file.
Result<std::vector<numa::DeviceHealth>> read_device_health(const SysfsRoot& sysfs, const numa::HostModel& host);

// Parses one aer_dev_* file's text; parse_error naming `source` on a line that is not "NAME COUNT".
Result<std::map<std::string, uint64_t>> parse_aer_counters(const std::string& text, const std::string& source);

}  // namespace hostagent::discovery
