#include "hostagent/vfio/group_viability.hpp"

#include <algorithm>

namespace hostagent::vfio {
namespace {

bool vfio_allows_driver(const std::string& driver) {
  return driver.empty() || driver == "vfio-pci" || driver == "pci-stub" ||
         driver.rfind("vfio-", 0) == 0;  // vendor variants: vfio-pci-core users such as nvgrace-gpu-vfio-pci
}

}  // namespace

Result<GroupViability> check_group(const numa::HostModel& model, const numa::PciAddress& device) {
  const auto* function = model.find(device);
  if (function == nullptr) {
    return Error{ErrorCode::not_found, "PCI device " + device.to_string() + " is not on this host"};
  }
  if (!function->iommu_group) {
    return Error{ErrorCode::unsupported, "IOMMU group of " + device.to_string() +
                                             " is unknown (no IOMMU enabled, or the host was read from an "
                                             "hwloc XML): boot with intel_iommu=on or amd_iommu=on"};
  }
  const auto group = std::find_if(model.iommu_groups.begin(), model.iommu_groups.end(),
                                  [&](const numa::IommuGroup& g) { return g.id == *function->iommu_group; });
  HA_ASSERT(group != model.iommu_groups.end());  // discovery builds groups from the same links
  GroupViability out;
  out.group = group->id;
  for (const auto& address : group->members) {
    const auto* member = model.find(address);
    HA_ASSERT(member != nullptr);
    GroupMemberState state{address, member->driver.value_or("?"), false};
    const bool bridge = member->is_bridge();
    state.blocks = !bridge && (!member->driver || !vfio_allows_driver(*member->driver));
    if (state.blocks) out.blockers.push_back(address);
    if (!bridge && address != device) out.companions.push_back(address);
    out.members.push_back(std::move(state));
  }
  return out;
}

}  // namespace hostagent::vfio
