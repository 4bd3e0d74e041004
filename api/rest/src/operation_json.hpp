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

// A quarantined device: address, step, reason, vm (null when none), since.
boost::json::value quarantine_json(const daemon::QuarantineView& entry);

// A PCI endpoint: ids, class, NUMA node, IOMMU group, driver, switch, the VM holding it (null when
// none), why the host keeps it (null) and its quarantine (null when none).
boost::json::value device_json(const numa::PciFunction& device, const std::optional<std::string>& held_by,
                               const daemon::QuarantineView* quarantine);

}  // namespace hostagent::api::detail
