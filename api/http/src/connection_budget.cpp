// api/http connection_budget: the slots, the reserve, the peers and the eviction order.
#include "connection_budget.hpp"

#include "hostagent/common/result.hpp"

namespace hostagent::api::detail {

ConnectionBudget::Decision ConnectionBudget::admit(Id id, const std::string& peer, Time now) {
  const std::lock_guard lock(mutex_);
  HA_ASSERT(!entries_.contains(id));
  Decision decision;
  if (!peer.empty()) {
    const auto held = per_peer_.find(peer);
    if (held != per_peer_.end() && held->second >= limits_.max_per_peer) {
      ++counts_.refused_peer;
      decision.admission = Admission::refused_peer;
      return decision;
    }
  }
  if (counts_.general >= general_slots()) {
    // Room is made by eviction as soon as the general slots are taken, not only once the reserve is
    // too: a stalled connection never pushes a well-behaved one onto probation.
    if (const auto victim = oldest_evictable()) {
      decision.evict = victim;
      erase(entries_.find(*victim));
      ++counts_.evicted;
    }
  }
  Entry entry{peer, false, Phase::awaiting, now};
  if (counts_.general < general_slots()) {
    decision.admission = Admission::admitted;
  } else if (counts_.probation < limits_.health_reserve) {
    entry.probation = true;
    decision.admission = Admission::probation;
  } else {
    ++counts_.refused_full;
    decision.admission = Admission::refused_full;
    return decision;
  }
  insert(id, std::move(entry));
  return decision;
}

bool ConnectionBudget::enter(Id id, Phase phase, Time now, bool* at_stream_cap) {
  const std::lock_guard lock(mutex_);
  if (at_stream_cap != nullptr) *at_stream_cap = false;
  const auto it = entries_.find(id);
  if (it == entries_.end()) return false;
  Entry& entry = it->second;
  if (phase == Phase::stream && entry.phase != Phase::stream) {
    if (counts_.streams >= limits_.max_event_streams) {
      if (at_stream_cap != nullptr) *at_stream_cap = true;
      return false;
    }
    ++counts_.streams;
  }
  if (auto* queue = queue_of(entry.phase)) queue->erase({entry.since, id});
  entry.phase = phase;
  entry.since = now;
  if (auto* queue = queue_of(phase)) queue->emplace(now, id);
  return true;
}

void ConnectionBudget::leave(Id id) {
  const std::lock_guard lock(mutex_);
  const auto it = entries_.find(id);
  if (it != entries_.end()) erase(it);
}

bool ConnectionBudget::on_probation(Id id) const {
  const std::lock_guard lock(mutex_);
  const auto it = entries_.find(id);
  return it != entries_.end() && it->second.probation;
}

BudgetCounts ConnectionBudget::counts() const {
  const std::lock_guard lock(mutex_);
  return counts_;
}

ConnectionBudget::Queue* ConnectionBudget::queue_of(Phase phase) {
  if (phase == Phase::awaiting) return &awaiting_;
  if (phase == Phase::idle) return &idle_;
  return nullptr;
}

// A connection still waiting for its request is the likelier to be stalled on purpose than one
// that was served and went idle, so the awaiting go first; within each, the oldest.
std::optional<ConnectionBudget::Id> ConnectionBudget::oldest_evictable() const {
  if (!awaiting_.empty()) return awaiting_.begin()->second;
  if (!idle_.empty()) return idle_.begin()->second;
  return std::nullopt;
}

void ConnectionBudget::insert(Id id, Entry entry) {
  if (!entry.peer.empty()) ++per_peer_[entry.peer];
  ++(entry.probation ? counts_.probation : counts_.general);
  if (auto* queue = queue_of(entry.phase)) queue->emplace(entry.since, id);
  entries_.emplace(id, std::move(entry));
}

void ConnectionBudget::erase(std::map<Id, Entry>::iterator it) {
  const Entry& entry = it->second;
  if (auto* queue = queue_of(entry.phase)) queue->erase({entry.since, it->first});
  if (entry.phase == Phase::stream) --counts_.streams;
  --(entry.probation ? counts_.probation : counts_.general);
  if (!entry.peer.empty()) {
    const auto peer = per_peer_.find(entry.peer);
    if (--peer->second == 0) per_peer_.erase(peer);
  }
  entries_.erase(it);
}

}  // namespace hostagent::api::detail
