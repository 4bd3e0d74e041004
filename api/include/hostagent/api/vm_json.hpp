// api/vm_json: the JSON form of a VM, of the service's status and of a reconcile, of an operation
// and of a service event, as the REST API and hostagentd's command mode report them.
#pragma once

#include <boost/json/value.hpp>

#include "hostagent/service/vm_service.hpp"

namespace hostagent::api {

boost::json::value to_json(const service::VmView& vm);
boost::json::value to_json(const service::ReconcileReport& report);
boost::json::value to_json(const service::ServiceStatus& status);
// An operation; a failed one's error is {"code", "message"} here (the REST API makes it a problem).
boost::json::value to_json(const service::OperationView& operation);
// The `data` of an event: vm {"vm", "state", "detail"}, operation (the operation), device {"vm",
// "held", "devices"}, quarantine {"device", "quarantined", "step", "reason", "vm"}, cleaning
// {"device", "vm", "state", "step", "outcome", "sequence"}.
boost::json::value to_json(const service::ServiceEvent& event);
// {"mode", "reason", "principal", "since", "deadline", "vms": [{"vm", "state", "error"}]}
boost::json::value to_json(const service::MaintenanceView& maintenance);
// GET /v1/vms/{name}/stats: what libvirt did not report is null.
boost::json::value to_json(const service::VmStatsView& stats);
// "vm", "operation", "device", "quarantine", "cleaning": the event's name in an event stream.
const char* event_name(service::ServiceEvent::Kind kind);

// A text field as the views write it: "" (none) as JSON null.
boost::json::value text_or_null(const std::string& text);

}  // namespace hostagent::api
