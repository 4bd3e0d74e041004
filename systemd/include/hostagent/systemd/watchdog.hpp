// systemd/watchdog: WATCHDOG=1 within systemd's WatchdogSec=, sent only while the daemon
// answers. A thread pings every half interval after asking `alive`; when that does not return (a
// wedged service) or says no, nothing is sent, and systemd restarts the unit once the interval
// runs out (systemd.service(5), WatchdogSec=; Restart=on-failure).
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>

#include "hostagent/common/result.hpp"
#include "hostagent/systemd/notifier.hpp"

namespace hostagent::systemd {

// sd_watchdog_enabled(3): the interval systemd expects pings within, when WATCHDOG_USEC is set and
// WATCHDOG_PID (if set) is this process; nullopt otherwise. Malformed variables are an error.
Result<std::optional<std::chrono::microseconds>> watchdog_interval();

class Watchdog {
 public:
  // Pings `notifier` every interval/2 while alive() returns true; both outlive the watchdog. The
  // first round runs at once.
  static std::unique_ptr<Watchdog> start(Notifier& notifier, std::chrono::microseconds interval,
                                         std::function<bool()> alive);
  // Stops and joins. A round blocked in alive() is waited for: a wedged service blocks its own
  // shutdown too, and systemd's TimeoutStopSec= ends both.
  ~Watchdog();
  Watchdog(const Watchdog&) = delete;
  Watchdog& operator=(const Watchdog&) = delete;

  // One round as the thread runs it: true when alive() said yes and WATCHDOG=1 went out.
  bool tick();
  int pings() const { return pings_.load(); }
  int failed_sends() const { return failed_sends_.load(); }

 private:
  Watchdog(Notifier& notifier, std::chrono::microseconds period, std::function<bool()> alive)
      : notifier_(notifier), period_(period), alive_(std::move(alive)) {}
  void loop();

  Notifier& notifier_;
  const std::chrono::microseconds period_;
  const std::function<bool()> alive_;
  std::atomic<int> pings_{0};
  std::atomic<int> failed_sends_{0};
  std::mutex mutex_;
  std::condition_variable wake_;
  bool stopping_ = false;
  std::thread thread_;
};

}  // namespace hostagent::systemd
