// daemon/operation_tracker: operations from queued to ended, for the API to poll.
#include "operation_tracker.hpp"

namespace hostagent::daemon {

OperationView OperationTracker::enqueue(const std::string& kind, const std::string& vm, const std::string& request_id,
                                        const std::string& template_name) {
  OperationView view;
  {
    std::lock_guard lock(mutex_);
    forget_old_locked();
    view.id = "op-" + run_ + "-" + std::to_string(next_++);
    view.kind = kind;
    view.vm = vm;
    view.request_id = request_id;
    view.template_name = template_name;
    view.state = "queued";
    view.submitted_at = rfc3339(clock_.now());
    operations_.emplace(view.id, view);
  }
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
  publish(update(id, [&](OperationView& view) {
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
    if (number == 0) return;
    const auto it = running_by_vm_.find(vm);
    if (it == running_by_vm_.end()) return;  // reconcile's recoveries run outside any operation
    id = it->second;
  }
  publish(update(id, [&](OperationView& view) {
    view.step = step;
    view.step_number = number;
    view.step_count = count;
  }));
}

void OperationTracker::idle(const std::string& vm) {
  std::lock_guard lock(mutex_);
  progress_by_vm_.erase(vm);
}

std::optional<OperationTracker::VmProgress> OperationTracker::progress_of(const std::string& vm) {
  std::lock_guard lock(mutex_);
  const auto it = progress_by_vm_.find(vm);
  if (it == progress_by_vm_.end()) return std::nullopt;
  return it->second;
}

void OperationTracker::finish(const std::string& id, const Status& outcome) {
  const auto now = clock_.now();
  publish(update(id, [&](OperationView& view) {
    view.state = outcome.ok() ? "succeeded" : "failed";
    if (!outcome.ok()) view.error = outcome.error();
    view.finished_at = rfc3339(now);
    if (const auto started = started_.find(id); started != started_.end()) {
      view.duration_seconds = std::chrono::duration<double>(clock_.steady_now() - started->second).count();
      started_.erase(started);
    }
    if (const auto running = running_by_vm_.find(view.vm); running != running_by_vm_.end() && running->second == id) {
      running_by_vm_.erase(running);
      progress_by_vm_.erase(view.vm);
    }
    ended_.emplace_back(id, clock_.steady_now());
  }));
  {
    std::lock_guard lock(mutex_);
    announced_.insert(id);
  }
  ended_cv_.notify_all();
}

std::optional<OperationView> OperationTracker::find(const std::string& id) {
  std::lock_guard lock(mutex_);
  forget_old_locked();
  const auto it = operations_.find(id);
  if (it == operations_.end()) return std::nullopt;
  return it->second;
}

std::optional<OperationView> OperationTracker::wait_ended(const std::string& id) {
  std::unique_lock lock(mutex_);
  while (true) {
    const auto it = operations_.find(id);
    if (it == operations_.end()) return std::nullopt;
    if (announced_.count(id) != 0) return it->second;
    ended_cv_.wait(lock);
  }
}

std::vector<OperationView> OperationTracker::list() {
  std::lock_guard lock(mutex_);
  forget_old_locked();
  std::vector<std::pair<uint64_t, OperationView>> numbered;
  // Every id here was made by enqueue ("op-RUN-N"): N after the last '-' orders them.
  for (const auto& [id, view] : operations_) numbered.emplace_back(std::stoull(id.substr(id.rfind('-') + 1)), view);
  std::sort(numbered.begin(), numbered.end(), [](const auto& a, const auto& b) { return a.first > b.first; });
  std::vector<OperationView> views;
  views.reserve(numbered.size());
  for (auto& [number, view] : numbered) views.push_back(std::move(view));
  return views;
}

std::optional<OperationView> OperationTracker::update(const std::string& id,
                                                      const std::function<void(OperationView&)>& change) {
  std::lock_guard lock(mutex_);
  const auto it = operations_.find(id);
  HA_ASSERT(it != operations_.end());  // an operation is forgotten only after it ended
  change(it->second);
  return it->second;
}

void OperationTracker::forget_old_locked() {
  const auto now = clock_.steady_now();
  while (!ended_.empty() && (ended_.size() > kKeptEnded || now - ended_.front().second > kKeptFor)) {
    const auto it = operations_.find(ended_.front().first);
    if (it != operations_.end()) operations_.erase(it);
    announced_.erase(ended_.front().first);
    ended_.pop_front();
  }
}

void OperationTracker::publish(const std::optional<OperationView>& view) {
  if (!view) return;
  ServiceEvent event;
  event.kind = ServiceEvent::Kind::operation;
  event.vm = view->vm;
  event.operation = view;
  events_.publish(event);
}

}  // namespace hostagent::daemon
