// discovery/device_health_reader: reads, for each endpoint of the host model, what sysfs says about it now:
// whether its directory still exists, its PCIe link against its capability, and its AER counters.
#include "hostagent/discovery/device_health_reader.hpp"

#include <algorithm>
#include <charconv>
#include <sstream>
#include <utility>

#include "hostagent/common/text.hpp"

namespace hostagent::discovery {
namespace {

// Bridges (class 06: host, PCI-to-PCI, ...) and PCIe ports carry links for others; health is asked
// about the devices that do the work.
bool is_endpoint(const numa::PciFunction& f) {
  if ((f.class_code >> 16) == 0x06) return false;
  return f.role != numa::PciRole::root_port && f.role != numa::PciRole::switch_upstream &&
         f.role != numa::PciRole::switch_downstream;
}

Error link_speed_error(const std::string& path, const std::string& text) {
  return Error{ErrorCode::parse_error, "parse " + path + ": found " + text::quoted(text) +
                                           ", expected a rate like \"16.0 GT/s PCIe\" or \"Unknown\" "
                                           "(drivers/pci/pci-sysfs.c current_link_speed)"};
}

// current_link_speed / max_link_speed: "16.0 GT/s PCIe" since Linux 5.x (pci_speed_string), "8 GT/s"
// before; "Unknown" (or "Unknown speed") when Link Status reads no rate, as on a VF or a link that is down.
Result<std::optional<double>> parse_link_speed(const std::string& text, const std::string& path) {
  if (text.rfind("Unknown", 0) == 0) return std::optional<double>{};
  double gts = 0;
  const char* end = text.data() + text.size();
  const auto [ptr, ec] = std::from_chars(text.data(), end, gts);
  const std::string rest(ptr, end);
  if (ec != std::errc() || gts <= 0 || (rest != " GT/s" && rest != " GT/s PCIe")) return link_speed_error(path, text);
  return std::optional<double>{gts};
}

Result<std::optional<double>> read_link_speed(const SysfsRoot& sysfs, const std::string& path) {
  if (!sysfs.exists(path)) return std::optional<double>{};
  HA_TRY(const auto text, sysfs.read(path));
  return parse_link_speed(text, sysfs.host_path(path).string());
}

// Width 0 is what Link Status holds when the link is down or the function has none of its own (VFs).
Result<std::optional<int>> read_link_width(const SysfsRoot& sysfs, const std::string& path) {
  HA_TRY(const auto width, sysfs.read_optional_int(path));
  if (!width || *width <= 0) return std::optional<int>{};
  return std::optional<int>{static_cast<int>(*width)};
}

Status read_link(const SysfsRoot& sysfs, const std::string& dir, numa::DeviceHealth& health) {
  HA_TRY(health.link_speed_gts, read_link_speed(sysfs, dir + "/current_link_speed"));
  HA_TRY(health.link_max_speed_gts, read_link_speed(sysfs, dir + "/max_link_speed"));
  HA_TRY(health.link_width, read_link_width(sysfs, dir + "/current_link_width"));
  HA_TRY(health.link_max_width, read_link_width(sysfs, dir + "/max_link_width"));
  const auto below = [](const auto& now, const auto& cap) { return now && cap && *now < *cap; };
  health.link_degraded =
      below(health.link_speed_gts, health.link_max_speed_gts) || below(health.link_width, health.link_max_width);
  return ok_status();
}

// The kernel creates aer_dev_* only for a device with the AER capability (pci_aer_init), so a missing
// file is "no counters", not an error.
Result<std::map<std::string, uint64_t>> read_aer_file(const SysfsRoot& sysfs, const std::string& path) {
  if (!sysfs.exists(path)) return std::map<std::string, uint64_t>{};
  HA_TRY(const auto text, sysfs.read(path));
  return parse_aer_counters(text, sysfs.host_path(path).string());
}

Status read_aer(const SysfsRoot& sysfs, const std::string& dir, numa::DeviceHealth& health) {
  HA_TRY(health.aer_correctable, read_aer_file(sysfs, dir + "/aer_dev_correctable"));
  HA_TRY(health.aer_nonfatal, read_aer_file(sysfs, dir + "/aer_dev_nonfatal"));
  HA_TRY(health.aer_fatal, read_aer_file(sysfs, dir + "/aer_dev_fatal"));
  return ok_status();
}

Status read_attributes(const SysfsRoot& sysfs, const std::string& dir, numa::DeviceHealth& health) {
  HA_TRY_STATUS(read_link(sysfs, dir, health));
  return read_aer(sysfs, dir, health);
}

numa::DeviceHealth absent(const numa::PciFunction& f) {
  numa::DeviceHealth health;
  health.address = f.address;
  health.role = f.role;
  health.present = false;
  return health;
}

Result<numa::DeviceHealth> read_one(const SysfsRoot& sysfs, const numa::PciFunction& f) {
  // The kernel drops the bus/pci/devices link with the device (pci_stop_and_remove_bus_device), and a
  // link whose target went first does not resolve: either way exists() is false.
  const std::string dir = kPciDevicesDir + f.address.to_string();
  if (!sysfs.exists(dir)) return absent(f);
  numa::DeviceHealth health;
  health.address = f.address;
  health.role = f.role;
  auto read = read_attributes(sysfs, dir, health);
  if (read.ok()) return health;
  if (!sysfs.exists(dir)) return absent(f);  // removed while we read it: gone, not broken
  return std::move(read).error();
}

// One "NAME COUNT" line; the kernel prints "%s %llu\n" and names hold no spaces.
std::optional<std::pair<std::string, uint64_t>> parse_counter_line(const std::string& line) {
  const auto space = line.find(' ');
  if (space == 0 || space == std::string::npos) return std::nullopt;
  uint64_t count = 0;
  const char* end = line.data() + line.size();
  const auto [ptr, ec] = std::from_chars(line.data() + space + 1, end, count);
  if (ec != std::errc() || ptr != end) return std::nullopt;
  return std::make_pair(line.substr(0, space), count);
}

}  // namespace

Result<std::map<std::string, uint64_t>> parse_aer_counters(const std::string& text, const std::string& source) {
  std::map<std::string, uint64_t> counters;
  std::istringstream lines(text);
  std::string line;
  for (int number = 1; std::getline(lines, line); ++number) {
    if (line.empty()) continue;
    const auto counter = parse_counter_line(line);
    const std::string where = "parse " + source + ": line " + std::to_string(number) + " " + text::quoted(line);
    if (!counter) {
      return Error{ErrorCode::parse_error, where + ", expected \"NAME COUNT\" (drivers/pci/pcie/aer.c aer_dev_*)"};
    }
    if (!counters.insert(*counter).second) {
      return Error{ErrorCode::parse_error, where + " names " + text::quoted(counter->first) + " a second time"};
    }
  }
  return counters;
}

Result<std::vector<numa::DeviceHealth>> read_device_health(const SysfsRoot& sysfs, const numa::HostModel& host) {
  std::vector<numa::DeviceHealth> out;
  for (const auto& f : host.pci_devices) {
    if (!is_endpoint(f)) continue;
    HA_TRY(auto health, read_one(sysfs, f));
    out.push_back(std::move(health));
  }
  std::sort(out.begin(), out.end(),
            [](const numa::DeviceHealth& a, const numa::DeviceHealth& b) { return a.address < b.address; });
  return out;
}

}  // namespace hostagent::discovery
