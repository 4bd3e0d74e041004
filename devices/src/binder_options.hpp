// devices/binder_options: how the binder is told which drivers it may take a device from, for
// both the host's preparation at start and a VM's, and what the host uses: one rule.
#pragma once

#include "hostagent/devices/device_preparer.hpp"
#include "hostagent/discovery/host_use_reader.hpp"
#include "hostagent/vfio/vfio_binding.hpp"

namespace hostagent::devices::detail {

// What the host uses is read again at each bind (discovery's detect_host_use), with the
// operator's reservations: a model read at start does not know the disk mounted since.
inline vfio::BinderOptions binder_options(const PreparationOptions& options, const std::filesystem::path& root) {
  vfio::BinderOptions binder;
  if (!options.releasable_drivers.empty()) binder.unbindable_drivers = options.releasable_drivers;
  binder.host_use = [root, reserved = options.reserved]() -> Result<std::vector<numa::HostUse>> {
    HA_TRY(auto uses, numa::detect_host_use(root));
    uses.insert(uses.end(), reserved.begin(), reserved.end());
    return uses;
  };
  return binder;
}

}  // namespace hostagent::devices::detail
