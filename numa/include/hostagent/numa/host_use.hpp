// numa/host_use: the rule for which devices the host keeps for itself and which a VM may take. The
// reasons come from discovery (a mounted disk, a NIC carrying the host's routes) and from the
// operator (devices.reserved); this module only records them on the model and answers, for a
// function and its IOMMU group, whether a VM may have them and, if not, why.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "hostagent/numa/host_model.hpp"

namespace hostagent::numa {

// One reason the host keeps a function: "nvme0n1p2 mounted at /", "reserved: BMC uplink".
struct HostUse {
  PciAddress address;
  std::string reason;
};

// Adds each reason to its function's host_use ("; " between reasons, each once). Reasons for
// addresses the model does not have are returned, for the caller to report: a reservation naming a
// device that is not there is the operator's typo, or a device that went away.
std::vector<HostUse> mark_host_use(HostModel& model, const std::vector<HostUse>& uses);

// The drivers a VM's device may be taken from when the operator names none: the GPU, NVSwitch, NIC
// and NVMe drivers whose devices hostagent gives to VMs, and the stubs. A device bound to any other
// driver is one the host is using in a way hostagent cannot see.
std::vector<std::string> default_releasable_drivers();

// Why f cannot go to a VM as a member of a group it is given with, or nullopt when it can: used by
// the host (host_use), or bound to a driver not in `releasable` (an empty list means the default).
// vfio-pci, no driver, and a driver the source cannot tell (an hwloc XML) are releasable.
std::optional<std::string> kept_by_host(const PciFunction& f, const std::vector<std::string>& releasable);

}  // namespace hostagent::numa
