// virt/event_loop: one thread running virEventRunDefaultImpl, woken and drained with 0 ms timeouts.
#include "event_loop.hpp"

#include <libvirt/libvirt.h>

#include <mutex>
#include <string>

#include "libvirt_error.hpp"

namespace hostagent::virt::detail {
namespace {

struct Task {
  std::function<void()> run;
  std::function<void()> on_free;  // once libvirt has dropped the timeout
};

void run_task(int timer, void* opaque) {
  // A 0 ms timeout fires on every iteration until it is removed.
  virEventRemoveTimeout(timer);
  auto* task = static_cast<Task*>(opaque);
  if (task->run) task->run();
}

// libvirt's GLib loop (util/vireventglib.c) frees a removed timeout from an idle callback on the
// loop thread; idles run only when nothing of higher priority is ready, in the order queued.
void free_task(void* opaque) {
  const std::unique_ptr<Task> task(static_cast<Task*>(opaque));
  if (task->on_free) task->on_free();
}

void add_task(std::unique_ptr<Task> task) {
  Task* raw = task.release();
  // Fails only when no event loop implementation is registered, which acquire() rules out.
  const int timer = virEventAddTimeout(0, run_task, raw, free_task);
  HA_ASSERT(timer >= 0);
}

std::mutex g_mutex;
EventLoop* g_loop = nullptr;  // guarded by g_mutex, as is g_users
int g_users = 0;

// virEventRegisterDefaultImpl must run once per process, before the first connection is opened.
const std::string& register_default_impl() {
  static std::once_flag once;
  static std::string failure;
  std::call_once(once, [] {
    install_quiet_error_handler();
    if (virEventRegisterDefaultImpl() < 0) failure = take_last_error().message;
  });
  return failure;
}

void release(EventLoop* loop) {
  const std::lock_guard lock(g_mutex);
  if (--g_users > 0) return;
  // Joining under the lock: a new acquire() waits until this loop's thread is gone, so two threads
  // never take turns on libvirt's one loop.
  delete loop;
  g_loop = nullptr;
}

}  // namespace

Result<std::shared_ptr<EventLoop>> EventLoop::acquire() {
  if (const std::string& failure = register_default_impl(); !failure.empty()) {
    return Error{ErrorCode::internal, "register libvirt's default event loop: " + failure};
  }
  const std::lock_guard lock(g_mutex);
  if (g_loop == nullptr) {
    g_loop = new EventLoop();
    g_loop->thread_ = std::thread([loop = g_loop] { loop->run(); });
  }
  ++g_users;
  return std::shared_ptr<EventLoop>(g_loop, release);
}

void EventLoop::run() {
  while (!drained_.load()) virEventRunDefaultImpl();
}

void EventLoop::post(std::function<void()> fn) {
  add_task(std::make_unique<Task>(Task{std::move(fn), {}}));
}

// Stopping takes two rounds of markers: everything removed before the first (a closed connection's
// socket watch and keepalive timer, whose free callbacks drop libvirt objects) is freed before the
// first marker's idle, and what those frees remove in turn is freed before the second's.
void EventLoop::add_stop_marker(int rounds_left) {
  add_task(std::make_unique<Task>(Task{{}, [this, rounds_left] {
                                         if (rounds_left > 1) {
                                           add_stop_marker(rounds_left - 1);
                                         } else {
                                           drained_.store(true);
                                         }
                                       }}));
}

EventLoop::~EventLoop() {
  add_stop_marker(2);
  thread_.join();
}

}  // namespace hostagent::virt::detail
