// The connection budget as a value: admission, the reserve, eviction order, peers, event streams.
#include <doctest/doctest.h>

#include "connection_budget.hpp"

namespace hostagent::api::detail {
namespace {

using std::chrono::seconds;
using Time = ConnectionBudget::Time;

const Time kStart{};
Time at(int s) {
  return kStart + seconds(s);
}

BudgetLimits small() {
  // 4 slots: 3 general, 1 reserve.
  return BudgetLimits{4, 1, 3, 2};
}

TEST_CASE("general slots first, then the reserve on probation, then refused") {
  ConnectionBudget budget(small());
  for (ConnectionBudget::Id id = 0; id < 3; ++id) {
    CHECK(budget.admit(id, "", at(0)).admission == Admission::admitted);
    CHECK(budget.enter(id, Phase::busy, at(0)));  // busy: never evicted
  }
  const auto probation = budget.admit(3, "", at(1));
  CHECK(probation.admission == Admission::probation);
  CHECK_FALSE(probation.evict);
  CHECK(budget.on_probation(3));
  CHECK(budget.enter(3, Phase::busy, at(1)));
  const auto refused = budget.admit(4, "", at(2));
  CHECK(refused.admission == Admission::refused_full);
  CHECK_FALSE(refused.evict);
  const auto counts = budget.counts();
  CHECK(counts.general == 3);
  CHECK(counts.probation == 1);
  CHECK(counts.refused_full == 1);
  // A slot given back is taken again.
  budget.leave(1);
  CHECK(budget.admit(5, "", at(3)).admission == Admission::admitted);
}

TEST_CASE("the oldest awaiting connection is evicted before any idle one, and a busy one never") {
  ConnectionBudget budget(small());
  REQUIRE(budget.admit(0, "", at(0)).admission == Admission::admitted);
  REQUIRE(budget.enter(0, Phase::idle, at(0)));                          // idle since 0
  REQUIRE(budget.admit(1, "", at(5)).admission == Admission::admitted);  // awaiting since 5
  REQUIRE(budget.admit(2, "", at(6)).admission == Admission::admitted);
  REQUIRE(budget.enter(2, Phase::busy, at(6)));

  const auto first = budget.admit(3, "", at(7));
  CHECK(first.admission == Admission::admitted);
  REQUIRE(first.evict);
  CHECK(*first.evict == 1);                          // awaiting goes before the older idle one
  CHECK_FALSE(budget.enter(1, Phase::busy, at(7)));  // evicted: it holds nothing any more

  // Connection 3 awaits since 7: it is younger than idle 0, but awaiting goes first.
  const auto second = budget.admit(4, "", at(8));
  REQUIRE(second.evict);
  CHECK(*second.evict == 3);
  REQUIRE(budget.enter(4, Phase::busy, at(8)));
  const auto third = budget.admit(5, "", at(9));
  REQUIRE(third.evict);
  CHECK(*third.evict == 0);  // no one awaits (5 is new): the idle one
  CHECK(budget.counts().evicted == 3);
  CHECK(budget.counts().general == 3);
}

TEST_CASE("a connection that renews its phase moves to the back of the eviction order") {
  ConnectionBudget budget(small());
  REQUIRE(budget.admit(0, "", at(0)).admission == Admission::admitted);
  REQUIRE(budget.admit(1, "", at(1)).admission == Admission::admitted);
  REQUIRE(budget.admit(2, "", at(2)).admission == Admission::admitted);
  // 0 was served and awaits its next request from 3 on.
  REQUIRE(budget.enter(0, Phase::busy, at(3)));
  REQUIRE(budget.enter(0, Phase::awaiting, at(3)));
  const auto decision = budget.admit(3, "", at(4));
  REQUIRE(decision.evict);
  CHECK(*decision.evict == 1);
}

TEST_CASE("a reserve slot is taken by eviction too, so stalled probes cannot fill it") {
  ConnectionBudget budget(small());
  for (ConnectionBudget::Id id = 0; id < 3; ++id) {
    REQUIRE(budget.admit(id, "", at(0)).admission == Admission::admitted);
    REQUIRE(budget.enter(id, Phase::stream, at(0)) == (id < 2));  // two streams, then the cap
    if (id == 2) REQUIRE(budget.enter(id, Phase::busy, at(0)));
  }
  REQUIRE(budget.admit(3, "", at(1)).admission == Admission::probation);  // stalls, awaiting
  const auto next = budget.admit(4, "", at(2));
  CHECK(next.admission == Admission::probation);
  REQUIRE(next.evict);
  CHECK(*next.evict == 3);
}

TEST_CASE("a TCP peer holds at most max_per_peer connections, and unix peers are not counted by peer") {
  BudgetLimits limits = small();
  limits.max_connections = 100;
  limits.health_reserve = 10;
  ConnectionBudget budget(limits);
  for (ConnectionBudget::Id id = 0; id < 3; ++id) {
    CHECK(budget.admit(id, "192.0.2.1", at(0)).admission == Admission::admitted);
  }
  CHECK(budget.admit(3, "192.0.2.1", at(0)).admission == Admission::refused_peer);
  CHECK(budget.admit(4, "192.0.2.2", at(0)).admission == Admission::admitted);
  for (ConnectionBudget::Id id = 5; id < 15; ++id) {
    CHECK(budget.admit(id, "", at(0)).admission == Admission::admitted);
  }
  budget.leave(0);
  CHECK(budget.admit(15, "192.0.2.1", at(1)).admission == Admission::admitted);
  CHECK(budget.counts().refused_peer == 1);
}

TEST_CASE("event streams are capped, and a refused stream keeps its slot and phase") {
  ConnectionBudget budget(small());
  for (ConnectionBudget::Id id = 0; id < 3; ++id) REQUIRE(budget.admit(id, "", at(0)).admission == Admission::admitted);
  bool at_cap = true;
  CHECK(budget.enter(0, Phase::stream, at(1), &at_cap));
  CHECK_FALSE(at_cap);
  CHECK(budget.enter(1, Phase::stream, at(1), &at_cap));
  CHECK_FALSE(budget.enter(2, Phase::stream, at(1), &at_cap));
  CHECK(at_cap);
  CHECK(budget.counts().streams == 2);
  CHECK(budget.enter(2, Phase::busy, at(1)));  // still held
  budget.leave(0);
  CHECK(budget.counts().streams == 1);
  CHECK(budget.enter(2, Phase::stream, at(2), &at_cap));
}

TEST_CASE("leave is idempotent and forgets an evicted connection") {
  ConnectionBudget budget(small());
  REQUIRE(budget.admit(0, "192.0.2.1", at(0)).admission == Admission::admitted);
  budget.leave(0);
  budget.leave(0);
  const auto counts = budget.counts();
  CHECK(counts.general == 0);
  CHECK(counts.probation == 0);
  CHECK_FALSE(budget.enter(0, Phase::idle, at(1)));
}

}  // namespace
}  // namespace hostagent::api::detail
