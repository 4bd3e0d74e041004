// hostagent/daemon health_poller: the devices' health as state the daemon keeps. It is read from
// sysfs once at start and then every interval on a thread of its own, so a scrape of /v1/metrics
// reads memory: on vela2 the sysfs read is most of a scrape's cost (about 10 ms of 12, measured
// with perf under bench_api), and a scrape flood would otherwise repeat it per request.
#pragma once

#include <chrono>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

#include "hostagent/common/result.hpp"
#include "hostagent/daemon/clock.hpp"
#include "hostagent/numa/device_health.hpp"
#include "hostagent/service/vm_service.hpp"

namespace hostagent::daemon {

class HealthPoller {
 public:
  using Read = std::function<Result<std::vector<numa::DeviceHealth>>()>;
  using Reading = Result<service::DeviceHealthReading>;
  // Reads once before it returns, then every `interval` of `clock`'s steady time until destroyed.
  HealthPoller(Read read, std::chrono::milliseconds interval, Clock& clock);
  ~HealthPoller();  // stops the thread and joins it
  HealthPoller(const HealthPoller&) = delete;
  HealthPoller& operator=(const HealthPoller&) = delete;

  Reading latest() const;  // a new object for each reading: its address tells readings apart

 private:
  void run();

  Reading read_once() const;

  const Read read_;
  const std::chrono::milliseconds interval_;
  Clock& clock_;
  mutable std::mutex mutex_;
  std::condition_variable stop_cv_;
  std::condition_variable waiting_cv_;
  bool waiting_ = false;  // the thread has begun waiting
  bool stopping_ = false;
  Reading latest_;
  std::thread thread_;
};

}  // namespace hostagent::daemon
