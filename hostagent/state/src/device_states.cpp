// state/device_states: the devices out of placement as one JSON file. Every field is always written
// and required on reading.
#include "hostagent/state/device_states.hpp"

#include <boost/json.hpp>
#include <set>

#include "hostagent/common/durable_file.hpp"
#include "hostagent/common/json_fields.hpp"
#include "hostagent/common/names.hpp"
#include "hostagent/common/text.hpp"
#include "record_checks.hpp"
#include "record_file.hpp"

namespace hostagent::state {
namespace json = boost::json;
namespace {

constexpr std::size_t kMaxStatesBytes = 4U << 20U;

// What write refuses and read reports: the same rules, so what is written can be read.
std::string states_problem(const std::vector<DeviceStateEntry>& devices) {
  std::set<numa::PciAddress> seen;
  for (std::size_t i = 0; i < devices.size(); ++i) {
    const auto& device = devices[i];
    const std::string at = "devices[" + std::to_string(i) + "]";
    if (!seen.insert(device.address).second) return at + ".address " + device.address.to_string() + " is listed twice";
    if (device.state == DeviceState::quarantined && device.step.empty()) {
      return at + ".step is empty: a quarantine names the step that failed";
    }
    for (const auto& [field, value] : {std::pair{".step", &device.step}, std::pair{".reason", &device.reason}}) {
      if (auto problem = detail::text_problem(at + field, *value); !problem.empty()) return problem;
    }
    if (auto problem = holder_problem(at + ".vm", device.vm); !problem.empty()) return problem;
    if (auto problem = detail::timestamp_problem(at + ".since", device.since, true); !problem.empty()) return problem;
  }
  return {};
}

std::string states_to_json(const std::vector<DeviceStateEntry>& devices) {
  json::array list;
  for (const auto& device : devices) {
    list.push_back(json::object{{"address", device.address.to_string()},
                                {"state", to_string(device.state)},
                                {"step", device.step},
                                {"reason", device.reason},
                                {"vm", device.vm},
                                {"since", device.since}});
  }
  return json::serialize(json::object{{"format", kDeviceStatesFormat}, {"devices", std::move(list)}}) + "\n";
}

Result<DeviceStateEntry> state_entry_from(const json::value& value, const std::string& at) {
  HA_TRY(const auto fields, json_fields::JsonFields::of(value, at));
  DeviceStateEntry out;
  HA_TRY(const auto address, fields.string("address"));
  auto parsed = numa::PciAddress::parse(address);
  if (!parsed.ok()) return Error{ErrorCode::parse_error, at + ".address: " + parsed.error().message};
  out.address = *parsed;
  HA_TRY(const auto state, fields.string("state"));
  const auto parsed_state = device_state_from(state);
  if (!parsed_state)
    return Error{ErrorCode::parse_error, at + ".state: \"" + state + "\" is neither cleaning nor quarantined"};
  out.state = *parsed_state;
  HA_TRY(out.step, fields.string("step"));
  HA_TRY(out.reason, fields.string("reason"));
  HA_TRY(out.vm, fields.string("vm"));
  HA_TRY(out.since, fields.string("since"));
  return out;
}

Result<std::vector<DeviceStateEntry>> states_from(const json::value& document) {
  HA_TRY(const auto fields, json_fields::JsonFields::of(document, ""));
  HA_TRY_STATUS(json_fields::format_version(fields, kDeviceStatesFormat));
  HA_TRY(const auto* list, fields.array("devices"));
  std::vector<DeviceStateEntry> out;
  for (std::size_t i = 0; i < list->size(); ++i) {
    HA_TRY(auto device, state_entry_from((*list)[i], "devices[" + std::to_string(i) + "]"));
    out.push_back(std::move(device));
  }
  return out;
}

}  // namespace

constexpr std::size_t kMaxHolderBytes = 1024;

std::string holder_name(std::string_view domain) {
  if (domain.size() <= kMaxHolderBytes && text::xml_text_problem(domain, text::XmlText::one_line).empty()) {
    return std::string(domain);
  }
  return text::quoted(domain, kMaxHolderBytes / 8);
}

std::string holder_problem(std::string_view field, std::string_view holder) {
  if (holder.size() > kMaxHolderBytes) {
    return std::string(field) + " is " + std::to_string(holder.size()) + " bytes long, over " +
           std::to_string(kMaxHolderBytes);
  }
  return detail::text_problem(field, holder);
}

std::string_view to_string(DeviceState state) {
  switch (state) {
    case DeviceState::cleaning:
      return "cleaning";
    case DeviceState::quarantined:
      return "quarantined";
  }
  return "cleaning";
}

std::optional<DeviceState> device_state_from(std::string_view text) {
  if (text == "cleaning") return DeviceState::cleaning;
  if (text == "quarantined") return DeviceState::quarantined;
  return std::nullopt;
}

Result<std::vector<DeviceStateEntry>> read_device_states(const std::filesystem::path& file) {
  const auto in_file = [&](const std::string& why) {
    return Error{ErrorCode::parse_error,
                 "device states " + file.string() + ": " + why +
                     " (it keeps failed and uncleaned devices out of placement: repair the file; removing it "
                     "gives every one of them to the next VM, uncleaned)"};
  };
  std::error_code ec;
  if (!std::filesystem::exists(std::filesystem::symlink_status(file, ec))) return std::vector<DeviceStateEntry>{};
  HA_TRY(const auto document, detail::read_json_document(file, kMaxStatesBytes, in_file));
  auto devices = states_from(document);
  if (!devices.ok()) return in_file(devices.error().message);
  if (auto problem = states_problem(*devices); !problem.empty()) return in_file(problem);
  return devices;
}

Status write_device_states(const std::filesystem::path& file, const std::vector<DeviceStateEntry>& devices) {
  if (auto problem = states_problem(devices); !problem.empty()) {
    return Error{ErrorCode::invalid_argument, "device states " + file.string() + ": " + problem};
  }
  return durable::replace_file(file, states_to_json(devices));
}

}  // namespace hostagent::state
