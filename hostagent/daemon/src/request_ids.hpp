// daemon/request_ids (private): what a create's request id means, for as long as it means it. Every
// create that carries one is recorded durably before it runs (state/create_requests), and the
// record follows what became of it: created, failed, or created and since gone. A replay of the id
// is answered from the record, across deletes and restarts: it never makes a second VM and never
// reports a VM that is gone as made.
//
// The window: a record is kept while its VM exists, and for kWindow after its create failed or its
// VM went (at most kMaxEnded such records, the oldest dropped first). After that the id is free.
#pragma once

#include <chrono>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <string>

#include "hostagent/daemon/clock.hpp"
#include "hostagent/service/vm_service.hpp"
#include "hostagent/state/create_requests.hpp"

namespace hostagent::daemon {

// Each field of a create request by the SHA-256 of its value as the service received it: what a
// replay of its request id is compared with (issue 43: a replay that matched on name and template
// alone was answered with a create of another uuid, image, keys or MACs).
std::map<std::string, std::string> request_fingerprints(const service::CreateVmRequest& request);
// The fields whose fingerprints differ, in order ("uuid, macs"); "" when they match. A record of an
// earlier release (no fingerprints) is compared on its VM and template alone.
std::string differing_fields(const service::CreateVmRequest& request, const state::CreateRequestRecord& record);

class RequestIds {
 public:
  static constexpr std::chrono::hours kWindow{24 * 7};
  static constexpr std::size_t kMaxEnded = 10000;

  RequestIds(state::CreateRequests store, Clock& clock) : store_(std::move(store)), clock_(clock) {}

  // Reads the records on disk: an unreadable one is an error naming its file.
  Status load();
  // After reconcile, with `made(vm, request_id)` saying whether that VM exists, made by the create
  // that carried that id: a create a restart interrupted is created or failed by what exists, and a
  // VM removed while the daemon was down (or outside hostagent) is gone.
  void settle(const std::function<bool(const std::string&, const std::string&)>& made);

  std::optional<state::CreateRequestRecord> find(const std::string& request_id);
  std::optional<state::CreateRequestRecord> find_operation(const std::string& operation);

  // Before the create runs: durably, or the create must not run (a restart would forget the id).
  // `fingerprints`: the request's, which a replay must match.
  Status accept(const service::OperationView& create, std::map<std::string, std::string> fingerprints);
  // When it ends. A write that fails is logged: a restart settles the record from what exists.
  void ended(const std::string& operation, const Status& outcome);
  // The VM the create with this request id made is gone (`how`: "deleted by operation op-..").
  void gone(const std::string& request_id, const std::string& how);

 private:
  void write_logged(const state::CreateRequestRecord& record);
  void forget_expired_locked();
  void end_locked(state::CreateRequestRecord& record, state::CreateOutcome outcome);

  state::CreateRequests store_;
  Clock& clock_;
  std::mutex mutex_;
  std::map<std::string, state::CreateRequestRecord> by_request_id_;
};

// The create's operation as the API shows it, from its record (the tracker forgets ended
// operations after an hour, and a restart forgets them all).
service::OperationView operation_of(const state::CreateRequestRecord& record);

}  // namespace hostagent::daemon
