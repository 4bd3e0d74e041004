// vmtemplates/shape_request: turns a VM shape (a validated template) into what placement asks of the
// host. The one place where template vocabulary meets placement vocabulary.
#pragma once

#include "hostagent/numa/placement.hpp"
#include "hostagent/vmtemplates/vm_template.hpp"

namespace hostagent::vmtemplates {

numa::PlacementRequest placement_request(const VmTemplate& shape);

// The NIC VFs a VM of this shape gets: its GPUs' VFs and the extra ones, exactly, since placement
// gives each GPU its vfs_per_gpu or refuses the VM (numa/placement pick_gpu_vfs). One MAC each.
int vf_count(const VmTemplate& shape);

}  // namespace hostagent::vmtemplates
