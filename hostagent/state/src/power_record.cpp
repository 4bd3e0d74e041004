// state/power_record: the running VMs and the boot they ran in, as one JSON file. Every field is
// always written and required on reading.
#include "hostagent/state/power_record.hpp"

#include <boost/json.hpp>

#include "hostagent/common/durable_file.hpp"
#include "hostagent/common/json_fields.hpp"
#include "hostagent/common/names.hpp"
#include "hostagent/common/text.hpp"
#include "record_checks.hpp"
#include "record_file.hpp"

namespace hostagent::state {
namespace json = boost::json;
namespace {

constexpr std::size_t kMaxPowerRecordBytes = 1U << 20U;

// What write refuses and read reports: the same rules, so what is written can be read.
std::string power_record_problem(const PowerRecord& record) {
  if (record.boot_id.empty()) return "boot_id is empty";
  if (auto problem = detail::text_problem("boot_id", record.boot_id); !problem.empty()) return problem;
  for (std::size_t i = 0; i < record.running.size(); ++i) {
    const auto& vm = record.running[i];
    const std::string at = "running[" + std::to_string(i) + "]";
    if (!is_name(vm.vm)) return at + ".vm " + text::quoted(vm.vm) + ": " + std::string(kNameRule);
    if (vm.uuid.empty()) return at + ".uuid is empty";
    if (auto problem = detail::text_problem(at + ".uuid", vm.uuid); !problem.empty()) return problem;
  }
  return {};
}

std::string power_to_json(const PowerRecord& record) {
  json::array running;
  for (const auto& vm : record.running) running.push_back(json::object{{"vm", vm.vm}, {"uuid", vm.uuid}});
  return json::serialize(json::object{
             {"format", kPowerRecordFormat}, {"boot_id", record.boot_id}, {"running", std::move(running)}}) +
         "\n";
}

Result<PowerRecord> power_record_from(const json::value& document) {
  HA_TRY(const auto fields, json_fields::JsonFields::of(document, ""));
  HA_TRY_STATUS(json_fields::format_version(fields, kPowerRecordFormat));
  PowerRecord out;
  HA_TRY(out.boot_id, fields.string("boot_id"));
  HA_TRY(const auto* running, fields.array("running"));
  for (std::size_t i = 0; i < running->size(); ++i) {
    HA_TRY(const auto vm, json_fields::JsonFields::of((*running)[i], "running[" + std::to_string(i) + "]"));
    RunningVm entry;
    HA_TRY(entry.vm, vm.string("vm"));
    HA_TRY(entry.uuid, vm.string("uuid"));
    out.running.push_back(std::move(entry));
  }
  return out;
}

}  // namespace

Result<std::optional<PowerRecord>> read_power_record(const std::filesystem::path& file) {
  const auto in_file = [&](const std::string& why) {
    return Error{ErrorCode::parse_error, "power record " + file.string() + ": " + why +
                                             " (it says which VMs to start again after a host reboot: repair or "
                                             "remove the file)"};
  };
  std::error_code ec;
  if (!std::filesystem::exists(std::filesystem::symlink_status(file, ec))) return std::optional<PowerRecord>();
  HA_TRY(const auto document, detail::read_json_document(file, kMaxPowerRecordBytes, in_file));
  auto record = power_record_from(document);
  if (!record.ok()) return in_file(record.error().message);
  if (auto problem = power_record_problem(*record); !problem.empty()) return in_file(problem);
  return std::optional(std::move(record).value());
}

Status write_power_record(const std::filesystem::path& file, const PowerRecord& record) {
  if (auto problem = power_record_problem(record); !problem.empty()) {
    return Error{ErrorCode::invalid_argument, "power record " + file.string() + ": " + problem};
  }
  return durable::replace_file(file, power_to_json(record));
}

}  // namespace hostagent::state
