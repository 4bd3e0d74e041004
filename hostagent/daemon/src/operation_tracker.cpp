// daemon/operation_tracker: operations from queued to ended, for the API to poll.
#include "operation_tracker.hpp"

#include <algorithm>
#include <charconv>

#include "daemon_log.hpp"
#include "hostagent/common/time_text.hpp"

namespace hostagent::daemon {
namespace {

state::OperationRecord record_of(const service::OperationView& view) {
  std::vector<state::PhaseRecord> timeline;
  for (const auto& phase : view.timeline) timeline.push_back({phase.name, phase.ended_at, phase.seconds, phase.detail});
  return state::OperationRecord{view.id,
                                view.kind,
                                view.vm,
                                view.request_id,
                                view.template_name,
                                view.state,
                                view.step,
                                view.step_number,
                                view.step_count,
                                view.error ? std::string(to_string(view.error->code)) : "",
                                view.error ? view.error->message : "",
                                view.submitted_at,
                                view.started_at,
                                view.finished_at,
                                view.duration_seconds,
                                std::move(timeline)};
}

}  // namespace

service::OperationView view_of(const state::OperationRecord& record) {
  service::OperationView view;
  view.id = record.id;
  view.kind = record.kind;
  view.vm = record.vm;
  view.request_id = record.request_id;
  view.template_name = record.template_name;
  view.state = record.state;
  view.step = record.step;
  view.step_number = record.step_number;
  view.step_count = record.step_count;
  if (const auto code = error_code_from(record.error_code)) view.error = Error{*code, record.error};
  view.submitted_at = record.submitted_at;
  view.started_at = record.started_at;
  view.finished_at = record.finished_at;
  view.duration_seconds = record.duration_seconds;
  for (const auto& phase : record.timeline)
    view.timeline.push_back({phase.name, phase.ended_at, phase.seconds, phase.detail});
  return view;
}

namespace {

// N of "op-RUN-N"; 0 for an id of another form (a record on disk is not trusted to have this one).
uint64_t sequence_of(const std::string& id) {
  const auto dash = id.rfind('-');
  uint64_t n = 0;
  if (dash == std::string::npos) return n;
  std::from_chars(id.data() + dash + 1, id.data() + id.size(), n);
  return n;
}

bool ended(const service::OperationView& view) {
  return view.state == "succeeded" || view.state == "failed";
}

}  // namespace

Status OperationTracker::load(const std::function<Status(const service::OperationView&)>& interrupted) {
  if (store_ == nullptr) return ok_status();
  HA_TRY(auto records, store_->records());
  const auto now = clock_.now();
  std::vector<service::OperationView> kept;
  std::vector<std::string> expired;
  for (const auto& record : records) {
    auto view = view_of(record);
    if (!ended(view)) {
      const auto outcome = interrupted(view);
      view.state = outcome.ok() ? "succeeded" : "failed";
      if (!outcome.ok()) view.error = outcome.error();
      view.finished_at = rfc3339(now);
      persist(view);
    }
    const auto finished = time_of(view.finished_at).value_or(now);
    if (now - finished > kKeptFor) {
      expired.push_back(view.id);
    } else {
      kept.push_back(std::move(view));
    }
  }
  // list() orders them as they were submitted; the forgetting goes by when each ended.
  std::sort(kept.begin(), kept.end(), [](const service::OperationView& a, const service::OperationView& b) {
    if (timestamp_before(a.submitted_at, b.submitted_at)) return true;
    if (timestamp_before(b.submitted_at, a.submitted_at)) return false;
    return sequence_of(a.id) < sequence_of(b.id);  // the same second: one run's, in its order
  });
  std::vector<std::pair<std::string, std::chrono::steady_clock::time_point>> ends;
  for (const auto& view : kept) {
    const auto age = now - time_of(view.finished_at).value_or(now);
    ends.emplace_back(view.id, clock_.steady_now() - std::chrono::duration_cast<std::chrono::nanoseconds>(age));
  }
  std::sort(ends.begin(), ends.end(), [](const auto& a, const auto& b) { return a.second < b.second; });
  std::vector<std::string> forgotten;
  {
    std::lock_guard lock(mutex_);
    for (const auto& view : kept) {
      insert_locked(view);
      announced_.insert(view.id);
    }
    ended_.insert(ended_.begin(), ends.begin(), ends.end());
    forgotten = forget_old_locked();
  }
  expired.insert(expired.end(), forgotten.begin(), forgotten.end());
  remove_records(expired);
  return ok_status();
}

void OperationTracker::insert_locked(const service::OperationView& view) {
  operations_[view.id] = view;
  order_[view.id] = next_order_++;
}

void OperationTracker::persist(const service::OperationView& view) {
  if (store_ == nullptr) return;
  if (auto written = store_->write(record_of(view)); !written.ok()) {
    log(LogLevel::warning, "operation " + view.id + " could not be kept on disk (" + written.error().message +
                               "): after a restart it would be unknown");
  }
}

void OperationTracker::persist_latest(const std::string& id) {
  if (store_ == nullptr) return;
  // Two writers of one ended operation (its end, a late phase) each write what is newest when they
  // hold persist_mutex_, so the last file written has every phase.
  const std::lock_guard writing(persist_mutex_);
  std::optional<service::OperationView> latest;
  {
    std::lock_guard lock(mutex_);
    const auto it = operations_.find(id);
    if (it != operations_.end()) latest = it->second;
  }
  if (!latest) return;
  persist(*latest);
  keep_start(*latest);
}

// A create that failed made no VM; every other ended create or start is the VM's history, but a
// start that found no VM (gone since it was asked for): that would be a file for a VM that does not
// exist. A domain the daemon did not make never gets a start (VmService refuses it at once).
void OperationTracker::keep_start(const service::OperationView& view) {
  const bool missing = view.error && view.error->code == ErrorCode::not_found;
  const bool start = (view.kind == "start" && !missing) || (view.kind == "create" && view.state == "succeeded");
  if (starts_ == nullptr || !start || view.finished_at.empty()) return;
  if (auto kept = starts_->record(record_of(view)); !kept.ok()) {
    log(LogLevel::warning, "the start history of " + view.vm + " could not be kept (" + kept.error().message +
                               "): vm show loses operation " + view.id + " after the hour");
  }
}

void OperationTracker::remove_records(const std::vector<std::string>& ids) {
  if (store_ == nullptr) return;
  for (const auto& id : ids) {
    if (auto removed = store_->remove(id); !removed.ok()) log(LogLevel::warning, removed.error().message);
  }
}

service::OperationView OperationTracker::enqueue(const std::string& kind, const std::string& vm,
                                                 const std::string& request_id, const std::string& template_name) {
  service::OperationView view;
  std::vector<std::string> forgotten;
  {
    std::lock_guard lock(mutex_);
    forgotten = forget_old_locked();
    view.id = "op-" + run_ + "-" + std::to_string(next_++);
    view.kind = kind;
    view.vm = vm;
    view.request_id = request_id;
    view.template_name = template_name;
    view.state = "queued";
    view.submitted_at = rfc3339(clock_.now());
    insert_locked(view);
  }
  remove_records(forgotten);
  persist(view);
  publish(view);
  return view;
}

std::string OperationTracker::run_tag(std::chrono::system_clock::time_point start) {
  auto micros =
      static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::microseconds>(start.time_since_epoch()).count());
  std::string tag;
  do {
    tag.insert(tag.begin(), "0123456789abcdefghijklmnopqrstuvwxyz"[micros % 36]);
    micros /= 36;
  } while (micros != 0);
  return tag;
}

void OperationTracker::start(const std::string& id) {
  const auto now = clock_.now();
  publish(update(id, [&](service::OperationView& view) {
    view.state = "running";
    view.started_at = rfc3339(now);
    running_by_vm_[view.vm] = id;
    started_[id] = clock_.steady_now();
  }));
}

void OperationTracker::progress(const std::string& vm, const std::string& operation, const std::string& step,
                                int number, int count) {
  std::string id;
  {
    std::lock_guard lock(mutex_);
    progress_by_vm_[vm] = VmProgress{operation, step};
    ++progress_version_;
    if (number == 0) return;
    const auto it = running_by_vm_.find(vm);
    if (it == running_by_vm_.end()) return;  // reconcile's recoveries run outside any operation
    id = it->second;
  }
  publish(update(id, [&](service::OperationView& view) {
    view.step = step;
    view.step_number = number;
    view.step_count = count;
  }));
}

void OperationTracker::phase(const std::string& vm, service::TimelinePhase phase) {
  std::string id;
  {
    std::lock_guard lock(mutex_);
    const auto it = running_by_vm_.find(vm);
    if (it == running_by_vm_.end()) return;  // reconcile's recoveries run outside any operation
    id = it->second;
  }
  publish(update(id, [&](service::OperationView& view) { view.timeline.push_back(std::move(phase)); }));
}

void OperationTracker::late_phase(const std::string& id, service::TimelinePhase phase) {
  std::optional<service::OperationView> view;
  bool ended = false;
  {
    std::lock_guard lock(mutex_);
    const auto it = operations_.find(id);
    if (it == operations_.end()) return;  // forgotten: ended more than an hour ago
    it->second.timeline.push_back(std::move(phase));
    view = it->second;
    ended = !it->second.finished_at.empty();
  }
  if (ended) persist_latest(id);  // a running one's record is written when it ends
  publish(view);
}

std::optional<std::string> OperationTracker::running_id(const std::string& vm) {
  std::lock_guard lock(mutex_);
  const auto it = running_by_vm_.find(vm);
  if (it == running_by_vm_.end()) return std::nullopt;
  return it->second;
}

void OperationTracker::idle(const std::string& vm) {
  std::lock_guard lock(mutex_);
  if (progress_by_vm_.erase(vm) != 0) ++progress_version_;
}

std::optional<OperationTracker::VmProgress> OperationTracker::progress_of(const std::string& vm) {
  std::lock_guard lock(mutex_);
  const auto it = progress_by_vm_.find(vm);
  if (it == progress_by_vm_.end()) return std::nullopt;
  return it->second;
}

void OperationTracker::finish(const std::string& id, const Status& outcome) {
  const auto now = clock_.now();
  const auto ended_view = update(id, [&](service::OperationView& view) {
    view.state = outcome.ok() ? "succeeded" : "failed";
    if (!outcome.ok()) view.error = outcome.error();
    view.finished_at = rfc3339(now);
    if (const auto started = started_.find(id); started != started_.end()) {
      view.duration_seconds = std::chrono::duration<double>(clock_.steady_now() - started->second).count();
      started_.erase(started);
    }
    if (const auto running = running_by_vm_.find(view.vm); running != running_by_vm_.end() && running->second == id) {
      running_by_vm_.erase(running);
      if (progress_by_vm_.erase(view.vm) != 0) ++progress_version_;
    }
    ended_.emplace_back(id, clock_.steady_now());
  });
  if (ended_view) persist_latest(id);
  publish(ended_view);
  {
    std::lock_guard lock(mutex_);
    announced_.insert(id);
  }
  ended_cv_.notify_all();
}

std::optional<service::OperationView> OperationTracker::find(const std::string& id) {
  std::optional<service::OperationView> found;
  std::vector<std::string> forgotten;
  {
    std::lock_guard lock(mutex_);
    forgotten = forget_old_locked();
    const auto it = operations_.find(id);
    if (it != operations_.end()) found = it->second;
  }
  remove_records(forgotten);
  return found;
}

std::optional<service::OperationView> OperationTracker::wait_ended(const std::string& id) {
  std::unique_lock lock(mutex_);
  while (true) {
    const auto it = operations_.find(id);
    if (it == operations_.end()) return std::nullopt;
    if (announced_.count(id) != 0) return it->second;
    ended_cv_.wait(lock);
  }
}

std::vector<service::OperationView> OperationTracker::list() {
  std::vector<std::pair<uint64_t, service::OperationView>> numbered;
  std::vector<std::string> forgotten;
  {
    std::lock_guard lock(mutex_);
    forgotten = forget_old_locked();
    for (const auto& [id, view] : operations_) numbered.emplace_back(order_.at(id), view);
  }
  remove_records(forgotten);
  std::sort(numbered.begin(), numbered.end(), [](const auto& a, const auto& b) { return a.first > b.first; });
  std::vector<service::OperationView> views;
  views.reserve(numbered.size());
  for (auto& [number, view] : numbered) views.push_back(std::move(view));
  return views;
}

std::optional<service::OperationView> OperationTracker::update(
    const std::string& id, const std::function<void(service::OperationView&)>& change) {
  std::lock_guard lock(mutex_);
  const auto it = operations_.find(id);
  HA_ASSERT(it != operations_.end());  // an operation is forgotten only after it ended
  change(it->second);
  return it->second;
}

std::vector<std::string> OperationTracker::forget_old_locked() {
  std::vector<std::string> forgotten;
  const auto now = clock_.steady_now();
  while (!ended_.empty() && (ended_.size() > kKeptEnded || now - ended_.front().second > kKeptFor)) {
    const auto& id = ended_.front().first;
    operations_.erase(id);
    order_.erase(id);
    announced_.erase(id);
    forgotten.push_back(id);
    ended_.pop_front();
  }
  return forgotten;
}

void OperationTracker::publish(const std::optional<service::OperationView>& view) {
  if (!view) return;
  service::ServiceEvent event;
  event.kind = service::ServiceEvent::Kind::operation;
  event.vm = view->vm;
  event.operation = view;
  events_.publish(event);
}

}  // namespace hostagent::daemon
