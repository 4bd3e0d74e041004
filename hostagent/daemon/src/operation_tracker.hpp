// daemon/operation_tracker (private): the operations the API polls, and what each VM is doing
// now: the one in-memory record of progress (the journal keeps the durable one, for recovery).
// Each submitted command gets an id and is followed from queued through its steps to its end;
// ended ones are kept for an hour (at most kKeptEnded of them) so a control plane that polls late
// still learns the outcome. Each is written to disk when queued and when it ends
// (state/operation_records), so that history survives a restart: one that never ended was cut
// short by the stop, and ends at the next start with what recovery made of it. A VM's last
// kKeptStarts creates and starts are its start history: kept past the hour, their records with
// them, until the VM goes (forget_starts). That record is the one write of a start's end.
#pragma once

#include <atomic>
#include <condition_variable>
#include <deque>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "event_hub.hpp"
#include "hostagent/daemon/clock.hpp"
#include "hostagent/service/vm_service.hpp"
#include "hostagent/state/operation_records.hpp"

namespace hostagent::daemon {

// An operation as its record on disk holds it (the start history's too).
service::OperationView view_of(const state::OperationRecord& record);

class OperationTracker {
 public:
  static constexpr std::size_t kKeptEnded = 1000;
  static constexpr std::chrono::hours kKeptFor{1};
  static constexpr std::size_t kKeptStarts = 10;  // per VM: its start history

  // store: where operations are kept across restarts; null keeps them in memory only.
  OperationTracker(Clock& clock, EventHub& events, state::OperationRecords* store = nullptr)
      : clock_(clock), events_(events), store_(store), run_(run_tag(clock.now())) {}

  // At start, after reconcile and before any enqueue: the operations an earlier run left, those
  // ended within the hour kept, and each VM's starts; one that never ended ends now with what
  // `interrupted` says it came to. Fails when a record cannot be read. older_starts: the start
  // history an earlier release wrote apart, its records moved into the store first.
  Status load(const std::function<Status(const service::OperationView&)>& interrupted,
              state::StartHistory* older_starts = nullptr);

  // The VM's start history, newest first: its create, then each start, as they ended.
  std::vector<service::OperationView> starts_of(const std::string& vm);
  // The VM is gone: its history goes, with the records of its starts past the hour.
  void forget_starts(const std::string& vm);
  // The VMs that have a start history.
  std::vector<std::string> vms_with_starts();

  service::OperationView enqueue(const std::string& kind, const std::string& vm, const std::string& request_id,
                                 const std::string& template_name);
  void start(const std::string& id);
  // What `vm` is doing: `operation` at `step` (reconcile's recovery of one, too). When the VM has a
  // running operation and number > 0, that operation's view is at step `number` of `count`.
  void progress(const std::string& vm, const std::string& operation, const std::string& step, int number = 0,
                int count = 0);
  // The running operation of `vm` ended a phase of its timeline; published like a step.
  void phase(const std::string& vm, service::TimelinePhase phase);
  // A phase seen after its operation may have ended (the guest's own: daemon/guest_watch): added to
  // that operation, kept with its record, published. Nothing when the operation is forgotten.
  void late_phase(const std::string& id, service::TimelinePhase phase);
  // The id of the operation `vm` runs now; nullopt when none.
  std::optional<std::string> running_id(const std::string& vm);
  // `vm` is doing nothing now. finish() says so too, for an operation that ended without saying it.
  void idle(const std::string& vm);
  struct VmProgress {
    std::string operation;
    std::string step;
  };
  // nullopt when the VM is idle: then an event about it was not caused by hostagent.
  std::optional<VmProgress> progress_of(const std::string& vm);
  // Moves with every change to what progress_of() answers, for any VM.
  uint64_t progress_version() const { return progress_version_.load(std::memory_order_acquire); }
  void finish(const std::string& id, const Status& outcome);

  std::optional<service::OperationView> find(const std::string& id);
  // The operation once it has ended and its end has been published to the event sinks, so a waiter
  // that also subscribed has seen every event of it; nullopt when it is unknown (or was forgotten
  // before it could be seen ended: 1000 newer operations ended first).
  std::optional<service::OperationView> wait_ended(const std::string& id);
  std::vector<service::OperationView> list();  // newest first

 private:
  // Each returns the view to publish, taken under the lock; publishing happens after it is released.
  std::optional<service::OperationView> update(const std::string& id,
                                               const std::function<void(service::OperationView&)>& change);
  // Forgets ended operations past the hour or beyond kKeptEnded; returns their ids, whose records
  // the caller removes once the lock is released, but for the starts a VM's history keeps.
  std::vector<std::string> forget_old_locked();
  void remove_records(const std::vector<std::string>& ids);
  void persist(const service::OperationView& view);
  // Writes the operation as it is now (nothing once forgotten), and keeps it in its VM's start
  // history when it is one.
  void persist_latest(const std::string& id);
  // Returns the ids whose records the caller removes once the lock is released: those the history
  // let go that are past the hour.
  std::vector<std::string> keep_start_locked(const service::OperationView& view);
  void let_go_locked(const service::OperationView& start, std::vector<std::string>& removed);
  void move_older_starts(state::StartHistory& older, std::vector<state::OperationRecord>& records);
  Status move_older_history(state::StartHistory& older, const std::string& vm, std::set<std::string>& known,
                            std::vector<state::OperationRecord>& records);
  void insert_locked(const service::OperationView& view);
  // Ids are "op-RUN-N": N counts this run's operations, RUN is the microsecond this run began in
  // base 36, so an id never names two operations across restarts (the audit log, a control plane's
  // records and the journal's files keep them).
  static std::string run_tag(std::chrono::system_clock::time_point start);
  void publish(const std::optional<service::OperationView>& view);

  Clock& clock_;
  EventHub& events_;
  state::OperationRecords* const store_;
  std::mutex mutex_;
  std::mutex persist_mutex_;          // taken before mutex_, never inside it
  std::condition_variable ended_cv_;  // notified by finish() once the end is published
  std::set<std::string> announced_;   // ended operations whose end has been published
  const std::string run_;
  uint64_t next_ = 1;
  uint64_t next_order_ = 1;                // list()'s order: loaded ones first, as they were submitted
  std::map<std::string, uint64_t> order_;  // by id
  std::map<std::string, service::OperationView> operations_;
  std::map<std::string, std::chrono::steady_clock::time_point> started_;  // running ones
  std::map<std::string, std::string> running_by_vm_;                      // one at a time per VM (its queue is a FIFO)
  std::map<std::string, VmProgress> progress_by_vm_;                      // busy VMs only
  std::atomic<uint64_t> progress_version_{0};                             // bumped under mutex_
  std::deque<std::pair<std::string, std::chrono::steady_clock::time_point>> ended_;  // oldest first
  // Each VM's start history, oldest first; a record stays on disk while it is here or in operations_.
  std::map<std::string, std::deque<service::OperationView>> starts_by_vm_;
  std::set<std::string> kept_starts_;  // the ids in starts_by_vm_
};

}  // namespace hostagent::daemon
