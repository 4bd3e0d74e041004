// state/create_requests: one JSON file per create that carried a request id, <operation>.json:
//
//   {"operation": "op-1b2c3d-4", "request_id": "9f1c...", "vm": "vm1", "template": "base-h100",
//    "submitted_at": "2026-11-29T23:00:00Z", "outcome": "created", "ended_at": "...",
//    "error_code": "", "error": "", "gone_at": "", "fingerprints": {"name": "<sha256>", ...}}
//
// Every field is always written and required on reading, but "fingerprints", which records of an
// earlier release lack (read as none).
#include "hostagent/state/create_requests.hpp"

#include <array>
#include <boost/json.hpp>

#include "hostagent/common/durable_file.hpp"
#include "hostagent/common/names.hpp"
#include "hostagent/common/sha256.hpp"
#include "hostagent/common/text.hpp"
#include "record_checks.hpp"
#include "record_file.hpp"
#include "state_directory.hpp"

namespace hostagent::state {
namespace json = boost::json;
namespace {

constexpr std::size_t kMaxRecordBytes = 64U << 10U;
constexpr std::array kOutcomes = {CreateOutcome::pending, CreateOutcome::created, CreateOutcome::failed,
                                  CreateOutcome::gone};

// What write() refuses and records() reports: the same rules, so what is written can be read.
std::string record_problem(const CreateRequestRecord& record) {
  if (!detail::is_file_id(record.operation)) return "operation " + text::quoted(record.operation) + " is not an id";
  if (!is_request_id(record.request_id)) {
    return "request_id " + text::quoted(record.request_id) + ": " + std::string(kRequestIdRule);
  }
  for (const auto& [field, value] : {std::pair{"vm", &record.vm}, std::pair{"template", &record.template_name},
                                     std::pair{"error_code", &record.error_code}, std::pair{"error", &record.error}}) {
    if (auto problem = detail::text_problem(field, *value); !problem.empty()) return problem;
  }
  if (record.vm.empty() || record.template_name.empty()) return "vm and template must be set";
  const bool ended = record.outcome != CreateOutcome::pending;
  for (const auto& problem :
       {detail::timestamp_problem("submitted_at", record.submitted_at, true),
        detail::timestamp_problem("ended_at", record.ended_at, ended),
        detail::timestamp_problem("gone_at", record.gone_at, record.outcome == CreateOutcome::gone)}) {
    if (!problem.empty()) return problem;
  }
  if (!ended && !record.ended_at.empty()) return "a pending create has no ended_at";
  for (const auto& [field, digest] : record.fingerprints) {
    if (!is_name(field)) return "fingerprints: " + text::quoted(field) + " is not a field name";
    if (!is_sha256_hex(digest)) return "fingerprints." + field + " is not a SHA-256 in hex";
  }
  const bool failed = record.outcome == CreateOutcome::failed;
  if (failed != error_code_from(record.error_code).has_value()) {
    return "error_code " + text::quoted(record.error_code) +
           (failed ? " is not an error code (invalid_argument, conflict, ...)"
                   : " is set, but the create did not fail");
  }
  return {};
}

std::string to_json_text(const CreateRequestRecord& record) {
  const json::object object{{"format", kCreateRequestFormat},
                            {"operation", record.operation},
                            {"request_id", record.request_id},
                            {"vm", record.vm},
                            {"template", record.template_name},
                            {"submitted_at", record.submitted_at},
                            {"outcome", to_string(record.outcome)},
                            {"ended_at", record.ended_at},
                            {"error_code", record.error_code},
                            {"error", record.error},
                            {"gone_at", record.gone_at}};
  json::object fingerprints;
  for (const auto& [field, digest] : record.fingerprints) fingerprints[field] = digest;
  json::object with = object;
  with["fingerprints"] = std::move(fingerprints);
  return json::serialize(with) + "\n";
}

Result<CreateOutcome> outcome_from(const std::string& text) {
  for (const auto outcome : kOutcomes) {
    if (to_string(outcome) == text) return outcome;
  }
  return json_fields::parse_failure("field 'outcome' " + text::quoted(text) +
                                    " is not one of pending, created, failed, gone");
}

Result<CreateRequestRecord> record_from(const json::value& document) {
  HA_TRY(const auto fields, json_fields::JsonFields::of(document, ""));
  HA_TRY_STATUS(json_fields::format_version(fields, kCreateRequestFormat));
  CreateRequestRecord out;
  HA_TRY(out.operation, fields.string("operation"));
  HA_TRY(out.request_id, fields.string("request_id"));
  HA_TRY(out.vm, fields.string("vm"));
  HA_TRY(out.template_name, fields.string("template"));
  HA_TRY(out.submitted_at, fields.string("submitted_at"));
  HA_TRY(const std::string outcome, fields.string("outcome"));
  HA_TRY(out.outcome, outcome_from(outcome));
  HA_TRY(out.ended_at, fields.string("ended_at"));
  HA_TRY(out.error_code, fields.string("error_code"));
  HA_TRY(out.error, fields.string("error"));
  HA_TRY(out.gone_at, fields.string("gone_at"));
  if (fields.has("fingerprints")) {
    HA_TRY(const auto fingerprints, fields.object("fingerprints"));
    HA_TRY(const auto digests, fingerprints.string_members());
    out.fingerprints.insert(digests.begin(), digests.end());
  }
  return out;
}

Result<CreateRequestRecord> read_record(const std::filesystem::path& path, const std::string& operation) {
  const auto in_file = [&](const std::string& why) {
    return Error{ErrorCode::parse_error, "create request record " + path.string() + ": " + why +
                                             " (its request id would lose its meaning: repair or remove the file)"};
  };
  HA_TRY(const auto document, detail::read_json_document(path, kMaxRecordBytes, in_file));
  auto record = record_from(document);
  if (!record.ok()) return in_file(record.error().message);
  if (record->operation != operation) return in_file("field 'operation' differs from the file name");
  if (auto problem = record_problem(*record); !problem.empty()) return in_file(problem);
  return record;
}

}  // namespace

std::string_view to_string(CreateOutcome outcome) noexcept {
  switch (outcome) {
    case CreateOutcome::pending:
      return "pending";
    case CreateOutcome::created:
      return "created";
    case CreateOutcome::failed:
      return "failed";
    case CreateOutcome::gone:
      return "gone";
  }
  return "unknown";
}

Result<CreateRequests> CreateRequests::open(const std::filesystem::path& directory) {
  HA_TRY_STATUS(detail::open_private_directory(directory, "create requests"));
  return CreateRequests(directory);
}

Status CreateRequests::write(const CreateRequestRecord& record) {
  if (auto problem = record_problem(record); !problem.empty()) {
    return Error{ErrorCode::invalid_argument, "create request record: " + problem};
  }
  return durable::replace_file(directory_ / (record.operation + std::string(detail::kJsonSuffix)),
                               to_json_text(record));
}

Status CreateRequests::remove(const std::string& operation) {
  if (!detail::is_file_id(operation)) {
    return Error{ErrorCode::invalid_argument, "create request record " + text::quoted(operation) + " is not an id"};
  }
  return durable::remove_file(directory_ / (operation + std::string(detail::kJsonSuffix)));
}

Result<std::vector<CreateRequestRecord>> CreateRequests::records() const {
  std::vector<CreateRequestRecord> out;
  HA_TRY_STATUS(detail::for_each_json_file(directory_, "create requests",
                                           [&](const auto& path, const std::string& operation) -> Status {
                                             HA_TRY(auto record, read_record(path, operation));
                                             out.push_back(std::move(record));
                                             return ok_status();
                                           }));
  return out;
}

}  // namespace hostagent::state
