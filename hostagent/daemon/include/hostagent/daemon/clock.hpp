// hostagent/daemon/clock: time, injected. Operations read the wall clock for records and the steady
// clock for timeouts through this, so tests can run a 60 s stop timeout without waiting 60 s.
#pragma once

#include <chrono>
#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <string>

#include "hostagent/common/time_text.hpp"  // rfc3339, which the daemon writes its times with

namespace hostagent::daemon {

class Clock {
 public:
  virtual ~Clock() = default;
  virtual std::chrono::system_clock::time_point now() = 0;
  virtual std::chrono::steady_clock::time_point steady_now() = 0;
  virtual void sleep_for(std::chrono::milliseconds duration) = 0;
  // Waits on `changed`, `lock` held as condition_variable::wait_until takes it, until `done()` or
  // until steady_now() reaches `deadline`: a thread that waits for work or a deadline, whichever
  // comes first, by this clock's time.
  virtual void wait_until(std::condition_variable& changed, std::unique_lock<std::mutex>& lock,
                          std::chrono::steady_clock::time_point deadline, const std::function<bool()>& done) = 0;
};

std::shared_ptr<Clock> make_system_clock();

}  // namespace hostagent::daemon
