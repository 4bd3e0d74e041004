// state/operation_records: one JSON file per operation, <id>.json, every field always written and
// required on reading:
//
//   {"id": "op-mf4a1x2c9k-12", "kind": "start", "vm": "train-0", "request_id": "", "template": "",
//    "state": "succeeded", "step": "start", "step_number": 2, "step_count": 2, "error_code": "",
//    "error": "", "submitted_at": "...", "started_at": "...", "finished_at": "...",
//    "duration_seconds": 1.25, "timeline": [{"phase": "launch", "ended_at": "...", "seconds": 0.8,
//    "detail": ""}, ...]}
// "timeline" may be absent: records written before it was kept have none. The start history of
// earlier releases kept the same records, each VM's in one file (read to be moved, never written).
#include "hostagent/state/operation_records.hpp"

#include <algorithm>
#include <array>
#include <boost/json.hpp>

#include "hostagent/common/durable_file.hpp"
#include "hostagent/common/json_fields.hpp"
#include "hostagent/common/names.hpp"
#include "hostagent/common/text.hpp"
#include "hostagent/common/time_text.hpp"
#include "record_checks.hpp"
#include "record_file.hpp"
#include "state_directory.hpp"

namespace hostagent::state {
namespace json = boost::json;
namespace {

constexpr std::size_t kMaxOperationRecordBytes = 64U << 10U;
constexpr std::size_t kMaxPhases = 64;  // a create has about ten
constexpr std::array<std::string_view, 5> kOperationKinds = {"create", "delete", "start", "stop", "reboot"};
constexpr std::array<std::string_view, 4> kOperationStates = {"queued", "running", "succeeded", "failed"};

bool operation_one_of(const auto& choices, const std::string& value) {
  return std::find(choices.begin(), choices.end(), value) != choices.end();
}

std::string timeline_problem(const std::vector<PhaseRecord>& timeline) {
  if (timeline.size() > kMaxPhases) return "timeline: more than " + std::to_string(kMaxPhases) + " phases";
  for (const auto& phase : timeline) {
    if (!is_name(phase.name)) return "timeline: phase " + text::quoted(phase.name) + ": " + std::string(kNameRule);
    if (auto problem = detail::text_problem("timeline detail", phase.detail); !problem.empty()) return problem;
    if (auto problem = detail::timestamp_problem("timeline ended_at", phase.ended_at, true); !problem.empty()) {
      return problem;
    }
    if (!(phase.seconds >= 0)) return "timeline: phase " + phase.name + " took a negative time";
  }
  return {};
}

// What write refuses and records() reports: the same rules, so what is written can be read.
std::string operation_problem(const OperationRecord& r) {
  if (!detail::is_file_id(r.id)) return "id " + text::quoted(r.id) + " is not an id";
  if (!operation_one_of(kOperationKinds, r.kind))
    return "kind " + text::quoted(r.kind) + " is not create, delete, start, stop or reboot";
  if (!operation_one_of(kOperationStates, r.state))
    return "state " + text::quoted(r.state) + " is not queued, running, succeeded or failed";
  if (!is_name(r.vm)) return "vm " + text::quoted(r.vm) + ": " + std::string(kNameRule);
  for (const auto& [field, value] : {std::pair{"request_id", &r.request_id}, std::pair{"template", &r.template_name},
                                     std::pair{"step", &r.step}, std::pair{"error", &r.error}}) {
    if (auto problem = detail::text_problem(field, *value); !problem.empty()) return problem;
  }
  const bool ended = r.state == "succeeded" || r.state == "failed";
  for (const auto& problem : {detail::timestamp_problem("submitted_at", r.submitted_at, true),
                              detail::timestamp_problem("started_at", r.started_at, false),
                              detail::timestamp_problem("finished_at", r.finished_at, ended)}) {
    if (!problem.empty()) return problem;
  }
  if (!ended && !r.finished_at.empty()) return "an operation that has not ended has no finished_at";
  if ((r.state == "failed") != error_code_from(r.error_code).has_value()) {
    return "error_code " + text::quoted(r.error_code) +
           (r.state == "failed" ? " is not an error code (invalid_argument, conflict, ...)"
                                : " is set, but the operation did not fail");
  }
  if (r.step_number < 0 || r.step_count < 0 || r.step_number > r.step_count || r.duration_seconds < 0) {
    return "step_number, step_count and duration_seconds must be whole and in order";
  }
  return timeline_problem(r.timeline);
}

json::array timeline_json(const std::vector<PhaseRecord>& timeline) {
  json::array phases;
  for (const auto& phase : timeline) {
    phases.push_back(json::object{
        {"phase", phase.name}, {"ended_at", phase.ended_at}, {"seconds", phase.seconds}, {"detail", phase.detail}});
  }
  return phases;
}

Result<double> number_field(const json::value& object, std::string_view key) {
  const auto* value = object.as_object().if_contains(key);
  if (value == nullptr || !value->is_number()) {
    return json_fields::parse_failure("field '" + std::string(key) + "' is missing or not a number");
  }
  return value->to_number<double>();
}

Result<std::vector<PhaseRecord>> timeline_from(const json::value& document) {
  std::vector<PhaseRecord> timeline;
  const auto* phases = document.as_object().if_contains("timeline");
  if (phases == nullptr) return timeline;
  if (!phases->is_array()) return json_fields::parse_failure("field 'timeline' is not a list");
  for (const auto& item : phases->as_array()) {
    HA_TRY(const auto fields, json_fields::JsonFields::of(item, "timeline"));
    PhaseRecord phase;
    HA_TRY(phase.name, fields.string("phase"));
    HA_TRY(phase.ended_at, fields.string("ended_at"));
    HA_TRY(phase.detail, fields.string("detail"));
    HA_TRY(phase.seconds, number_field(item, "seconds"));
    timeline.push_back(std::move(phase));
  }
  return timeline;
}

json::object operation_object(const OperationRecord& r) {
  return json::object{{"format", kOperationRecordFormat},
                      {"id", r.id},
                      {"kind", r.kind},
                      {"vm", r.vm},
                      {"request_id", r.request_id},
                      {"template", r.template_name},
                      {"state", r.state},
                      {"step", r.step},
                      {"step_number", r.step_number},
                      {"step_count", r.step_count},
                      {"error_code", r.error_code},
                      {"error", r.error},
                      {"submitted_at", r.submitted_at},
                      {"started_at", r.started_at},
                      {"finished_at", r.finished_at},
                      {"duration_seconds", r.duration_seconds},
                      {"timeline", timeline_json(r.timeline)}};
}

std::string operation_json(const OperationRecord& r) {
  return json::serialize(operation_object(r)) + "\n";
}

Result<OperationRecord> operation_from(const json::value& document) {
  HA_TRY(const auto fields, json_fields::JsonFields::of(document, ""));
  HA_TRY_STATUS(json_fields::format_version(fields, kOperationRecordFormat));
  OperationRecord out;
  for (const auto& [key, into] :
       {std::pair{"id", &out.id}, std::pair{"kind", &out.kind}, std::pair{"vm", &out.vm},
        std::pair{"request_id", &out.request_id}, std::pair{"template", &out.template_name},
        std::pair{"state", &out.state}, std::pair{"step", &out.step}, std::pair{"error_code", &out.error_code},
        std::pair{"error", &out.error}, std::pair{"submitted_at", &out.submitted_at},
        std::pair{"started_at", &out.started_at}, std::pair{"finished_at", &out.finished_at}}) {
    HA_TRY(*into, fields.string(key));
  }
  HA_TRY(const auto number, fields.unsigned_integer("step_number"));
  HA_TRY(const auto count, fields.unsigned_integer("step_count"));
  if (number > 1000 || count > 1000)
    return json_fields::parse_failure("field 'step_count': more steps than any operation has");
  out.step_number = static_cast<int>(number);
  out.step_count = static_cast<int>(count);
  HA_TRY(out.duration_seconds, number_field(document, "duration_seconds"));
  HA_TRY(out.timeline, timeline_from(document));
  return out;
}

Result<OperationRecord> read_operation(const std::filesystem::path& path, const std::string& id) {
  const auto in_file = [&](const std::string& why) {
    return Error{ErrorCode::parse_error,
                 "operation record " + path.string() + ": " + why + " (repair or remove the file)"};
  };
  HA_TRY(const auto document, detail::read_json_document(path, kMaxOperationRecordBytes, in_file));
  auto record = operation_from(document);
  if (!record.ok()) return in_file(record.error().message);
  if (record->id != id) return in_file("field 'id' differs from the file name");
  if (auto problem = operation_problem(*record); !problem.empty()) return in_file(problem);
  return record;
}

constexpr std::size_t kMaxStartHistoryBytes = StartHistory::kKept * kMaxOperationRecordBytes;

Result<std::vector<OperationRecord>> read_starts(const std::filesystem::path& path, const std::string& vm) {
  const auto in_file = [&](const std::string& why) {
    return Error{ErrorCode::parse_error,
                 "start history " + path.string() + ": " + why + " (repair or remove the file)"};
  };
  HA_TRY(const auto document, detail::read_json_document(path, kMaxStartHistoryBytes, in_file));
  HA_TRY(const auto fields, json_fields::JsonFields::of(document, ""));
  HA_TRY(const auto name, fields.string("vm"));
  if (name != vm) return in_file("field 'vm' differs from the file name");
  const auto* starts = document.as_object().if_contains("starts");
  if (starts == nullptr || !starts->is_array()) return in_file("field 'starts' is missing or not a list");
  std::vector<OperationRecord> out;
  for (const auto& item : starts->as_array()) {
    auto record = operation_from(item);
    if (!record.ok()) return in_file(record.error().message);
    if (auto problem = operation_problem(*record); !problem.empty()) return in_file(problem);
    if (record->vm != vm) return in_file("a start of " + text::quoted(record->vm));
    out.push_back(std::move(record).value());
  }
  return out;
}

}  // namespace

Result<StartHistory> StartHistory::open(const std::filesystem::path& directory) {
  HA_TRY_STATUS(detail::open_private_directory(directory, "starts"));
  return StartHistory(directory);
}

std::filesystem::path StartHistory::file_of(const std::string& vm) const {
  return directory_ / (vm + std::string(detail::kJsonSuffix));
}

Result<std::vector<OperationRecord>> StartHistory::starts(const std::string& vm) const {
  if (!is_name(vm)) return Error{ErrorCode::invalid_argument, "start history of " + text::quoted(vm) + ": not a name"};
  if (!std::filesystem::exists(file_of(vm))) return std::vector<OperationRecord>{};
  return read_starts(file_of(vm), vm);
}

Status StartHistory::forget(const std::string& vm) {
  if (!is_name(vm)) return Error{ErrorCode::invalid_argument, "start history of " + text::quoted(vm) + ": not a name"};
  return durable::remove_file(file_of(vm));
}

Result<std::vector<std::string>> StartHistory::vms() const {
  std::vector<std::string> out;
  HA_TRY_STATUS(detail::for_each_json_file(directory_, "starts", [&](const auto& /*path*/, const std::string& vm) {
    if (is_name(vm)) out.push_back(vm);
    return ok_status();
  }));
  return out;
}

Result<OperationRecords> OperationRecords::open(const std::filesystem::path& directory) {
  HA_TRY_STATUS(detail::open_private_directory(directory, "operations"));
  return OperationRecords(directory);
}

Status OperationRecords::write(const OperationRecord& record) {
  if (auto problem = operation_problem(record); !problem.empty()) {
    return Error{ErrorCode::invalid_argument, "operation record: " + problem};
  }
  return durable::replace_file(directory_ / (record.id + std::string(detail::kJsonSuffix)), operation_json(record));
}

Status OperationRecords::remove(const std::string& id) {
  if (!detail::is_file_id(id)) {
    return Error{ErrorCode::invalid_argument, "operation record " + text::quoted(id) + " is not an id"};
  }
  return durable::discard_file(directory_ / (id + std::string(detail::kJsonSuffix)));
}

Result<std::vector<OperationRecord>> OperationRecords::records() const {
  std::vector<OperationRecord> out;
  HA_TRY_STATUS(
      detail::for_each_json_file(directory_, "operations", [&](const auto& path, const std::string& id) -> Status {
        HA_TRY(auto record, read_operation(path, id));
        out.push_back(std::move(record));
        return ok_status();
      }));
  return out;
}

}  // namespace hostagent::state
