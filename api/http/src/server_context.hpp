// api/http server_context: what every connection of one server shares: the options, the handler
// and observer, the handler thread pools, the TLS context, the connection budget, and the registry
// of open connections that stop() closes and eviction reaches.
#pragma once

#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <vector>

#include <boost/asio/ssl/context.hpp>
#include <boost/asio/thread_pool.hpp>

#include "connection_budget.hpp"
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
  // From any thread: the budget took this connection's slot for a newer one. One still waiting for
  // its request is answered 408; an idle one is closed; a busy one finishes what it is doing.
  virtual void evict() = 0;
};

struct ServerContext {
  ServerOptions options;
  RequestHandler handler;
  RequestObserver observer;
  std::shared_ptr<boost::asio::ssl::context> tls;  // null: plain TCP
  // Owned by the server, which joins it in stop() before anything here can go away.
  boost::asio::thread_pool* handler_pool = nullptr;
  // One thread for the probe paths' handlers only: a flood of other requests (scrapes, reads) that
  // keeps every handler thread busy never queues a health probe behind it.
  boost::asio::thread_pool* probe_pool = nullptr;
  std::atomic<bool> stopping{false};
  std::unique_ptr<ConnectionBudget> budget;

  static BudgetLimits budget_limits(const ServerLimits& limits) {
    return BudgetLimits{limits.max_connections, limits.health_reserve, limits.max_connections_per_peer,
                        limits.max_event_streams};
  }

  std::uint64_t add(std::weak_ptr<Connection> connection) {
    const std::lock_guard lock(mutex_);
    connections_.emplace(next_id_, std::move(connection));
    return next_id_++;
  }
  void remove(std::uint64_t id) {
    const std::lock_guard lock(mutex_);
    connections_.erase(id);
  }
  // Tells connection `id` it was evicted (it may have ended already).
  void evict(std::uint64_t id) {
    std::shared_ptr<Connection> connection;
    {
      const std::lock_guard lock(mutex_);
      const auto it = connections_.find(id);
      if (it != connections_.end()) connection = it->second.lock();
    }
    if (connection) connection->evict();
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
