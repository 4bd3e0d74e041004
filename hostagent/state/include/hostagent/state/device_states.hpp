// hostagent/state/device_states: the passthrough devices placement must not give, and why, kept on
// disk so that a restart of the daemon or a reboot of the host gives none of them out (issue 19's
// device lifecycle). A device is written here as `cleaning` before a VM is given it: it was a
// tenant's, and stays out of placement once released until its cleaning has passed (then it leaves
// this file, free). A device whose cleaning failed, that the kernel would not bind, or that fell off
// the bus is `quarantined` until an operator clears it (a GPU that would not bind is not fixed by a
// reboot, and a device that fell off the bus may come back broken). One JSON file:
//
//   {"devices": [{"address": "0000:4e:00.0", "state": "quarantined", "step": "bind to vfio-pci",
//                 "reason": "...", "vm": "train-0", "since": "2026-12-04T17:20:00.000Z"}]}
#pragma once

#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "hostagent/common/result.hpp"
#include "hostagent/numa/pci_address.hpp"

namespace hostagent::state {

// The version of a device states file's layout, written in its "format" (json_fields::format_version).
inline constexpr int kDeviceStatesFormat = 1;

enum class DeviceState {
  cleaning,     // a tenant's since its last cleaning: cleaned once no VM holds it
  quarantined,  // out until an operator clears it
};
std::string_view to_string(DeviceState state);
std::optional<DeviceState> device_state_from(std::string_view text);

struct DeviceStateEntry {
  numa::PciAddress address;
  DeviceState state = DeviceState::cleaning;
  std::string step;    // quarantined: what failed ("bind to vfio-pci", "health", "reset"); cleaning: ""
  std::string reason;  // quarantined: what the kernel said, or what was seen; cleaning: ""
  std::string vm;      // the domain that held it (holder_name), or whose preparation found it; "" none
  std::string since;   // when it entered this state, as common/time_text writes it
  bool operator==(const DeviceStateEntry&) const = default;
};

// A device's holder as the device states and the cleaning evidence keep it: the libvirt domain's
// name. hostagent's own VMs have names by its rule (common/names), but a domain it did not make may
// be named anything libvirt takes ("Test VM", or a control character libvirt lets through), and
// its devices must be marked all the same: a name that is not one-line text is kept quoted
// (text::quoted), so no holder is ever a reason a device goes unmarked.
std::string holder_name(std::string_view domain);
// Why `holder` is not what holder_name keeps ("" when it is): the rule both files check.
std::string holder_problem(std::string_view field, std::string_view holder);

// Empty when the file does not exist (every device free). A file that cannot be read or parsed is
// an error naming it and the field: a device must not be handed out because its state could not be
// read.
Result<std::vector<DeviceStateEntry>> read_device_states(const std::filesystem::path& file);
// Durably (common/durable_file). Refuses a list that read_device_states would not read back, or
// that names one device twice.
Status write_device_states(const std::filesystem::path& file, const std::vector<DeviceStateEntry>& devices);

}  // namespace hostagent::state
