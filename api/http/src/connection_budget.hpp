// api/http connection_budget: who may hold one of the server's connections, so that no client alone
// can take the API away from the others. The server asks it at accept and tells it each time a
// connection changes phase; it answers with plain values (admit, probation, refuse; which
// connection to evict). It does no I/O and keeps no clock of its own: time is handed in.
//
// The rules (docs/api.md, "Connections"):
//  - max_connections is every connection held; the last health_reserve of them are the reserve.
//  - A connection takes a general slot while one is free. When none is, the oldest connection that
//    is waiting for its request (awaiting: nothing sent yet, or a request not yet whole) is evicted
//    to make room, else the oldest idle keep-alive; a busy one (its handler runs, its answer is
//    being written) or an event stream never is. Stalled clients can so hold slots only until
//    someone else needs them, whatever they renew.
//  - With no general slot to take, a connection goes on probation in the reserve: it is read, and
//    only a health probe is served; any other request is answered 503 with Retry-After. Load is
//    shed before the budget is spent, and the probes are answered while it is.
//  - With the reserve full too (and nothing to evict), the connection is refused at once (503).
//  - Over TCP, one peer address holds at most max_per_peer connections; unix socket peers are not
//    counted by peer (whoever can open the socket is an operator).
//  - At most max_event_streams connections are event streams.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <utility>

namespace hostagent::api::detail {

struct BudgetLimits {
  int max_connections = 256;
  int health_reserve = 16;  // of max_connections; at least 1, below max_connections
  int max_per_peer = 64;    // TCP, per peer address
  int max_event_streams = 32;
};

enum class Admission {
  admitted,      // a general slot
  probation,     // a reserve slot: health probes only, then closed
  refused_peer,  // this TCP peer holds max_per_peer connections
  refused_full,  // every slot is held and none can be evicted
};

enum class Phase {
  awaiting,  // accepted, or reading a request that is not whole yet: evictable
  idle,      // a keep-alive connection between requests: evictable
  busy,      // its request is whole: the handler runs or the answer is being written
  stream,    // an event stream
};

struct BudgetCounts {
  int general = 0;
  int probation = 0;
  int streams = 0;
  std::uint64_t evicted = 0;       // since start
  std::uint64_t refused_peer = 0;  // since start
  std::uint64_t refused_full = 0;  // since start
};

class ConnectionBudget {
 public:
  using Id = std::uint64_t;
  using Time = std::chrono::steady_clock::time_point;

  explicit ConnectionBudget(BudgetLimits limits) : limits_(limits) {}

  struct Decision {
    Admission admission = Admission::refused_full;
    std::optional<Id> evict;  // this connection lost its slot to the new one: end it
  };
  // A new connection `id` from `peer` ("" for a unix socket peer); admitted connections start
  // awaiting. Refused ones hold nothing.
  Decision admit(Id id, const std::string& peer, Time now);

  // The connection moved to `phase`. False when it no longer holds a slot (it was evicted, or it
  // left): the caller ends it. Entering stream is refused (false, nothing changed) when
  // max_event_streams are open; `*at_stream_cap` then says so.
  bool enter(Id id, Phase phase, Time now, bool* at_stream_cap = nullptr);

  // The connection gives its slot back (closing, or lingering after its last answer). Idempotent.
  void leave(Id id);

  bool on_probation(Id id) const;
  BudgetCounts counts() const;
  const BudgetLimits& limits() const { return limits_; }

 private:
  struct Entry {
    std::string peer;
    bool probation = false;
    Phase phase = Phase::awaiting;
    Time since;
  };
  using Queue = std::set<std::pair<Time, Id>>;  // oldest first

  int general_slots() const { return limits_.max_connections - limits_.health_reserve; }
  Queue* queue_of(Phase phase);
  std::optional<Id> oldest_evictable() const;
  void erase(std::map<Id, Entry>::iterator it);
  void insert(Id id, Entry entry);

  const BudgetLimits limits_;
  mutable std::mutex mutex_;
  std::map<Id, Entry> entries_;
  std::map<std::string, int> per_peer_;
  Queue awaiting_;
  Queue idle_;
  BudgetCounts counts_;
};

}  // namespace hostagent::api::detail
