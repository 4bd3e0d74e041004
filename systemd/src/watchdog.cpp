// systemd/watchdog: the ping thread and reading systemd's watchdog settings.
#include "hostagent/systemd/watchdog.hpp"

#include <systemd/sd-daemon.h>

#include <algorithm>
#include <cstdlib>

namespace hostagent::systemd {

Result<std::optional<std::chrono::microseconds>> watchdog_interval() {
  uint64_t usec = 0;
  // unset_environment 0: harmless to keep, and a test reading the variables back sees them.
  const int rc = ::sd_watchdog_enabled(0, &usec);
  if (rc < 0) {
    const char* value = std::getenv("WATCHDOG_USEC");
    return Error{ErrorCode::invalid_argument, "WATCHDOG_USEC=" + std::string(value != nullptr ? value : "") +
                                                  " or WATCHDOG_PID is not a positive number: set them as "
                                                  "systemd does (WatchdogSec= in the unit), or unset them"};
  }
  if (rc == 0 || usec == 0) return std::optional<std::chrono::microseconds>();
  return std::optional<std::chrono::microseconds>(std::chrono::microseconds(usec));
}

std::unique_ptr<Watchdog> Watchdog::start(Notifier& notifier, std::chrono::microseconds interval,
                                          std::function<bool()> alive) {
  // Half the interval, as sd_watchdog_enabled(3) advises: one late round still lands in time.
  const auto period = std::max(interval / 2, std::chrono::microseconds(1));
  std::unique_ptr<Watchdog> watchdog(new Watchdog(notifier, period, std::move(alive)));
  watchdog->thread_ = std::thread([raw = watchdog.get()] { raw->loop(); });
  return watchdog;
}

Watchdog::~Watchdog() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  wake_.notify_all();
  if (thread_.joinable()) thread_.join();
}

bool Watchdog::tick() {
  if (!alive_()) return false;
  if (!notifier_.watchdog().ok()) {
    // Nothing to do about it here: systemd sees the missing ping and restarts the unit.
    failed_sends_.fetch_add(1);
    return false;
  }
  pings_.fetch_add(1);
  return true;
}

void Watchdog::loop() {
  std::unique_lock lock(mutex_);
  while (!stopping_) {
    lock.unlock();
    tick();
    lock.lock();
    wake_.wait_for(lock, period_, [this] { return stopping_; });
  }
}

}  // namespace hostagent::systemd
