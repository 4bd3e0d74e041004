// api/rest, private: /v1/host/capacity's body. What is free is numa::capacity's to say: it counts
// from placement's own inventory, so capacity never promises what a create would then refuse.
#pragma once

#include <boost/json/value.hpp>

#include "hostagent/numa/capacity.hpp"

namespace hostagent::api::detail {

boost::json::value capacity_json(const numa::Capacity& capacity);

}  // namespace hostagent::api::detail
