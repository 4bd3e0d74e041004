// daemon/operation: journaled steps with rollback.
#include "operation.hpp"

#include "daemon_log.hpp"

namespace hostagent::daemon {

Operation::Operation(Recording& recording, state::OperationKind kind, state::VmRecord& record, Timeline* timeline)
    : recording_(recording), record_(record), timeline_(timeline) {
  const auto now = recording.clock.now();
  const auto serial = recording.serial.fetch_add(1);
  entry_.id = std::string(state::to_string(kind)) + "." + record.name + "." +
              std::to_string(std::chrono::duration_cast<std::chrono::microseconds>(now.time_since_epoch()).count()) +
              "." + std::to_string(serial);
  entry_.kind = kind;
  entry_.vm = record.name;
  entry_.started_at = rfc3339(now);
}

LogContext Operation::log_context() const {
  return {.vm = record_.name, .operation = std::string(state::to_string(entry_.kind))};
}

// The entry is written when what a crash would leave reconcile to do changes, not before every
// step: at the first step (from here on an operation is finished forward, or undone whole: every
// undo is idempotent and touches only what is this record's, vm_steps.hpp), when the record changed
// under a step, and at commit for an operation that is undone (from there on a crash only finishes
// it). One write per create and per delete, two for a create that commits.
bool Operation::must_write(const std::string& step, int number, bool undone) const {
  if (number == 1 || !(entry_.record == record_)) return true;
  return undone && step == state::step::commit;
}

Status Operation::begin_step(const std::string& step, int number, int count, bool undone) {
  const bool write = must_write(step, number, undone);
  entry_.current_step = step;
  entry_.record = record_;
  if (write) HA_TRY_STATUS(recording_.journal.write(entry_));
  recording_.operations.progress(record_.name, std::string(state::to_string(entry_.kind)), step, number, count);
  if (recording_.hook != nullptr)
    recording_.hook->before_step(std::string(state::to_string(entry_.kind)), record_.name, step);
  return ok_status();
}

Status Operation::run(const std::vector<Step>& steps, const UndoStep& undo) {
  const int count = static_cast<int>(steps.size()) + 1;  // and commit
  int number = 0;
  for (const auto& step : steps) {
    if (auto begun = begin_step(step.name, ++number, count, bool(undo)); !begun.ok()) {
      return roll_back(begun.error(), false, undo);
    }
    const int marks = timeline_ != nullptr ? timeline_->marks() : 0;
    if (auto done = step.run(); !done.ok()) return roll_back(done.error(), true, undo);
    if (timeline_ != nullptr && timeline_->marks() == marks) timeline_->mark(step.name);
    entry_.steps_done.push_back(step.name);
  }
  // Recorded like a step, so a crash from here on finds every step done and only finishes.
  if (auto committing = begin_step(std::string(state::step::commit), count, count, bool(undo)); !committing.ok()) {
    return roll_back(committing.error(), false, undo);
  }
  if (auto removed = recording_.journal.remove(entry_.id); !removed.ok()) {
    // Done, but a stale entry stays: reconcile sees every step done and only removes it.
    log(LogLevel::warning,
        "operation " + entry_.id + " finished but its journal entry stays: " + removed.error().message, log_context());
  }
  return ok_status();
}

Status Operation::roll_back(const Error& failure, bool failed_step_began, const UndoStep& undo) {
  const std::string what = std::string(state::to_string(entry_.kind)) + " " + record_.name;
  if (!undo) {
    left_for_reconcile_ = true;
    log(LogLevel::error,
        what + " stopped at step " + entry_.current_step + ": " + failure.message +
            "; the journal keeps it, to be finished at the next reconcile",
        log_context());
    return failure;
  }
  std::vector<std::string> to_undo;
  if (failed_step_began) to_undo.push_back(entry_.current_step);
  to_undo.insert(to_undo.end(), entry_.steps_done.rbegin(), entry_.steps_done.rend());
  std::string incomplete;
  for (const auto& step : to_undo) {
    if (auto undone = undo(step); !undone.ok()) incomplete += " " + step + ": " + undone.error().message + ";";
  }
  if (!incomplete.empty()) {
    left_for_reconcile_ = true;
    log(LogLevel::error, what + ": rollback incomplete:" + incomplete + " the journal keeps it for reconcile",
        log_context());
    return Error{failure.code, failure.message + " (rollback incomplete:" + incomplete +
                                   " hostagent retries it when libvirt is reachable and at its next start)"};
  }
  if (auto removed = recording_.journal.remove(entry_.id); !removed.ok()) {
    log(LogLevel::warning, what + " rolled back but its journal entry stays: " + removed.error().message,
        log_context());
  }
  log(LogLevel::info,
      what + " failed at step " + (failed_step_began ? entry_.current_step : "journal") +
          " and was rolled back: " + failure.message,
      log_context());
  return failure;
}

}  // namespace hostagent::daemon
