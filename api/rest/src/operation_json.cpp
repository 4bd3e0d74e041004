// api/rest: operations and devices as JSON.
#include "operation_json.hpp"

#include <boost/json/parse.hpp>
#include <boost/json/value_from.hpp>
#include <cstdio>

#include "hostagent/api/problem.hpp"
#include "hostagent/api/vm_json.hpp"

namespace hostagent::api::detail {
namespace {

std::string hex(unsigned value, int digits) {
  char text[16];
  std::snprintf(text, sizeof(text), "0x%0*x", digits, value);
  return text;
}

template <typename T>
boost::json::value optional_value(const std::optional<T>& value) {
  if (!value) return nullptr;
  return boost::json::value_from(*value);
}

boost::json::value step_json(const service::CleaningStepView& step) {
  return boost::json::object{{"name", step.name},
                             {"result", step.result},
                             {"detail", step.detail},
                             {"started_at", step.started_at},
                             {"finished_at", step.finished_at},
                             {"seconds", step.seconds}};
}

// "scrub skipped: not scrubbed: no scrubber configured": each step that did not pass, worded for
// the operator who gives the device to the next tenant.
boost::json::array cleaning_marks(const service::CleaningRecordView& record) {
  boost::json::array marks;
  for (const auto& step : record.steps) {
    if (step.result == "passed") continue;
    marks.emplace_back(step.name + " " + step.result + (step.detail.empty() ? "" : ": " + step.detail));
  }
  return marks;
}

boost::json::value last_cleaning_json(const service::CleaningRecordView& record) {
  return boost::json::object{{"sequence", record.sequence},
                             {"outcome", record.outcome},
                             {"vm", text_or_null(record.vm)},
                             {"finished_at", record.finished_at},
                             {"marks", cleaning_marks(record)}};
}

}  // namespace

boost::json::value operation_json(const service::OperationView& operation) {
  boost::json::value json = api::to_json(operation);
  if (operation.error) {
    boost::system::error_code ec;
    auto problem = boost::json::parse(problem_json(*operation.error, "/v1/operations/" + operation.id), ec);
    if (!ec) json.as_object()["error"] = std::move(problem);
  }
  return json;
}

boost::json::value quarantine_json(const service::QuarantineView& entry) {
  return boost::json::object{{"address", entry.address.to_string()},
                             {"step", entry.step},
                             {"reason", entry.reason},
                             {"vm", entry.vm.empty() ? boost::json::value(nullptr) : boost::json::value(entry.vm)},
                             {"since", entry.since}};
}

boost::json::value cleaning_json(const service::CleaningView& entry) {
  return boost::json::object{{"address", entry.address.to_string()},
                             {"vm", text_or_null(entry.vm)},
                             {"since", entry.since},
                             {"held_by", text_or_null(entry.held_by)},
                             {"step", text_or_null(entry.step)}};
}

boost::json::value cleaning_record_json(const service::CleaningRecordView& record) {
  boost::json::array steps;
  for (const auto& step : record.steps) steps.push_back(step_json(step));
  return boost::json::object{{"sequence", record.sequence},
                             {"address", record.address.to_string()},
                             {"role", record.role},
                             {"vm", text_or_null(record.vm)},
                             {"outcome", record.outcome},
                             {"started_at", record.started_at},
                             {"finished_at", record.finished_at},
                             {"steps", std::move(steps)},
                             {"previous_sha256", record.previous_sha256},
                             {"sha256", record.sha256}};
}

boost::json::value history_json(const service::DeviceHistoryView& history) {
  boost::json::array cleanings;
  for (const auto& record : history.cleanings) cleanings.push_back(cleaning_record_json(record));
  return boost::json::object{
      {"address", history.address.to_string()},
      {"cleanings", std::move(cleanings)},
      {"chain", {{"whole", history.chain_broken.empty()}, {"broken", text_or_null(history.chain_broken)}}}};
}

std::string device_state(const numa::PciFunction& device, const DeviceStatus& status) {
  if (status.held_by) return "held";
  if (status.quarantine != nullptr) return "quarantined";
  if (status.cleaning != nullptr) return "cleaning";
  if (device.host_use) return "host";
  return "free";
}

boost::json::value device_json(const numa::PciFunction& device, const DeviceStatus& status) {
  const auto& held_by = status.held_by;
  const auto* quarantine = status.quarantine;
  boost::json::object json{
      {"address", device.address.to_string()},
      {"role", numa::to_string(device.role)},
      {"vendor_id", hex(device.vendor_id, 4)},
      {"device_id", hex(device.device_id, 4)},
      {"class", hex(device.class_code, 6)},
      {"numa_node", optional_value(device.numa_node)},
      {"iommu_group", optional_value(device.iommu_group)},
      {"driver", optional_value(device.driver)},
      {"switch",
       device.pcie_switch ? boost::json::value(device.pcie_switch->to_string()) : boost::json::value(nullptr)},
      {"physfn", device.physfn ? boost::json::value(device.physfn->to_string()) : boost::json::value(nullptr)},
      {"held_by", optional_value(held_by)},
      {"host_use", optional_value(device.host_use)},
      {"quarantine", quarantine == nullptr ? boost::json::value(nullptr) : quarantine_json(*quarantine)},
      {"state", device_state(device, status)},
      {"cleaning", status.cleaning == nullptr ? boost::json::value(nullptr) : cleaning_json(*status.cleaning)},
      {"last_cleaning",
       status.last_cleaning == nullptr ? boost::json::value(nullptr) : last_cleaning_json(*status.last_cleaning)}};
  return json;
}

}  // namespace hostagent::api::detail
