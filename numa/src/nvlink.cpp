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

std::string nvlink_summary(const HostModel& host, const Allocation& held) {
  const auto fabric = nvlink_fabric(host);
  if (fabric.nvswitches.empty()) return "";
  const std::set<PciAddress> devices(held.devices.begin(), held.devices.end());
  const auto holds = [&](const PciAddress& a) { return devices.count(a) != 0; };
  const auto gpus = std::count_if(fabric.gpus.begin(), fabric.gpus.end(), holds);
  if (gpus == 0) return "";
  const auto switches = std::count_if(fabric.nvswitches.begin(), fabric.nvswitches.end(), holds);
  const std::string all = std::to_string(fabric.gpus.size()) + " GPUs";
  if (switches == static_cast<long>(fabric.nvswitches.size()) && gpus == static_cast<long>(fabric.gpus.size())) {
    return "all " + all + " with the host's " + std::to_string(switches) +
           " NVSwitches: Fabric Manager in the guest trains the fabric";
  }
  return "none: the host's NVSwitches go only to a VM with all " + all +
         " (full passthrough), so this VM's GPUs run without NVLink";
}

}  // namespace hostagent::numa
