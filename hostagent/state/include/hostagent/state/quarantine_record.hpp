// hostagent/state/quarantine_record: the devices kept out of placement until an operator clears
// them, kept on disk so that a restart of the daemon or a reboot of the host gives none of them out
// again (a GPU that would not bind is not fixed by a reboot, and a device that fell off the bus
// may come back broken). One JSON file:
//
//   {"devices": [{"address": "0000:4e:00.0", "step": "bind to vfio-pci", "reason": "...",
//                 "vm": "train-0", "since": "2026-12-04T17:20:00.000Z"}]}
#pragma once

#include <filesystem>
#include <string>
#include <vector>

#include "hostagent/common/result.hpp"
#include "hostagent/numa/pci_address.hpp"

namespace hostagent::state {

struct QuarantinedDevice {
  numa::PciAddress address;
  std::string step;    // what failed: "bind to vfio-pci", "health"
  std::string reason;  // what the kernel said, or what was seen
  std::string vm;      // whose preparation found it; "" none (seen by the health poller)
  std::string since;   // when, as common/time_text writes it
  bool operator==(const QuarantinedDevice&) const = default;
};

// Empty when the file does not exist (nothing quarantined yet). A file that cannot be read or
// parsed is an error naming it and the field: a device must not be handed out because its
// quarantine could not be read.
Result<std::vector<QuarantinedDevice>> read_quarantine(const std::filesystem::path& file);
// Durably (common/durable_file). Refuses a list that read_quarantine would not read back, or that
// names one device twice.
Status write_quarantine(const std::filesystem::path& file, const std::vector<QuarantinedDevice>& devices);

}  // namespace hostagent::state
