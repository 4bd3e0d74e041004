// The watchdog in-process, with a recording notifier and a liveness check the test controls: no
// WATCHDOG=1 while the check is stuck (a wedged service) or says no; pings again once it answers.
#include <doctest/doctest.h>

#include <stdlib.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <mutex>
#include <thread>

#include "hostagent/systemd/watchdog.hpp"
#include "test_support.hpp"

namespace hostagent::systemd {
namespace {

using std::chrono::microseconds;
using std::chrono::milliseconds;

class RecordingNotifier final : public Notifier {
 public:
  Status notify(const std::string& assignments) override {
    std::lock_guard lock(mutex_);
    sent_.push_back(assignments);
    changed_.notify_all();
    return ok_status();
  }
  int count(const std::string& assignments) {
    std::lock_guard lock(mutex_);
    return static_cast<int>(std::count(sent_.begin(), sent_.end(), assignments));
  }
  // Waits (up to a minute: a loaded machine) until `assignments` was sent `times` times.
  bool wait_for(const std::string& assignments, int times) {
    std::unique_lock lock(mutex_);
    return changed_.wait_for(lock, std::chrono::seconds(60),
                             [&] { return std::count(sent_.begin(), sent_.end(), assignments) >= times; });
  }

 private:
  std::mutex mutex_;
  std::condition_variable changed_;
  std::vector<std::string> sent_;
};

// A liveness check that blocks, as VmService::status() does when a lock it needs is never given up.
class Wedge {
 public:
  bool check() {
    std::unique_lock lock(mutex_);
    ++entered_;
    changed_.notify_all();
    changed_.wait(lock, [this] { return released_; });
    return true;
  }
  bool wait_entered() {
    std::unique_lock lock(mutex_);
    return changed_.wait_for(lock, std::chrono::seconds(60), [this] { return entered_ > 0; });
  }
  void release() {
    std::lock_guard lock(mutex_);
    released_ = true;
    changed_.notify_all();
  }

 private:
  std::mutex mutex_;
  std::condition_variable changed_;
  int entered_ = 0;
  bool released_ = false;
};

TEST_CASE("watchdog: no WATCHDOG=1 while the service is wedged, pings once it answers again") {
  RecordingNotifier notifier;
  Wedge wedge;
  auto watchdog = Watchdog::start(notifier, milliseconds(20), [&wedge] { return wedge.check(); });
  REQUIRE(wedge.wait_entered());
  // Many intervals' worth of chances to ping; a wedged check must let none through.
  std::this_thread::sleep_for(milliseconds(200));
  CHECK(notifier.count("WATCHDOG=1") == 0);
  CHECK(watchdog->pings() == 0);
  wedge.release();
  CHECK(notifier.wait_for("WATCHDOG=1", 3));
}

TEST_CASE("watchdog: a liveness check that says no sends nothing, however often it is asked") {
  RecordingNotifier notifier;
  std::mutex mutex;
  std::condition_variable asked;
  int checks = 0;
  bool alive = false;
  auto watchdog = Watchdog::start(notifier, milliseconds(10), [&] {
    std::lock_guard lock(mutex);
    ++checks;
    asked.notify_all();
    return alive;
  });
  {
    std::unique_lock lock(mutex);
    REQUIRE(asked.wait_for(lock, std::chrono::seconds(60), [&] { return checks >= 5; }));
    CHECK(notifier.count("WATCHDOG=1") == 0);
    alive = true;
  }
  CHECK(notifier.wait_for("WATCHDOG=1", 1));
  watchdog.reset();  // stops and joins: no round runs after this
  const int sent = notifier.count("WATCHDOG=1");
  std::this_thread::sleep_for(milliseconds(50));
  CHECK(notifier.count("WATCHDOG=1") == sent);
}

TEST_CASE("watchdog: tick() pings only when the service answers") {
  RecordingNotifier notifier;
  std::atomic<bool> alive{false};
  std::atomic<int> checks{0};
  // Two hours between rounds: after the first (at start, while not alive), the thread only waits.
  auto watchdog = Watchdog::start(notifier, std::chrono::hours(2), [&] {
    ++checks;
    return alive.load();
  });
  for (int i = 0; checks.load() == 0 && i < 6000; ++i) std::this_thread::sleep_for(milliseconds(10));
  REQUIRE(checks.load() == 1);
  CHECK_FALSE(watchdog->tick());
  CHECK(notifier.count("WATCHDOG=1") == 0);
  alive = true;
  CHECK(watchdog->tick());
  CHECK(notifier.count("WATCHDOG=1") == 1);
  CHECK(watchdog->pings() == 1);
}

// The variables systemd sets for WatchdogSec= (systemd.exec(5)), restored afterwards.
class WatchdogEnvironment {
 public:
  WatchdogEnvironment() {
    for (const char* name : {"WATCHDOG_USEC", "WATCHDOG_PID"}) {
      const char* value = std::getenv(name);
      saved_.emplace_back(name, value != nullptr ? std::optional<std::string>(value) : std::nullopt);
    }
  }
  ~WatchdogEnvironment() {
    for (const auto& [name, value] : saved_) {
      if (value) {
        ::setenv(name.c_str(), value->c_str(), 1);
      } else {
        ::unsetenv(name.c_str());
      }
    }
  }
  void set(const char* usec, const std::optional<std::string>& pid) {
    ::setenv("WATCHDOG_USEC", usec, 1);
    if (pid) {
      ::setenv("WATCHDOG_PID", pid->c_str(), 1);
    } else {
      ::unsetenv("WATCHDOG_PID");
    }
  }

 private:
  std::vector<std::pair<std::string, std::optional<std::string>>> saved_;
};

TEST_CASE("watchdog: the interval comes from WATCHDOG_USEC when WATCHDOG_PID is this process or unset") {
  WatchdogEnvironment environment;
  environment.set("200000", std::to_string(getpid()));
  auto mine = watchdog_interval();
  REQUIRE(mine.ok());
  CHECK(*mine == microseconds(200000));

  environment.set("30000000", std::nullopt);
  auto unset_pid = watchdog_interval();
  REQUIRE(unset_pid.ok());
  CHECK(*unset_pid == microseconds(30000000));

  environment.set("200000", std::to_string(getpid() + 1));  // another process's watchdog
  auto other = watchdog_interval();
  REQUIRE(other.ok());
  CHECK_FALSE(other->has_value());

  environment.set("soon", std::nullopt);
  auto broken = watchdog_interval();
  REQUIRE_FALSE(broken.ok());
  CHECK(broken.error().message.find("WATCHDOG_USEC=soon") != std::string::npos);

  ::unsetenv("WATCHDOG_USEC");
  auto none = watchdog_interval();
  REQUIRE(none.ok());
  CHECK_FALSE(none->has_value());
}

}  // namespace
}  // namespace hostagent::systemd
