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

// Orders operations by one of their timestamps; within one second, by their ids' sequence (one
// run's operations, in its order).
auto in_order_of(std::string service::OperationView::*when) {
  return [when](const service::OperationView& a, const service::OperationView& b) {
    if (timestamp_before(a.*when, b.*when)) return true;
    if (timestamp_before(b.*when, a.*when)) return false;
    return sequence_of(a.id) < sequence_of(b.id);
  };
}

}  // namespace

// Each VM's file of an earlier release's start history: the records the store lacks are written to
// it, then the file goes. A file that cannot be read or moved stays, said in the log: the VM's
// history lacks it, and the daemon starts.
void OperationTracker::move_older_starts(state::StartHistory& older, std::vector<state::OperationRecord>& records) {
  auto vms = older.vms();
  if (!vms.ok()) {
    log(LogLevel::warning, "the older start histories stay unread: " + vms.error().message);
    return;
  }
  std::set<std::string> known;
  for (const auto& record : records) known.insert(record.id);
  for (const auto& vm : *vms) {
    if (auto moved = move_older_history(older, vm, known, records); !moved.ok()) {
      log(LogLevel::warning, "the start history of " + vm + " stays where it was: " + moved.error().message);
    }
  }
}

Status OperationTracker::move_older_history(state::StartHistory& older, const std::string& vm,
                                            std::set<std::string>& known,
                                            std::vector<state::OperationRecord>& records) {
  HA_TRY(const auto starts, older.starts(vm));
  for (const auto& start : starts) {
    if (!known.insert(start.id).second) continue;  // its operation's own record is on disk
    HA_TRY_STATUS(store_->write(start));
    records.push_back(start);
  }
  return older.forget(vm);
}

Status OperationTracker::load(const std::function<Status(const service::OperationView&)>& interrupted,
                              state::StartHistory* older_starts) {
  if (store_ == nullptr) return ok_status();
  HA_TRY(auto records, store_->records());
  if (older_starts != nullptr) move_older_starts(*older_starts, records);
  const auto now = clock_.now();
  std::vector<service::OperationView> kept;
  std::vector<service::OperationView> past_hour;
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
    (now - finished > kKeptFor ? past_hour : kept).push_back(std::move(view));
  }
  // list() orders them as they were submitted; the forgetting goes by when each ended.
  std::sort(kept.begin(), kept.end(), in_order_of(&service::OperationView::submitted_at));
  std::vector<std::pair<std::string, std::chrono::steady_clock::time_point>> ends;
  for (const auto& view : kept) {
    const auto age = now - time_of(view.finished_at).value_or(now);
    ends.emplace_back(view.id, clock_.steady_now() - std::chrono::duration_cast<std::chrono::nanoseconds>(age));
  }
  std::sort(ends.begin(), ends.end(), [](const auto& a, const auto& b) { return a.second < b.second; });
  // Each VM's history is made again from its starts on disk, in the order they ended.
  std::vector<service::OperationView> by_end = past_hour;
  by_end.insert(by_end.end(), kept.begin(), kept.end());
  std::sort(by_end.begin(), by_end.end(), in_order_of(&service::OperationView::finished_at));
  std::vector<std::string> removed;
  {
    std::lock_guard lock(mutex_);
    for (const auto& view : kept) {
      insert_locked(view);
      announced_.insert(view.id);
    }
    ended_.insert(ended_.begin(), ends.begin(), ends.end());
    // What a history lets go here is past the hour (the rest is in operations_ already), so the
    // records removed are those past the hour that no history kept, and those forgetting drops.
    for (const auto& view : by_end) (void)keep_start_locked(view);
    removed = forget_old_locked();
    for (const auto& view : past_hour) {
      if (kept_starts_.count(view.id) == 0) removed.push_back(view.id);
    }
  }
  remove_records(removed);
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
  // Two writers of one ended operation (its end, a late phase) each write what is newest when they
  // hold persist_mutex_, so the last file written has every phase.
  const std::lock_guard writing(persist_mutex_);
  std::optional<service::OperationView> latest;
  std::vector<std::string> let_go;
  {
    std::lock_guard lock(mutex_);
    const auto it = operations_.find(id);
    if (it == operations_.end()) return;
    latest = it->second;
    let_go = keep_start_locked(*latest);
  }
  persist(*latest);
  remove_records(let_go);
}

namespace {

// A create that failed made no VM; every other ended create or start is the VM's history, but a
// start that found no VM (gone since it was asked for): that would be a history of a VM that does
// not exist. A domain the daemon did not make never gets a start (VmService refuses it at once).
bool is_start(const service::OperationView& view) {
  const bool missing = view.error && view.error->code == ErrorCode::not_found;
  const bool start = (view.kind == "start" && !missing) || (view.kind == "create" && view.state == "succeeded");
  return start && !view.finished_at.empty();
}

}  // namespace

std::vector<std::string> OperationTracker::keep_start_locked(const service::OperationView& view) {
  std::vector<std::string> removed;
  if (!is_start(view)) return removed;
  auto& history = starts_by_vm_[view.vm];
  const auto same = std::find_if(history.begin(), history.end(), [&](const auto& kept) { return kept.id == view.id; });
  if (same != history.end()) {
    *same = view;  // in its place: its phases came after it ended
    return removed;
  }
  // A create begins its VM's history: what is there is an earlier VM's of that name (a delete a
  // crash cut short before it forgot them).
  while (view.kind == "create" && !history.empty()) {
    let_go_locked(history.front(), removed);
    history.pop_front();
  }
  history.push_back(view);
  kept_starts_.insert(view.id);
  while (history.size() > kKeptStarts) {
    let_go_locked(history.front(), removed);
    history.pop_front();
  }
  return removed;
}

// A start leaves the history: its record goes too once the operation is past the hour.
void OperationTracker::let_go_locked(const service::OperationView& start, std::vector<std::string>& removed) {
  kept_starts_.erase(start.id);
  if (operations_.count(start.id) == 0) removed.push_back(start.id);
}

std::vector<service::OperationView> OperationTracker::starts_of(const std::string& vm) {
  std::lock_guard lock(mutex_);
  const auto it = starts_by_vm_.find(vm);
  if (it == starts_by_vm_.end()) return {};
  return {it->second.rbegin(), it->second.rend()};
}

void OperationTracker::forget_starts(const std::string& vm) {
  std::vector<std::string> removed;
  {
    std::lock_guard lock(mutex_);
    const auto it = starts_by_vm_.find(vm);
    if (it == starts_by_vm_.end()) return;
    for (const auto& start : it->second) let_go_locked(start, removed);
    starts_by_vm_.erase(it);
  }
  remove_records(removed);
}

std::vector<std::string> OperationTracker::vms_with_starts() {
  std::lock_guard lock(mutex_);
  std::vector<std::string> vms;
  for (const auto& [vm, history] : starts_by_vm_) vms.push_back(vm);
  return vms;
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
  const auto steady_now = clock_.steady_now();
  const auto end = [&](service::OperationView& view) {
    view.state = outcome.ok() ? "succeeded" : "failed";
    if (!outcome.ok()) view.error = outcome.error();
    view.finished_at = rfc3339(now);
    if (const auto started = started_.find(id); started != started_.end()) {
      view.duration_seconds = std::chrono::duration<double>(steady_now - started->second).count();
    }
  };
  service::OperationView ended_view;
  {
    std::lock_guard lock(mutex_);
    const auto it = operations_.find(id);
    HA_ASSERT(it != operations_.end());  // an operation is forgotten only after it ended
    ended_view = it->second;
    end(ended_view);
  }
  // Its observers (the metrics, the event streams) hear of the end before a reader can see it: a
  // client that polled the operation to its end and then scrapes finds it counted.
  publish(ended_view);
  update(id, [&](service::OperationView& view) {
    end(view);  // onto the view as it is now: a guest phase may have come in meanwhile
    started_.erase(id);
    if (const auto running = running_by_vm_.find(view.vm); running != running_by_vm_.end() && running->second == id) {
      running_by_vm_.erase(running);
      if (progress_by_vm_.erase(view.vm) != 0) ++progress_version_;
    }
    ended_.emplace_back(id, steady_now);
  });
  persist_latest(id);
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
    if (kept_starts_.count(id) == 0) forgotten.push_back(id);  // a start's record stays with its history
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
