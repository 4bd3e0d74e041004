// vmtemplates/shape_request: turns a VM shape (a validated template) into what placement asks of the
// host. The one place where template vocabulary meets placement vocabulary.
#pragma once

#include "hostagent/numa/placement.hpp"
#include "hostagent/vmtemplates/vm_template.hpp"

namespace hostagent::vmtemplates {

numa::PlacementRequest placement_request(const VmTemplate& shape);

}  // namespace hostagent::vmtemplates
