// Issue 43, defect 3: one process owns a state directory. A second hostagentd on it, serving or
// `--exec status` as the README suggests for scripts, is refused naming the first, and changes
// nothing: the first daemon's VM, journal and simulated host are as they were. Killed, the first
// lets go, and the next one starts.
#include <doctest/doctest.h>

#include <signal.h>

#include "systemd_fixture.hpp"
#include "test_support.hpp"

namespace hostagent::testing {
namespace {

namespace fs = std::filesystem;
using std::chrono::milliseconds;
using std::chrono::seconds;

// Until READY=1 (two minutes at most on a loaded machine).
bool ready(NotifySocket& notify, Child& daemon) {
  for (int waited = 0; waited < 1200 && !daemon.poll(); ++waited) {
    const auto datagram = notify.receive(milliseconds(100));
    if (datagram && datagram->find("READY=1") != std::string::npos) return true;
  }
  return false;
}

TEST_CASE("a second hostagentd on a state directory in use is refused naming the holder, and changes nothing") {
  TempDir dir;
  const auto state = dir.path() / "state";
  NotifySocket notify(dir.path() / "notify.sock");
  const auto api = dir.path() / "api.sock";
  const std::string hostagentd = hostagent_binary("hostagentd");
  Child first(
      {.argv = {hostagentd, "--simulated", "vela2", "--state-dir", state.string(), "--listen", "unix:" + api.string()},
       .env = {{"NOTIFY_SOCKET", (dir.path() / "notify.sock").string()}},
       .log = dir.path() / "first.log"});
  REQUIRE_MESSAGE(ready(notify, first), read_text_file(dir.path() / "first.log"));
  // The embedded default keeps its state under STATE_DIR/state, the simulated host's tree there too.
  const auto tree = state / "state" / "simulated-host";
  REQUIRE(fs::exists(tree));
  const auto tree_written = fs::last_write_time(tree / "sys");

  for (const auto& second : std::vector<std::vector<std::string>>{
           {hostagentd, "--simulated", "vela2", "--state-dir", state.string(), "--exec", "status"},
           {hostagentd, "--simulated", "vela2", "--state-dir", state.string(), "--listen",
            "unix:" + (dir.path() / "second.sock").string()}}) {
    const auto run = run_command(second);
    CAPTURE(run.output);
    CHECK(run.exit_code == 1);
    CHECK(run.output.find("state directory " + (state / "state").string() +
                          " is in use by another hostagentd (pid and task: \"" + std::to_string(first.pid()) +
                          " hostagentd serving\"") != std::string::npos);
    CHECK(run.output.find("Stop that one first, or drive it through its API with hostagentctl") != std::string::npos);
  }
  CHECK(fs::last_write_time(tree / "sys") == tree_written);
  CHECK_FALSE(fs::exists(dir.path() / "second.sock"));
  CHECK_FALSE(first.poll().has_value());

  // Killed however it is killed, the first lets go: the kernel drops a flock with its last holder.
  first.signal(SIGKILL);
  CHECK(first.wait(seconds(30)).has_value());
  const auto after =
      run_command({hostagentd, "--simulated", "vela2", "--state-dir", state.string(), "--exec", "status"});
  CHECK_MESSAGE(after.exit_code == 0, after.output);
}

}  // namespace
}  // namespace hostagent::testing
