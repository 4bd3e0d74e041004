// api/http event_waker: the `wake` an EventStream calls, from any thread, when frames are waiting.
// It posts to the connection's strand once, and not at all after the connection has ended: the
// stream's feeder may call it while the connection is being torn down.
#pragma once

#include <functional>
#include <memory>
#include <mutex>
#include <utility>

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/post.hpp>

#include "server_context.hpp"

namespace hostagent::api::detail {

class EventWaker : public std::enable_shared_from_this<EventWaker> {
 public:
  EventWaker(std::weak_ptr<Connection> target, boost::asio::any_io_executor strand)
      : target_(std::move(target)), strand_(std::move(strand)) {}

  std::function<void()> callback() {
    return [self = shared_from_this()] { self->wake(); };
  }

  // The connection ended: later wakes do nothing.
  void disarm() {
    const std::lock_guard lock(mutex_);
    live_ = false;
  }

 private:
  void wake() {
    const std::lock_guard lock(mutex_);
    if (!live_ || fired_) return;
    fired_ = true;
    if (auto target = target_.lock()) {
      boost::asio::post(strand_, [target = std::move(target)] { target->on_wake(); });
    }
  }

  std::mutex mutex_;
  std::weak_ptr<Connection> target_;
  boost::asio::any_io_executor strand_;
  bool live_ = true;
  bool fired_ = false;
};

}  // namespace hostagent::api::detail
