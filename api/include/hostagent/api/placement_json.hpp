// api/placement_json: the JSON form of a placement, as `hostagentctl render` writes placement.json
// and the REST API will report a VM's placement.
#pragma once

#include <boost/json/value.hpp>

#include "hostagent/numa/placement.hpp"

namespace hostagent::api {

boost::json::value to_json(const numa::Placement& placement);

}  // namespace hostagent::api
