// devices/binder_options: how the binder is told which drivers it may take a device from, for
// both the host's preparation at start and a VM's: one rule.
#pragma once

#include "hostagent/devices/device_preparer.hpp"
#include "hostagent/vfio/vfio_binding.hpp"

namespace hostagent::devices::detail {

inline vfio::BinderOptions binder_options(const PreparationOptions& options) {
  vfio::BinderOptions binder;
  if (!options.releasable_drivers.empty()) binder.unbindable_drivers = options.releasable_drivers;
  return binder;
}

}  // namespace hostagent::devices::detail
