// api/rest, private: the JSON the routes answer with for operations and devices.
#pragma once

#include <boost/json/value.hpp>
#include <optional>
#include <string>

#include "hostagent/numa/host_model.hpp"
#include "hostagent/service/vm_service.hpp"

namespace hostagent::api::detail {

// api::to_json(OperationView) with a failed operation's error as an RFC 9457 problem object whose
// instance is the operation's URL.
boost::json::value operation_json(const daemon::OperationView& operation);

// A PCI endpoint: ids, class, NUMA node, IOMMU group, driver, switch, and the VM holding it (null when none).
boost::json::value device_json(const numa::PciFunction& device, const std::optional<std::string>& held_by);

}  // namespace hostagent::api::detail
