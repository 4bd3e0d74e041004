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
boost::json::value operation_json(const service::OperationView& operation);

// A quarantined device: address, step, reason, vm (null when none), since.
boost::json::value quarantine_json(const service::QuarantineView& entry);

// A device marked for cleaning: address, vm, since, held_by, step (each text null when "").
boost::json::value cleaning_json(const service::CleaningView& entry);

// One cleaning as the evidence log holds it, its steps and the digests that chain it.
boost::json::value cleaning_record_json(const service::CleaningRecordView& record);

// Every cleaning of a device, and whether the log's chain vouches for them: {"address",
// "cleanings", "chain": {"whole", "broken"}}.
boost::json::value history_json(const service::DeviceHistoryView& history);

// What the service knows of one device beyond the host model: each null or nullptr when none.
struct DeviceStatus {
  std::optional<std::string> held_by = {};
  const service::QuarantineView* quarantine = nullptr;
  const service::CleaningView* cleaning = nullptr;
  const service::CleaningRecordView* last_cleaning = nullptr;
};

// free, held, host, cleaning or quarantined: held wins (a held device is marked for cleaning from
// the start), then quarantined, then cleaning, then the host's own.
std::string device_state(const numa::PciFunction& device, const DeviceStatus& status);

// A PCI endpoint: ids, class, NUMA node, IOMMU group, driver, switch, the VM holding it (null when
// none), why the host keeps it (null), its quarantine and its cleaning (null when none), its state
// and its last cleaning (null when never cleaned) with a mark for each step that did not pass.
boost::json::value device_json(const numa::PciFunction& device, const DeviceStatus& status);

}  // namespace hostagent::api::detail
