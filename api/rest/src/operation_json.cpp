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

}  // namespace

boost::json::value operation_json(const daemon::OperationView& operation) {
  boost::json::value json = api::to_json(operation);
  if (operation.error) {
    boost::system::error_code ec;
    auto problem = boost::json::parse(problem_json(*operation.error, "/v1/operations/" + operation.id), ec);
    if (!ec) json.as_object()["error"] = std::move(problem);
  }
  return json;
}

boost::json::value quarantine_json(const daemon::QuarantineView& entry) {
  return boost::json::object{{"address", entry.address.to_string()},
                             {"step", entry.step},
                             {"reason", entry.reason},
                             {"vm", entry.vm.empty() ? boost::json::value(nullptr) : boost::json::value(entry.vm)},
                             {"since", entry.since}};
}

boost::json::value device_json(const numa::PciFunction& device, const std::optional<std::string>& held_by,
                               const daemon::QuarantineView* quarantine) {
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
      {"quarantine", quarantine == nullptr ? boost::json::value(nullptr) : quarantine_json(*quarantine)}};
  return json;
}

}  // namespace hostagent::api::detail
