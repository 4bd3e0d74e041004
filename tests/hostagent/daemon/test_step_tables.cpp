// daemon/vm_steps: the operations' step tables are the journal's vocabulary. The journal
// (state::journaled_steps) refuses a file naming any other step; these tables are what the daemon
// runs, rolls back and reconciles: the two lists must say the same steps in the same order.
#include <doctest/doctest.h>

#include <string_view>
#include <vector>

#include "hostagent/state/journal.hpp"
#include "vm_steps.hpp"

namespace hostagent::daemon {
namespace {

// Compared here: doctest cannot print a function pointer.
bool undone_by(std::string_view step, StepEffect effect) {
  return create_undo(step) == effect;
}

}  // namespace

TEST_CASE("the create and delete tables name the journal's steps, in its order") {
  const auto& create = state::journaled_steps(state::OperationKind::create);
  CHECK(create_step_names() == std::vector<std::string_view>(create.begin(), create.end()));
  const auto& remove = state::journaled_steps(state::OperationKind::remove);
  std::vector<std::string_view> deleted;
  for (const auto& step : delete_steps()) deleted.push_back(step.name);
  CHECK(deleted == std::vector<std::string_view>(remove.begin(), remove.end()));
}

TEST_CASE("every create step has its undo, commit undoes nothing, and each delete step runs something") {
  CHECK(undone_by(state::step::define, undefine_if_ours));
  CHECK(undone_by(state::step::start, destroy_if_ours));
  CHECK(undone_by(state::step::prepare_devices, release_devices));
  CHECK(undone_by(state::step::disk, delete_disk));
  CHECK(undone_by(state::step::seed, delete_seed));
  CHECK(undone_by(state::step::commit, no_effect));
  for (const auto& step : delete_steps()) {
    CAPTURE(step.name);
    const bool runs_something = step.run != nullptr && step.run != no_effect;
    CHECK(runs_something);
  }
}

}  // namespace hostagent::daemon
