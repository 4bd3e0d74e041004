// state/journal: one JSON file per operation in flight, <id>.json in the journal directory:
//
//   {"id": "...", "kind": "create", "vm": "vm1", "started_at": "2026-11-29T23:00:00Z",
//    "steps_done": ["place", "define"], "current_step": "start", "record": {... the VmRecord ...}}
//
// Every field is always written and required on reading: an entry is replaced whole or not at all.
#include "hostagent/state/journal.hpp"
#include "hostagent/common/text.hpp"

#include <algorithm>
#include <array>
#include <boost/json.hpp>

#include "hostagent/common/durable_file.hpp"
#include "hostagent/common/time_text.hpp"
#include "record_checks.hpp"
#include "record_json.hpp"
#include "state_directory.hpp"

namespace hostagent::state {
namespace json = boost::json;
namespace {

constexpr std::size_t kMaxEntryBytes = 16U << 20U;
constexpr std::array kKinds = {OperationKind::create, OperationKind::start, OperationKind::stop, OperationKind::reboot,
                               OperationKind::remove};

Status check_id(const std::string& id) {
  if (detail::is_file_id(id)) return ok_status();
  return Error{ErrorCode::invalid_argument, "journal entry id " + text::quoted(id) +
                                                " must be 1 to 128 of A-Z a-z 0-9 _ . - and not start with '.'"};
}

std::string step_list(const std::vector<std::string_view>& steps) {
  std::string out;
  for (const auto step : steps) out += std::string(out.empty() ? "" : ", ") + std::string(step);
  return out + ", " + std::string(step::commit);
}

// Steps from the kind's vocabulary only: recovery acts on each by name.
std::string steps_problem(const JournalEntry& entry) {
  const auto& known = journaled_steps(entry.kind);
  const std::string kind(to_string(entry.kind));
  if (known.empty()) return "kind " + text::quoted(kind) + " is never journaled (only create and delete are)";
  const auto is_known = [&](const std::string& step) {
    return step == step::commit || std::find(known.begin(), known.end(), step) != known.end();
  };
  const auto unknown = [&](const char* field, const std::string& step) {
    return std::string(field) + " names " + text::quoted(step) + ", not a step of " + kind + " (" + step_list(known) +
           "): written by another version of hostagent, or corrupt";
  };
  for (const auto& step : entry.steps_done) {
    if (!is_known(step)) return unknown("steps_done", step);
  }
  // Empty: the operation had begun no step yet.
  if (!entry.current_step.empty() && !is_known(entry.current_step)) return unknown("current_step", entry.current_step);
  return {};
}

// What write() refuses and entries() reports: the same rules, so what is written can be read.
std::string entry_problem(const JournalEntry& entry) {
  if (entry.vm.empty()) return "vm is empty";
  if (auto problem = detail::text_problem("vm", entry.vm); !problem.empty()) return problem;
  if (!is_utc_timestamp(entry.started_at)) {
    return "started_at " + text::quoted(entry.started_at) + " is not an RFC 3339 UTC time such as 2026-11-29T23:00:00Z";
  }
  for (const auto& step : entry.steps_done) {
    if (auto problem = detail::text_problem("steps_done", step); !problem.empty()) return problem;
  }
  if (auto problem = detail::text_problem("current_step", entry.current_step); !problem.empty()) return problem;
  if (auto problem = steps_problem(entry); !problem.empty()) return problem;
  if (auto problem = detail::record_problem(entry.record); !problem.empty()) return "record." + problem;
  if (entry.record.name != entry.vm) {
    return "vm " + text::quoted(entry.vm) + " differs from record.name " + text::quoted(entry.record.name) +
           ": the record is the one of the VM the operation acts on";
  }
  return {};
}

std::string to_json_text(const JournalEntry& entry) {
  json::array steps;
  for (const auto& step : entry.steps_done) steps.emplace_back(step);
  const json::object object{{"format", kJournalFormat},           {"id", entry.id},
                            {"kind", to_string(entry.kind)},      {"vm", entry.vm},
                            {"started_at", entry.started_at},     {"steps_done", std::move(steps)},
                            {"current_step", entry.current_step}, {"record", detail::record_to_json(entry.record)}};
  return json::serialize(object) + "\n";
}

Result<OperationKind> kind_from(const detail::JsonFields& fields) {
  HA_TRY(const std::string text, fields.string("kind"));
  for (const auto kind : kKinds) {
    if (to_string(kind) == text) return kind;
  }
  return Error{ErrorCode::parse_error,
               "field 'kind' " + text::quoted(text) + " is not one of create, start, stop, reboot, remove"};
}

Result<JournalEntry> entry_from(const json::value& document, const std::string& expected_id) {
  HA_TRY(const auto fields, detail::JsonFields::of(document, ""));
  HA_TRY_STATUS(json_fields::format_version(fields, kJournalFormat));
  JournalEntry out;
  HA_TRY(out.id, fields.string("id"));
  if (out.id != expected_id) {
    return Error{ErrorCode::parse_error, "field 'id' " + text::quoted(out.id) + " differs from the file name"};
  }
  HA_TRY(out.kind, kind_from(fields));
  HA_TRY(out.vm, fields.string("vm"));
  HA_TRY(out.started_at, fields.string("started_at"));
  HA_TRY(out.steps_done, fields.strings("steps_done"));
  HA_TRY(out.current_step, fields.string("current_step"));
  HA_TRY(const auto record, fields.object("record"));
  HA_TRY(out.record, detail::record_from_json(record));
  if (auto problem = entry_problem(out); !problem.empty()) return Error{ErrorCode::parse_error, problem};
  return out;
}

Result<JournalEntry> read_entry(const std::filesystem::path& path, const std::string& id) {
  const auto in_file = [&](const Error& error) {
    return Error{error.code, "journal entry " + path.string() + ": " + error.message +
                                 " (the daemon will not guess what this operation did: repair or remove the file)"};
  };
  if (!detail::is_file_id(id)) return in_file(Error{ErrorCode::parse_error, "the file name is not a valid entry id"});
  auto text = durable::read_file(path, kMaxEntryBytes);
  if (!text.ok()) return text.error();
  boost::system::error_code ec;
  const json::value document = json::parse(*text, ec);
  if (ec) return in_file(Error{ErrorCode::parse_error, "not JSON: " + ec.message()});
  auto entry = entry_from(document, id);
  if (!entry.ok()) return in_file(entry.error());
  return entry;
}

bool oldest_first(const JournalEntry& a, const JournalEntry& b) {
  if (timestamp_before(a.started_at, b.started_at)) return true;
  if (timestamp_before(b.started_at, a.started_at)) return false;
  return a.id < b.id;
}

}  // namespace

std::string_view to_string(OperationKind kind) noexcept {
  switch (kind) {
    case OperationKind::create:
      return "create";
    case OperationKind::start:
      return "start";
    case OperationKind::stop:
      return "stop";
    case OperationKind::reboot:
      return "reboot";
    case OperationKind::remove:
      return "delete";  // the operation's name everywhere else (API, logs); `delete` is a C++ keyword
  }
  return "unknown";
}

const std::vector<std::string_view>& journaled_steps(OperationKind kind) {
  static const std::vector<std::string_view> create = {step::disk, step::seed, step::prepare_devices, step::define,
                                                       step::start};
  static const std::vector<std::string_view> remove = {step::destroy, step::undefine, step::delete_disk,
                                                       step::delete_seed, step::release_devices};
  static const std::vector<std::string_view> none;
  if (kind == OperationKind::create) return create;
  if (kind == OperationKind::remove) return remove;
  return none;
}

Result<Journal> Journal::open(const std::filesystem::path& directory) {
  HA_TRY_STATUS(detail::open_private_directory(directory, "journal"));
  return Journal(directory);
}

Status Journal::write(const JournalEntry& entry) {
  HA_TRY_STATUS(check_id(entry.id));
  if (auto problem = entry_problem(entry); !problem.empty()) {
    return Error{ErrorCode::invalid_argument, "journal entry " + text::quoted(entry.id) + ": " + problem};
  }
  return durable::replace_file(directory_ / (entry.id + std::string(detail::kJsonSuffix)), to_json_text(entry));
}

// Unlinked without syncing the directory: the next entry written fsyncs it, and that makes this
// removal durable too, before the next operation's first step. Until then a removal a power loss
// undoes brings back an operation that had done all it does (committed, or rolled back whole) and
// whose name no later operation has touched: recovered again, its idempotent steps find nothing.
Status Journal::remove(const std::string& id) {
  HA_TRY_STATUS(check_id(id));
  return durable::discard_file(directory_ / (id + std::string(detail::kJsonSuffix)));
}

Result<std::vector<JournalEntry>> Journal::entries() const {
  std::vector<JournalEntry> out;
  // A leftover .tmp is a write that never committed: the crash came before its rename, so the
  // operation's state is the committed <id>.json next to it (or no entry at all).
  HA_TRY_STATUS(
      detail::for_each_json_file(directory_, "journal", [&](const auto& path, const std::string& id) -> Status {
        HA_TRY(auto entry, read_entry(path, id));
        out.push_back(std::move(entry));
        return ok_status();
      }));
  std::sort(out.begin(), out.end(), oldest_first);
  return out;
}

}  // namespace hostagent::state
