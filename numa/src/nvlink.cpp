#include "hostagent/numa/nvlink.hpp"

#include <algorithm>
#include <set>

namespace hostagent::numa {
namespace {

constexpr uint16_t kNvidia = 0x10de;

}  // namespace

NvlinkFabric nvlink_fabric(const HostModel& host) {
  NvlinkFabric fabric;
  for (const auto& f : host.pci_devices) {
    if (f.role == PciRole::nvswitch) fabric.nvswitches.push_back(f.address);
    if (f.role == PciRole::gpu && f.vendor_id == kNvidia) fabric.gpus.push_back(f.address);
  }
  if (fabric.nvswitches.empty()) fabric.gpus.clear();
  return fabric;
}

bool takes_fabric(const NvlinkFabric& fabric, const PlacementRequest& request) {
  return !fabric.nvswitches.empty() && request.gpus > 0 && request.gpus == static_cast<int>(fabric.gpus.size());
}

GuestNvlink guest_nvlink(const HostModel& host, const std::vector<PciAddress>& held,
                         std::optional<PartitionId> partition) {
  if (partition) return GuestNvlink::partition;
  const auto fabric = nvlink_fabric(host);
  const std::set<PciAddress> devices(held.begin(), held.end());
  const auto holds = [&](const PciAddress& a) { return devices.count(a) != 0; };
  const auto gpus = std::count_if(fabric.gpus.begin(), fabric.gpus.end(), holds);
  if (fabric.nvswitches.empty() || gpus == 0) return GuestNvlink::none;
  const bool every_switch = std::all_of(fabric.nvswitches.begin(), fabric.nvswitches.end(), holds);
  return every_switch && gpus == static_cast<long>(fabric.gpus.size()) ? GuestNvlink::trained : GuestNvlink::disabled;
}

std::string nvlink_summary(const HostModel& host, const Allocation& held) {
  const auto fabric = nvlink_fabric(host);
  const std::string all = std::to_string(fabric.gpus.size()) + " GPUs";
  switch (guest_nvlink(host, held.devices, held.fabric_partition)) {
    case GuestNvlink::none:
      return "";
    case GuestNvlink::partition:
      return "Fabric Manager partition " + std::to_string(*held.fabric_partition) +
             " (shared NVSwitch mode): Fabric Manager on the host trains its GPUs' NVLinks";
    case GuestNvlink::trained:
      return "all " + all + " with the host's " + std::to_string(fabric.nvswitches.size()) +
             " NVSwitches: Fabric Manager in the guest trains the fabric";
    case GuestNvlink::disabled:
      break;
  }
  return "none: the host's NVSwitches go only to a VM with all " + all +
         " (full passthrough), so this VM's GPUs run without NVLink; its seed loads the guest's nvidia "
         "driver with NVreg_NvLinkDisable=1";
}

}  // namespace hostagent::numa
