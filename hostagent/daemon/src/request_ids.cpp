// daemon/request_ids: create requests' records, in memory by request id, on disk by operation.
#include "request_ids.hpp"

#include <algorithm>
#include <boost/json.hpp>
#include <vector>

#include "daemon_log.hpp"
#include "hostagent/common/sha256.hpp"
#include "hostagent/common/text.hpp"
#include "hostagent/common/time_text.hpp"

namespace hostagent::daemon {
namespace {

namespace json = boost::json;

using state::CreateOutcome;

// When the record's id was freed to count from: its create's failure, or its VM's going.
const std::string& window_start(const state::CreateRequestRecord& record) {
  return record.outcome == CreateOutcome::gone ? record.gone_at : record.ended_at;
}

bool in_window(const state::CreateRequestRecord& record) {
  return record.outcome == CreateOutcome::pending || record.outcome == CreateOutcome::created;
}

}  // namespace

Status RequestIds::load() {
  HA_TRY(auto records, store_.records());
  std::lock_guard lock(mutex_);
  for (auto& record : records) {
    auto [it, inserted] = by_request_id_.try_emplace(record.request_id, record);
    // Never written by this daemon (one record per id); keep the later create's, which a replay met last.
    if (!inserted && timestamp_before(it->second.submitted_at, record.submitted_at)) it->second = std::move(record);
  }
  forget_expired_locked();
  return ok_status();
}

void RequestIds::settle(const std::function<bool(const std::string&, const std::string&)>& made) {
  std::lock_guard lock(mutex_);
  for (auto& [request_id, record] : by_request_id_) {
    const bool exists = made(record.vm, request_id);
    if (record.outcome == CreateOutcome::pending) {
      // Reconcile has run: an interrupted create was finished (the VM exists) or rolled back.
      if (!exists) {
        record.error_code = to_string(ErrorCode::internal);
        record.error = "the daemon stopped before this create ended, and its recovery rolled it back";
      }
      end_locked(record, exists ? CreateOutcome::created : CreateOutcome::failed);
    } else if (record.outcome == CreateOutcome::created && !exists) {
      record.error = "removed while the daemon was down, or outside hostagent";
      end_locked(record, CreateOutcome::gone);
    }
  }
}

std::optional<state::CreateRequestRecord> RequestIds::find(const std::string& request_id) {
  std::lock_guard lock(mutex_);
  const auto it = by_request_id_.find(request_id);
  if (it == by_request_id_.end()) return std::nullopt;
  return it->second;
}

std::optional<state::CreateRequestRecord> RequestIds::find_operation(const std::string& operation) {
  std::lock_guard lock(mutex_);
  for (const auto& [request_id, record] : by_request_id_) {
    if (record.operation == operation) return record;
  }
  return std::nullopt;
}

std::map<std::string, std::string> request_fingerprints(const service::CreateVmRequest& request) {
  json::array macs;
  for (const auto& mac : request.macs) macs.emplace_back(mac.str());
  json::array keys;
  for (const auto& key : request.ssh_authorized_keys) keys.emplace_back(key);
  json::object claim;
  for (const auto& [provider, resources] : request.claim) {
    json::object amounts;
    for (const auto& [rc, amount] : resources) amounts[rc] = amount;
    claim[provider] = std::move(amounts);
  }
  // Each value in one canonical text: JSON, whose arrays keep their order and whose objects here
  // come from sorted maps.
  const std::pair<const char*, json::value> fields[] = {
      {"name", json::value(request.name.str())},
      {"template", json::value(request.template_name.str())},
      {"uuid", json::value(request.uuid ? request.uuid->str() : std::string())},
      {"boot_image", json::value(request.boot_image)},
      {"macs", json::value(std::move(macs))},
      {"ssh_authorized_keys", json::value(std::move(keys))},
      {"user_data", json::value(request.user_data)},
      {"placement", json::value(std::move(claim))},
  };
  std::map<std::string, std::string> out;
  for (const auto& [field, value] : fields) out[field] = sha256_hex(json::serialize(value));
  return out;
}

std::string differing_fields(const service::CreateVmRequest& request, const state::CreateRequestRecord& record) {
  std::string differ;
  const auto note = [&differ](const std::string& field) { differ += (differ.empty() ? "" : ", ") + field; };
  if (record.fingerprints.empty()) {
    if (request.name.str() != record.vm) note("name");
    if (request.template_name.str() != record.template_name) note("template");
    return differ;
  }
  const auto now = request_fingerprints(request);
  for (const char* field :
       {"name", "template", "uuid", "boot_image", "macs", "ssh_authorized_keys", "user_data", "placement"}) {
    const auto was = record.fingerprints.find(field);
    if (was == record.fingerprints.end() || was->second != now.at(field)) note(field);
  }
  return differ;
}

Status RequestIds::accept(const service::OperationView& create, std::map<std::string, std::string> fingerprints) {
  state::CreateRequestRecord record;
  record.fingerprints = std::move(fingerprints);
  record.operation = create.id;
  record.request_id = create.request_id;
  record.vm = create.vm;
  record.template_name = create.template_name;
  record.submitted_at = create.submitted_at;
  HA_TRY_STATUS(store_.write(record));
  std::lock_guard lock(mutex_);
  by_request_id_[record.request_id] = std::move(record);
  forget_expired_locked();
  return ok_status();
}

void RequestIds::ended(const std::string& operation, const Status& outcome) {
  std::lock_guard lock(mutex_);
  for (auto& [request_id, record] : by_request_id_) {
    if (record.operation != operation) continue;
    if (!outcome.ok()) {
      record.error_code = to_string(outcome.error().code);
      record.error = outcome.error().message;
    }
    end_locked(record, outcome.ok() ? CreateOutcome::created : CreateOutcome::failed);
    return;
  }
}

void RequestIds::gone(const std::string& request_id, const std::string& how) {
  std::lock_guard lock(mutex_);
  const auto it = by_request_id_.find(request_id);
  if (it == by_request_id_.end() || it->second.outcome != CreateOutcome::created) return;
  it->second.error = how;
  end_locked(it->second, CreateOutcome::gone);
}

void RequestIds::end_locked(state::CreateRequestRecord& record, CreateOutcome outcome) {
  const auto now = rfc3339(clock_.now());
  if (record.ended_at.empty()) record.ended_at = now;
  if (outcome == CreateOutcome::gone) record.gone_at = now;
  record.outcome = outcome;
  write_logged(record);
}

void RequestIds::write_logged(const state::CreateRequestRecord& record) {
  if (auto written = store_.write(record); !written.ok()) {
    log(LogLevel::warning, "create request " + text::quoted(record.request_id) + ": " + written.error().message +
                               " (a restart settles it from what exists)");
  }
}

// Under the lock: drops ids out of the window, and the oldest ended ones past kMaxEnded.
void RequestIds::forget_expired_locked() {
  const auto horizon = rfc3339(clock_.now() - kWindow);
  std::vector<std::pair<std::string, std::string>> ended;  // (window start, request id)
  for (const auto& [request_id, record] : by_request_id_) {
    if (!in_window(record)) ended.emplace_back(window_start(record), request_id);
  }
  std::sort(ended.begin(), ended.end(), [](const auto& a, const auto& b) {
    if (timestamp_before(a.first, b.first)) return true;
    if (timestamp_before(b.first, a.first)) return false;
    return a.second < b.second;
  });
  std::size_t excess = ended.size() > kMaxEnded ? ended.size() - kMaxEnded : 0;
  for (const auto& [start, request_id] : ended) {
    if (excess == 0 && !timestamp_before(start, horizon)) break;
    if (excess > 0) --excess;
    const auto it = by_request_id_.find(request_id);
    if (auto removed = store_.remove(it->second.operation); !removed.ok()) {
      log(LogLevel::warning, "create request " + text::quoted(request_id) + ": " + removed.error().message);
      continue;  // kept, so memory and disk agree; tried again on the next sweep
    }
    by_request_id_.erase(it);
  }
}

service::OperationView operation_of(const state::CreateRequestRecord& record) {
  service::OperationView view;
  view.id = record.operation;
  view.kind = "create";
  view.vm = record.vm;
  view.request_id = record.request_id;
  view.template_name = record.template_name;
  view.submitted_at = record.submitted_at;
  view.finished_at = record.ended_at;
  switch (record.outcome) {
    case CreateOutcome::pending:
      view.state = "queued";
      break;
    case CreateOutcome::created:
    case CreateOutcome::gone:
      view.state = "succeeded";
      break;
    case CreateOutcome::failed:
      view.state = "failed";
      view.error = Error{error_code_from(record.error_code).value_or(ErrorCode::internal), record.error};
      break;
  }
  return view;
}

}  // namespace hostagent::daemon
