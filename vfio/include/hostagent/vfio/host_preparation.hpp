// vfio/host_preparation: binding the host's passthrough devices to vfio-pci when the daemon starts,
// so that starting a VM does not wait for driver unbinds and probes (a GPU's driver can take
// seconds to let go). The domain XML then names the devices with managed='no'.
#pragma once

#include <vector>

#include "hostagent/numa/host_model.hpp"
#include "hostagent/vfio/vfio_binding.hpp"

namespace hostagent::vfio {

// The roles whose groups go to vfio-pci at start: what a VM takes whole.
std::vector<numa::PciRole> default_passthrough_roles();

// Binds the group of every device in the model with one of roles, each group once, in address
// order. All or nothing: a failure gives back every group bound so far, in reverse, and returns
// the failure (with the rollback's, if that failed too).
Result<std::vector<GroupBinding>> bind_all(VfioBinder& binder, const numa::HostModel& model,
                                           const std::vector<numa::PciRole>& roles = default_passthrough_roles());

// Releases bindings in reverse order, going on past failures; the error lists each group that did
// not go back.
Status release_all(VfioBinder& binder, const std::vector<GroupBinding>& bindings);

}  // namespace hostagent::vfio
