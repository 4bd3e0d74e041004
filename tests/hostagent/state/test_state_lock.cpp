// state/state_lock: one holder of a state directory at a time, the refusal naming it, and the lock
// gone with its holder. flock(2) locks an open file description, so two takes in this one process
// contend exactly as two processes would.
#include <doctest/doctest.h>

#include <unistd.h>

#include <filesystem>

#include "hostagent/state/state_lock.hpp"
#include "test_support.hpp"

namespace hostagent::state {
namespace {

using testing::contains;
using testing::TempDir;

TEST_CASE("state lock: the first taker holds it and says who it is, and a second is refused naming the first") {
  TempDir dir;
  const auto state = dir.path() / "state";
  auto first = StateLock::take(state, "hostagentd serving");
  REQUIRE_MESSAGE(first.ok(), first.error().message);
  CHECK(std::filesystem::is_directory(state));
  CHECK(testing::read_text_file(state / "hostagentd.lock") == std::to_string(::getpid()) + " hostagentd serving\n");

  const auto second = StateLock::take(state, "hostagentd --exec status");
  REQUIRE_FALSE(second.ok());
  CHECK(second.error().code == ErrorCode::conflict);
  CHECK_MESSAGE(contains(second.error().message, "state directory " + state.string() +
                                                     " is in use by another hostagentd (pid and task: \"" +
                                                     std::to_string(::getpid()) + " hostagentd serving\""),
                second.error().message);
  CHECK(contains(second.error().message, "Stop that one first, or drive it through its API with hostagentctl"));
  // The refused one wrote nothing over the holder's account.
  CHECK(testing::read_text_file(state / "hostagentd.lock") == std::to_string(::getpid()) + " hostagentd serving\n");

  SUBCASE("the lock goes with its holder, and the next taker writes its own account") {
    *first = StateLock::take(dir.path() / "elsewhere", "another").value();  // the first lock released
    auto third = StateLock::take(state, "hostagentd --exec list");
    REQUIRE_MESSAGE(third.ok(), third.error().message);
    CHECK(testing::read_text_file(state / "hostagentd.lock") ==
          std::to_string(::getpid()) + " hostagentd --exec list\n");
  }
  SUBCASE("a moved lock is still held") {
    StateLock moved = std::move(first).value();
    CHECK_FALSE(StateLock::take(state, "x").ok());
  }
}

TEST_CASE("state lock: a lock file that is a symlink is refused, never followed") {
  TempDir dir;
  const auto state = dir.path() / "state";
  std::filesystem::create_directories(state);
  std::filesystem::create_symlink(dir.path() / "elsewhere", state / "hostagentd.lock");
  const auto taken = StateLock::take(state, "hostagentd serving");
  REQUIRE_FALSE(taken.ok());
  CHECK(contains(taken.error().message, "hostagentd.lock"));
  CHECK_FALSE(std::filesystem::exists(dir.path() / "elsewhere"));
}

}  // namespace
}  // namespace hostagent::state
