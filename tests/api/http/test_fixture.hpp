// The server under test: a handler that tells the client who it is and what it asked, with a few
// paths that block, stream or count, and an observer that records what it is told.
#pragma once

#include <chrono>
#include <condition_variable>
#include <deque>
#include <functional>
#include <future>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "hostagent/api/http_server.hpp"
#include "test_client.hpp"

namespace hostagent::api::testing {

// An event stream the test feeds by hand.
class ManualStream : public EventStream {
 public:
  std::vector<std::string> take() override {
    const std::lock_guard lock(mutex_);
    std::vector<std::string> out(frames_.begin(), frames_.end());
    frames_.clear();
    return out;
  }
  void wait(std::function<void()> wake) override {
    std::function<void()> now;
    {
      const std::lock_guard lock(mutex_);
      if (frames_.empty()) {
        wake_ = std::move(wake);
        return;
      }
      now = std::move(wake);
    }
    now();
  }
  void push(std::string frame) {
    std::function<void()> wake;
    {
      const std::lock_guard lock(mutex_);
      frames_.push_back(std::move(frame));
      wake = std::move(wake_);
      wake_ = nullptr;
    }
    if (wake) wake();
  }

 private:
  std::mutex mutex_;
  std::deque<std::string> frames_;
  std::function<void()> wake_;
};

struct Seen {
  std::string method;
  std::string path;
  std::string remote;
  unsigned status = 0;
  bool authenticated = false;
};

class Harness {
 public:
  // What the handler answers: "PRINCIPAL ROLE METHOD PATH", 200.
  HttpResponse handle(const HttpRequest& request) {
    {
      const std::lock_guard lock(mutex_);
      handled_.push_back(request.path);
    }
    if (request.path == "/block" || request.path == "/block-probe") {
      release_.wait();
      return text("unblocked");
    }
    if (request.path == "/events") {
      auto stream = std::make_shared<ManualStream>();
      {
        const std::lock_guard lock(mutex_);
        stream_ = stream;
      }
      cv_.notify_all();
      HttpResponse response;
      response.events = stream;
      return response;
    }
    if (request.path == "/throw") throw std::runtime_error("boom");
    return text(request.identity.principal + " " + to_string(request.identity.role) + " " + request.method + " " +
                request.path);
  }

  void observe(const RequestRecord& record) {
    {
      const std::lock_guard lock(mutex_);
      seen_.push_back(Seen{record.request->method, record.request->path, record.request->remote, record.status,
                           record.authenticated});
    }
    cv_.notify_all();
  }

  Result<std::unique_ptr<HttpServer>> start(ServerOptions options) {
    return HttpServer::start(
        std::move(options), [this](const HttpRequest& request) { return handle(request); },
        [this](const RequestRecord& record) { observe(record); });
  }

  // Blocks until the observer has seen `count` responses (false after kWait).
  bool wait_seen(std::size_t count) {
    std::unique_lock lock(mutex_);
    return cv_.wait_for(lock, kWait, [&] { return seen_.size() >= count; });
  }
  std::vector<Seen> seen() {
    const std::lock_guard lock(mutex_);
    return seen_;
  }
  std::vector<std::string> handled() {
    const std::lock_guard lock(mutex_);
    return handled_;
  }
  // The stream the last GET /events made (waits for it).
  std::shared_ptr<ManualStream> stream() {
    std::unique_lock lock(mutex_);
    cv_.wait_for(lock, kWait, [&] { return !stream_.expired(); });
    return stream_.lock();
  }
  std::weak_ptr<ManualStream> weak_stream() {
    const std::lock_guard lock(mutex_);
    return stream_;
  }
  // Waits until the server has let go of the last stream (false after kWait): nothing signals it,
  // so this polls.
  bool wait_stream_released() {
    const auto deadline = std::chrono::steady_clock::now() + kWait;
    while (!weak_stream().expired()) {
      if (std::chrono::steady_clock::now() > deadline) return false;
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    return true;
  }
  void release_blocked() { release_promise_.set_value(); }

 private:
  static HttpResponse text(std::string body) {
    HttpResponse response;
    response.content_type = "text/plain";
    response.body = std::move(body);
    return response;
  }

  std::mutex mutex_;
  std::condition_variable cv_;
  std::vector<Seen> seen_;
  std::vector<std::string> handled_;
  std::weak_ptr<ManualStream> stream_;
  std::promise<void> release_promise_;
  std::shared_future<void> release_ = release_promise_.get_future().share();
};

}  // namespace hostagent::api::testing
