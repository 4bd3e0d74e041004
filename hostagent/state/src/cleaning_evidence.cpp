// state/cleaning_evidence: the hash-chained evidence log.
#include "hostagent/state/cleaning_evidence.hpp"
#include "hostagent/state/device_states.hpp"

#include <algorithm>
#include <array>
#include <boost/json.hpp>
#include <sstream>

#include "hostagent/common/durable_file.hpp"
#include "hostagent/common/json_fields.hpp"
#include "hostagent/common/names.hpp"
#include "hostagent/common/sha256.hpp"
#include "hostagent/common/text.hpp"
#include "record_checks.hpp"

namespace hostagent::state {
namespace json = boost::json;
namespace {

// A cleaning a day for every device of a large host for years stays far below this.
constexpr std::size_t kMaxEvidenceBytes = 256U << 20U;

bool one_of(const std::string& value, std::initializer_list<const char*> allowed) {
  return std::any_of(allowed.begin(), allowed.end(), [&](const char* a) { return value == a; });
}

std::string step_problem(const CleaningStep& step, const std::string& at) {
  if (step.name.empty()) return at + ".name is empty";
  if (!one_of(step.result, {"passed", "failed", "skipped"})) {
    return at + ".result " + text::quoted(step.result) + ": expected passed, failed or skipped";
  }
  for (const auto& [field, value] : {std::pair{".name", &step.name}, std::pair{".detail", &step.detail}}) {
    if (auto problem = detail::text_problem(at + field, *value); !problem.empty()) return problem;
  }
  if (auto problem = detail::timestamp_problem(at + ".started_at", step.started_at, true); !problem.empty()) {
    return problem;
  }
  return detail::timestamp_problem(at + ".finished_at", step.finished_at, true);
}

// What append refuses and read reports: the same rules, so what is written can be read.
std::string evidence_problem(const CleaningEvidence& evidence) {
  if (evidence.role.empty()) return "role is empty";
  if (auto problem = detail::text_problem("role", evidence.role); !problem.empty()) return problem;
  if (auto problem = holder_problem("vm", evidence.vm); !problem.empty()) return problem;
  if (!one_of(evidence.outcome, {"clean", "quarantined"})) {
    return "outcome " + text::quoted(evidence.outcome) + ": expected clean or quarantined";
  }
  for (const auto& [field, value] :
       {std::pair{"started_at", &evidence.started_at}, std::pair{"finished_at", &evidence.finished_at}}) {
    if (auto problem = detail::timestamp_problem(field, *value, true); !problem.empty()) return problem;
  }
  for (std::size_t i = 0; i < evidence.steps.size(); ++i) {
    if (auto problem = step_problem(evidence.steps[i], "steps[" + std::to_string(i) + "]"); !problem.empty()) {
      return problem;
    }
  }
  return {};
}

std::string line_of(uint64_t sequence, const CleaningEvidence& evidence, const std::string& previous) {
  json::array steps;
  for (const auto& step : evidence.steps) {
    steps.push_back(json::object{{"name", step.name},
                                 {"result", step.result},
                                 {"detail", step.detail},
                                 {"started_at", step.started_at},
                                 {"finished_at", step.finished_at}});
  }
  return json::serialize(json::object{{"format", kCleaningEvidenceFormat},
                                      {"sequence", sequence},
                                      {"device", evidence.device.to_string()},
                                      {"role", evidence.role},
                                      {"vm", evidence.vm},
                                      {"outcome", evidence.outcome},
                                      {"started_at", evidence.started_at},
                                      {"finished_at", evidence.finished_at},
                                      {"steps", std::move(steps)},
                                      {"previous_sha256", previous}});
}

Result<CleaningStep> step_from(const json::value& value, const std::string& at) {
  HA_TRY(const auto fields, json_fields::JsonFields::of(value, at));
  CleaningStep step;
  HA_TRY(step.name, fields.string("name"));
  HA_TRY(step.result, fields.string("result"));
  HA_TRY(step.detail, fields.string("detail"));
  HA_TRY(step.started_at, fields.string("started_at"));
  HA_TRY(step.finished_at, fields.string("finished_at"));
  return step;
}

Result<EvidenceRecord> record_from(const std::string& line) {
  boost::system::error_code ec;
  const json::value document = json::parse(line, ec);
  if (ec) return Error{ErrorCode::parse_error, "not JSON: " + ec.message()};
  HA_TRY(const auto fields, json_fields::JsonFields::of(document, ""));
  HA_TRY_STATUS(json_fields::format_version(fields, kCleaningEvidenceFormat));
  EvidenceRecord record;
  HA_TRY(record.sequence, fields.unsigned_integer("sequence"));
  HA_TRY(const auto device, fields.string("device"));
  auto address = PciAddress::parse(device);
  if (!address.ok()) return Error{ErrorCode::parse_error, "device: " + address.error().message};
  record.evidence.device = *address;
  HA_TRY(record.evidence.role, fields.string("role"));
  HA_TRY(record.evidence.vm, fields.string("vm"));
  HA_TRY(record.evidence.outcome, fields.string("outcome"));
  HA_TRY(record.evidence.started_at, fields.string("started_at"));
  HA_TRY(record.evidence.finished_at, fields.string("finished_at"));
  HA_TRY(const auto* steps, fields.array("steps"));
  for (std::size_t i = 0; i < steps->size(); ++i) {
    HA_TRY(auto step, step_from((*steps)[i], "steps[" + std::to_string(i) + "]"));
    record.evidence.steps.push_back(std::move(step));
  }
  HA_TRY(record.previous_sha256, fields.string("previous_sha256"));
  if (auto problem = evidence_problem(record.evidence); !problem.empty()) {
    return Error{ErrorCode::parse_error, problem};
  }
  return record;
}

// Each line checked against the one before; the records up to the first line that breaks.
EvidenceChain chain_of(const std::string& text) {
  EvidenceChain chain;
  std::string previous = sha256_hex("");
  std::istringstream lines(text);
  uint64_t number = 0;
  for (std::string line; std::getline(lines, line);) {
    ++number;
    const std::string at = "line " + std::to_string(number) + ": ";
    auto record = record_from(line);
    if (!record.ok()) {
      chain.broken = at + record.error().message;
      return chain;
    }
    if (record->sequence != number) {
      chain.broken = at + "sequence " + std::to_string(record->sequence) + " where " + std::to_string(number) +
                     " was expected: a line was removed or inserted before it";
      return chain;
    }
    if (record->previous_sha256 != previous) {
      chain.broken = at + "previous_sha256 " + record->previous_sha256 + " is not the SHA-256 of the line before (" +
                     previous + "): a line before it was changed";
      return chain;
    }
    record->sha256 = previous = sha256_hex(line);
    chain.records.push_back(std::move(record).value());
  }
  return chain;
}

}  // namespace

Result<std::unique_ptr<EvidenceLog>> EvidenceLog::open(const std::filesystem::path& file, std::size_t* torn_bytes) {
  HA_TRY(const auto cut, durable::truncate_torn_tail(file, kMaxEvidenceBytes));
  if (torn_bytes != nullptr) *torn_bytes = cut;
  std::unique_ptr<EvidenceLog> log(new EvidenceLog(file));
  log->last_sha256_ = sha256_hex("");
  std::error_code ec;
  if (!std::filesystem::exists(std::filesystem::symlink_status(file, ec))) return log;
  HA_TRY(const auto text, durable::read_file(file, kMaxEvidenceBytes));
  // Chained on the last line as written, whole chain or not: a break stays where it is, reported.
  std::istringstream lines(text);
  for (std::string line; std::getline(lines, line);) {
    ++log->last_sequence_;
    log->last_sha256_ = sha256_hex(line);
  }
  return log;
}

Result<EvidenceRecord> EvidenceLog::append(const CleaningEvidence& evidence) {
  HA_TRY(auto records, append_all({evidence}));
  return std::move(records.front());
}

Result<std::vector<EvidenceRecord>> EvidenceLog::append_all(const std::vector<CleaningEvidence>& evidence) {
  for (const auto& one : evidence) {
    if (auto problem = evidence_problem(one); !problem.empty()) {
      return Error{ErrorCode::invalid_argument, "cleaning evidence for " + one.device.to_string() + ": " + problem};
    }
  }
  std::lock_guard lock(mutex_);
  std::vector<EvidenceRecord> records;
  std::string text;
  std::string previous = last_sha256_;
  for (const auto& one : evidence) {
    const std::string line = line_of(last_sequence_ + records.size() + 1, one, previous);
    records.push_back({last_sequence_ + records.size() + 1, one, previous, sha256_hex(line)});
    previous = records.back().sha256;
    text += line + "\n";
  }
  if (records.empty()) return records;
  HA_TRY_STATUS(durable::append_file(file_, text));
  last_sequence_ = records.back().sequence;
  last_sha256_ = previous;
  return records;
}

Result<EvidenceChain> EvidenceLog::read() const {
  std::lock_guard lock(mutex_);
  std::error_code ec;
  if (!std::filesystem::exists(std::filesystem::symlink_status(file_, ec))) return EvidenceChain{};
  HA_TRY(const auto text, durable::read_file(file_, kMaxEvidenceBytes));
  return chain_of(text);
}

}  // namespace hostagent::state
