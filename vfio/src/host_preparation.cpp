// vfio/host_preparation: bind_all and release_all over VfioBinder (see host_preparation.hpp).
#include "hostagent/vfio/host_preparation.hpp"

#include <algorithm>
#include <set>

namespace hostagent::vfio {

std::vector<numa::PciRole> default_passthrough_roles() {
  return {numa::PciRole::gpu, numa::PciRole::nvswitch};
}

Result<std::vector<GroupBinding>> bind_all(VfioBinder& binder, const numa::HostModel& model,
                                           const std::vector<numa::PciRole>& roles) {
  std::vector<GroupBinding> bound;
  std::set<int> groups;
  for (const auto& device : model.pci_devices) {
    if (std::find(roles.begin(), roles.end(), device.role) == roles.end()) continue;
    // A group seen through an earlier device (a GPU and its audio function) is bound already.
    if (device.iommu_group && groups.count(*device.iommu_group) != 0) continue;
    auto binding = binder.bind_group(device.address);
    if (binding.ok()) {
      groups.insert(binding->group);
      bound.push_back(std::move(binding).value());
      continue;
    }
    const auto undone = release_all(binder, bound);
    return Error{
        binding.error().code,
        std::string("preparing ") + numa::to_string(device.role) + " " + device.address.to_string() +
            " for passthrough: " + binding.error().message +
            (undone.ok() ? "" : "; giving back the groups bound before it also failed: " + undone.error().message)};
  }
  return bound;
}

Status release_all(VfioBinder& binder, const std::vector<GroupBinding>& bindings) {
  std::string failed;
  ErrorCode code = ErrorCode::io_error;
  for (auto it = bindings.rbegin(); it != bindings.rend(); ++it) {
    const auto released = binder.release(*it);
    if (released.ok()) continue;
    if (failed.empty()) code = released.error().code;
    failed += (failed.empty() ? "" : "; ") + released.error().message;
  }
  if (failed.empty()) return ok_status();
  return Error{code, failed};
}

}  // namespace hostagent::vfio
