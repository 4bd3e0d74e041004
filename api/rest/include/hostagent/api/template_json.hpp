// api/template_json: a VM template (shape) as JSON, for /v1/templates and validate's answer. Sizes
// in bytes, PCI ids as "0x10de", enums as the YAML words (docs/templates.md).
#pragma once

#include <boost/json/value.hpp>

#include "hostagent/vmtemplates/vm_template.hpp"

namespace hostagent::api {

boost::json::value to_json(const vmtemplates::VmTemplate& shape);

}  // namespace hostagent::api
