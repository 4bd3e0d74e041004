// hostagent/daemon health_poller: one reading kept, renewed on a thread.
#include "health_poller.hpp"

#include <memory>
#include <utility>

namespace hostagent::daemon {

HealthPoller::HealthPoller(Read read, std::chrono::milliseconds interval)
    : read_(std::move(read)), interval_(interval), latest_(read_once()), thread_([this] { run(); }) {}

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
  return DeviceHealthReading(std::make_shared<const std::vector<numa::DeviceHealth>>(std::move(*reading)));
}

HealthPoller::Reading HealthPoller::latest() const {
  const std::lock_guard lock(mutex_);
  return latest_;
}

// The read runs without the lock, so latest() never waits for sysfs.
void HealthPoller::run() {
  std::unique_lock lock(mutex_);
  while (!stop_cv_.wait_for(lock, interval_, [this] { return stopping_; })) {
    lock.unlock();
    Reading reading = read_once();
    lock.lock();
    latest_ = std::move(reading);
  }
}

}  // namespace hostagent::daemon
