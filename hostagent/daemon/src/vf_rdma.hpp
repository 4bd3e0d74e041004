// daemon/vf_rdma: the RDMA side of a placement's NIC VFs (device, port state, RoCE v2 GID index,
// GUIDs), read from sysfs at create while the host's driver still holds them: the VM takes them
// whole after, and the guest's NCCL needs what the host saw (the VM record's rdma entries).
#pragma once

#include <vector>

#include "hostagent/common/result.hpp"
#include "hostagent/daemon/host_readers.hpp"
#include "hostagent/numa/placement.hpp"
#include "hostagent/state/vm_record.hpp"

namespace hostagent::daemon {

// One entry per NIC VF with an RDMA device registered under it, in placement order (each GPU's
// VFs, then the extra VFs). A VF created unprobed, or already on vfio-pci, has none: not an error.
// Each function's devices are what `devices_of` reads (HostReaders::rdma_devices_of).
Result<std::vector<state::VfRdma>> read_vf_rdma(const HostReaders::RdmaDevicesReader& devices_of,
                                                const numa::Placement& placement);

}  // namespace hostagent::daemon
