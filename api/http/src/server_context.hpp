// api/http server_context: what every connection of one server shares: the options, the handler
// and observer, the handler thread pool, the TLS context, and the registry of open connections that
// max_connections counts and stop() closes.
#pragma once

#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <vector>

#include <boost/asio/ssl/context.hpp>
#include <boost/asio/thread_pool.hpp>

#include "hostagent/api/http_server.hpp"

namespace hostagent::api::detail {

// A connection as stop() sees it.
class Connection {
 public:
  virtual ~Connection() = default;
  // From any thread: ends the connection on its strand (and its event stream, if any).
  virtual void close() = 0;
  // On the connection's strand: its event stream has frames waiting (EventWaker posts this).
  virtual void on_wake() {}
};

struct ServerContext {
  ServerOptions options;
  RequestHandler handler;
  RequestObserver observer;
  std::shared_ptr<boost::asio::ssl::context> tls;  // null: plain TCP
  // Owned by the server, which joins it in stop() before anything here can go away.
  boost::asio::thread_pool* handler_pool = nullptr;
  std::atomic<bool> stopping{false};
  std::atomic<int> open{0};

  // Takes a slot for a new connection; false (nothing taken) when max_connections are open.
  bool reserve_slot() {
    if (open.fetch_add(1) < options.limits.max_connections) return true;
    open.fetch_sub(1);
    return false;
  }
  void release_slot() { open.fetch_sub(1); }

  std::uint64_t add(std::weak_ptr<Connection> connection) {
    const std::lock_guard lock(mutex_);
    connections_.emplace(next_id_, std::move(connection));
    return next_id_++;
  }
  void remove(std::uint64_t id) {
    const std::lock_guard lock(mutex_);
    connections_.erase(id);
  }
  std::vector<std::shared_ptr<Connection>> snapshot() {
    const std::lock_guard lock(mutex_);
    std::vector<std::shared_ptr<Connection>> out;
    for (auto& [id, weak] : connections_) {
      if (auto connection = weak.lock()) out.push_back(std::move(connection));
    }
    return out;
  }

 private:
  std::mutex mutex_;
  std::map<std::uint64_t, std::weak_ptr<Connection>> connections_;
  std::uint64_t next_id_ = 0;
};

}  // namespace hostagent::api::detail
