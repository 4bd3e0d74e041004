// daemon/clock: the real clocks.
#include "hostagent/daemon/clock.hpp"

#include <thread>

namespace hostagent::daemon {
namespace {

class SystemClock final : public Clock {
 public:
  std::chrono::system_clock::time_point now() override { return std::chrono::system_clock::now(); }
  std::chrono::steady_clock::time_point steady_now() override { return std::chrono::steady_clock::now(); }
  void sleep_for(std::chrono::milliseconds duration) override { std::this_thread::sleep_for(duration); }
  void wait_until(std::condition_variable& changed, std::unique_lock<std::mutex>& lock,
                  std::chrono::steady_clock::time_point deadline, const std::function<bool()>& done) override {
    changed.wait_until(lock, deadline, done);
  }
};

}  // namespace

std::shared_ptr<Clock> make_system_clock() {
  return std::make_shared<SystemClock>();
}

}  // namespace hostagent::daemon
