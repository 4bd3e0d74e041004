// hostagent/daemon health_poller: one reading kept, renewed on a thread.
#include "health_poller.hpp"

#include <memory>
#include <utility>

namespace hostagent::daemon {

// Returns once the thread waits for its first interval: from then on, time moved on the clock is
// time the poller counts (a test's clock, advanced, finds it waiting).
HealthPoller::HealthPoller(Read read, std::chrono::milliseconds interval, Clock& clock)
    : read_(std::move(read)), interval_(interval), clock_(clock), latest_(read_once()), thread_([this] { run(); }) {
  std::unique_lock lock(mutex_);
  waiting_cv_.wait(lock, [this] { return waiting_; });
}

HealthPoller::~HealthPoller() {
  {
    const std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  stop_cv_.notify_all();
  thread_.join();
}

HealthPoller::Reading HealthPoller::read_once() const {
  auto reading = read_();
  if (!reading.ok()) return reading.error();
  return service::DeviceHealthReading(std::make_shared<const std::vector<numa::DeviceHealth>>(std::move(*reading)));
}

HealthPoller::Reading HealthPoller::latest() const {
  const std::lock_guard lock(mutex_);
  return latest_;
}

// The read runs without the lock, so latest() never waits for sysfs.
void HealthPoller::run() {
  std::unique_lock lock(mutex_);
  waiting_ = true;  // seen by the constructor once wait_until lets go of the lock
  waiting_cv_.notify_all();
  while (true) {
    clock_.wait_until(stop_cv_, lock, clock_.steady_now() + interval_, [this] { return stopping_; });
    if (stopping_) return;
    lock.unlock();
    Reading reading = read_once();
    lock.lock();
    latest_ = std::move(reading);
  }
}

}  // namespace hostagent::daemon
