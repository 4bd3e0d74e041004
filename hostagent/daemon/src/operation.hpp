// daemon/operation (private): an operation as a list of named steps, journaled. Before its first
// step the journal holds the operation and its record, so a crash at any point leaves enough on
// disk to finish it or undo it whole (reconcile.cpp); an operation that is undone writes its entry
// again at commit, after which a crash only finishes it. On a failed step, the steps that may have
// left effects are undone, newest first.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "daemon_log.hpp"
#include "hostagent/state/journal.hpp"
#include "timeline.hpp"
#include "vm_work.hpp"

namespace hostagent::daemon {

struct Step {
  std::string name;
  std::function<Status()> run;
};

// Undoes one step by name; must be idempotent (it may run for a step that never took effect).
using UndoStep = std::function<Status(const std::string& step)>;

class Operation {
 public:
  // `timeline`, when given, gets each step's end as a phase of its name (unless the step marked
  // its own phases).
  Operation(Recording& recording, state::OperationKind kind, state::VmRecord& record, Timeline* timeline = nullptr);

  // Runs the steps in order. On failure with an undo, rolls back and removes the journal entry when
  // the rollback completed (else keeps it, for reconcile to finish). Without an undo (operations
  // that are finished forward, like delete), the entry stays for reconcile to complete.
  Status run(const std::vector<Step>& steps, const UndoStep& undo);
  // After a failed run: whether the journal still holds the operation (rollback incomplete, or an
  // operation finished forward), so what it holds must stay reserved until reconcile is done.
  bool left_for_reconcile() const { return left_for_reconcile_; }

 private:
  bool must_write(const std::string& step, int number, bool undone) const;
  Status begin_step(const std::string& step, int number, int count, bool undone);
  Status roll_back(const Error& failure, bool failed_step_began, const UndoStep& undo);
  LogContext log_context() const;  // the VM and the operation's kind, for the journal

  Recording& recording_;
  state::VmRecord& record_;
  Timeline* const timeline_;
  state::JournalEntry entry_;
  bool left_for_reconcile_ = false;
};

}  // namespace hostagent::daemon
