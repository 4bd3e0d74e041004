// virt/event_loop: libvirt's default event loop on a thread of its own. libvirt needs one for
// domain events, keepalive and close callbacks; the default impl is process-wide, so there is one
// loop per process, shared by every Hypervisor and stopped (joined, drained) with the last of them.
#pragma once

#include <atomic>
#include <functional>
#include <memory>
#include <thread>

#include "hostagent/common/result.hpp"

namespace hostagent::virt::detail {

class EventLoop {
 public:
  // The process's loop: started by the first caller, stopped when the last pointer goes away.
  static Result<std::shared_ptr<EventLoop>> acquire();

  ~EventLoop();
  EventLoop(const EventLoop&) = delete;
  EventLoop& operator=(const EventLoop&) = delete;

  // Runs fn on the loop's thread, soon. Events are delivered on that thread, so this keeps
  // everything a sink sees on one thread.
  void post(std::function<void()> fn);

 private:
  EventLoop() = default;
  void run();
  void add_stop_marker(int rounds_left);

  std::atomic<bool> drained_{false};
  std::thread thread_;
};

}  // namespace hostagent::virt::detail
