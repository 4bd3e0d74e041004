// numa/nvlink: the host's NVLink fabric in the full-passthrough model, Vela's: the VM that takes
// every GPU of an HGX baseboard takes its NVSwitches too and runs Fabric Manager inside, which
// trains the fabric; a VM with fewer GPUs gets no NVSwitch, and its GPUs run without NVLink. (The
// shared model, Fabric Manager on the host partitioning the fabric, is being built: fabric/, docs/devices.md.)
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "hostagent/numa/fabric_partitions.hpp"
#include "hostagent/numa/host_model.hpp"
#include "hostagent/numa/placement.hpp"

namespace hostagent::numa {

// The GPUs an NVSwitch fabric joins and its NVSwitches. PCIe cannot tell which GPUs the NVLinks
// reach; an HGX baseboard joins all of its GPUs, so every NVIDIA GPU of a host with NVSwitches
// counts. nvswitches empty: the host has no fabric.
struct NvlinkFabric {
  std::vector<PciAddress> gpus;
  std::vector<PciAddress> nvswitches;
};
NvlinkFabric nvlink_fabric(const HostModel& host);

// Whether a request takes the whole fabric: as many GPUs as it joins, on a host that has one.
bool takes_fabric(const NvlinkFabric& fabric, const PlacementRequest& request);

// What a VM's GPUs get of the host's fabric.
enum class GuestNvlink {
  none,     // the host has no NVSwitch, or the VM none of the GPUs its fabric joins
  trained,  // every GPU the fabric joins with every NVSwitch: Fabric Manager in the guest trains it
  // Some of the fabric's GPUs without its NVSwitches: the GPUs' NVLinks reach switches no one
  // trains, and the guest's nvidia driver waits for a fabric that never comes (CUDA's error 802,
  // "system not yet initialized") unless it is loaded with NVreg_NvLinkDisable=1.
  disabled,
  // Shared NVSwitch mode: the GPUs are a Fabric Manager partition, which FM on the host trains
  // when it activates it (numa/fabric_partitions.hpp); the guest gets no NVSwitch and needs none.
  partition,
};
// `partition`: the Fabric Manager partition the VM's GPUs are, in shared NVSwitch mode.
GuestNvlink guest_nvlink(const HostModel& host, const std::vector<PciAddress>& held,
                         std::optional<PartitionId> partition = std::nullopt);

// What a VM holding `held` gets of the fabric, for its record and the API: "" when the host has no
// NVSwitch or the VM no GPU; else whether its GPUs have NVLink and why.
std::string nvlink_summary(const HostModel& host, const Allocation& held);

}  // namespace hostagent::numa
