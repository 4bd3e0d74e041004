// daemon/host_watch (private): what the daemon watches of the running host between operations.
// The devices' health and the kernel's free hugepages are read together, at start and then every
// interval, on the health poller's thread, so that a scrape or a capacity report reads memory; the
// host as it is now (ACS and ATS) is read when asked, at most once a second. Its owner starts and
// stops the one thread; it is given exactly the host, the readers, the lifecycle it tells of each
// health reading, the clock and the interval.
#pragma once

#include <chrono>
#include <memory>
#include <mutex>
#include <optional>

#include "device_lifecycle.hpp"
#include "health_poller.hpp"
#include "hostagent/daemon/clock.hpp"
#include "hostagent/daemon/host_readers.hpp"
#include "hostagent/numa/host_model.hpp"
#include "hostagent/service/vm_service.hpp"

namespace hostagent::daemon {

class HostWatch {
 public:
  HostWatch(const numa::HostModel& host, const HostReaders& readers, DeviceLifecycle& lifecycle, Clock& clock,
            std::chrono::milliseconds interval)
      : host_(host), readers_(readers), lifecycle_(lifecycle), clock_(clock), interval_(interval) {}
  ~HostWatch() { stop(); }
  HostWatch(const HostWatch&) = delete;
  HostWatch& operator=(const HostWatch&) = delete;

  // Reads once, then starts the poller; nothing for a host without a health reader.
  void start();
  // Joins the poller's thread: before what it reads and tells (the host, the lifecycle) goes.
  void stop() { poller_.reset(); }

  // The last reading: a scrape never waits for sysfs. unsupported for a host without a reader.
  Result<service::DeviceHealthReading> device_health() const;
  // The kernel's free hugepages as last read; nullopt before a reading, after one failed, or on a
  // host without a reader (placement then goes by its accounting).
  std::optional<HostReaders::FreePages> free_pages() const;
  // The model with ACS and ATS as they are now: a read touches every function's config space
  // (thousands of small reads on a large host), and a report a second old is as good.
  numa::HostModel host_now();

 private:
  Result<std::vector<numa::DeviceHealth>> read();
  numa::HostModel read_host_now() const;

  const numa::HostModel& host_;
  const HostReaders& readers_;
  DeviceLifecycle& lifecycle_;
  Clock& clock_;
  const std::chrono::milliseconds interval_;
  mutable std::mutex mutex_;
  std::optional<HostReaders::FreePages> free_pages_;  // under mutex_
  std::mutex host_now_mutex_;
  std::optional<numa::HostModel> host_now_;  // under host_now_mutex_, with when it was read
  std::chrono::steady_clock::time_point host_now_at_;
  std::unique_ptr<HealthPoller> poller_;  // last: its thread uses the members above
};

}  // namespace hostagent::daemon
