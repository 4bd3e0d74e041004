// render/placement_checks: a placement is checked against the host and the template before anything
// is rendered, so that a wrong placement fails here with a message instead of at virsh define (or
// worse, at boot). Devices are checked where the PCI layout is built (pci_layout.cpp).
#pragma once

#include "hostagent/common/result.hpp"
#include "hostagent/numa/host_model.hpp"
#include "hostagent/numa/placement.hpp"
#include "hostagent/vmtemplates/vm_template.hpp"

namespace hostagent::render::detail {

// The most guest cells the layout can give an expander bus each (pcie-root slots 0x10-0x1d).
inline constexpr int kMaxGuestCells = 14;

Status check_placement(const numa::HostModel& host, const vmtemplates::VmTemplate& shape,
                       const numa::Placement& placement);

}  // namespace hostagent::render::detail
