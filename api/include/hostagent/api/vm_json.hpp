// api/vm_json: the JSON form of a VM, of the service's status and of a reconcile, as the REST API
// and hostagentd's command mode report them.
#pragma once

#include <boost/json/value.hpp>

#include "hostagent/daemon/vm_service.hpp"

namespace hostagent::api {

boost::json::value to_json(const daemon::VmView& vm);
boost::json::value to_json(const daemon::ReconcileReport& report);
boost::json::value to_json(const daemon::ServiceStatus& status);

}  // namespace hostagent::api
