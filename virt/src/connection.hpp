// virt/connection: the one virConnectPtr of a Hypervisor, and keeping it. Opens it (retrying while
// libvirtd starts), registers lifecycle events, keepalive and the close callback on it, and when
// libvirt reports it closed (libvirtd died or restarted) reconnects in the background, re-registering
// everything, while calls fail fast with ErrorCode::unavailable.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string_view>
#include <thread>

#include "event_loop.hpp"
#include "handles.hpp"
#include "hostagent/virt/hypervisor.hpp"

namespace hostagent::virt::detail {

// What libvirt's callbacks reach. Each callback's opaque holds a reference that libvirt releases
// when it drops the callback, so a callback running late never touches a destroyed Connection.
struct CallbackState {
  void set_sinks(DomainEventSink on_domain, ConnectionEventSink on_connection);
  void emit(const DomainEvent& event);
  void emit(ConnectionEvent event);
  // The close callback of connection `generation` fired.
  void closed(std::uint64_t generation);

  std::mutex sink_mutex;
  DomainEventSink on_domain;          // guarded by sink_mutex
  ConnectionEventSink on_connection;  // guarded by sink_mutex

  std::mutex mutex;              // guards the next three, and Connection::attached_
  std::condition_variable cv;    // wakes the reconnect thread
  std::uint64_t generation = 0;  // the connection whose close callback counts
  bool lost = false;             // that connection closed; the reconnect thread takes over
  bool stopping = false;
  std::atomic<bool> connected{false};
};

// The close callback's opaque: which connection closed.
struct CloseContext {
  std::shared_ptr<CallbackState> state;
  std::uint64_t generation = 0;
};

class Connection {
 public:
  explicit Connection(LibvirtOptions options, std::shared_ptr<EventLoop> loop);
  ~Connection();
  Connection(const Connection&) = delete;
  Connection& operator=(const Connection&) = delete;

  // The first connect: retries transport failures until options.connect_timeout, then starts the
  // reconnect thread. unavailable when libvirtd never answered; invalid_argument for a bad URI.
  Status open();

  void subscribe(DomainEventSink on_domain, ConnectionEventSink on_connection);
  bool connected() const { return state_->connected.load(); }
  // A reference to the live connection, or unavailable ("WHAT: libvirt at URI is not connected").
  Result<ConnPtr> get(std::string_view what) const;
  const LibvirtOptions& options() const { return options_; }
  const std::shared_ptr<EventLoop>& loop() const { return loop_; }

 private:
  struct Attached {
    ConnPtr conn;
    int domain_callback = -1;
    int agent_callback = -1;
    // Ours, not libvirt's: drivers without close callbacks (test:///) accept the registration and
    // never call its free callback. Freed after unregistering, which waits out a running callback.
    std::unique_ptr<CloseContext> close_context;
  };

  std::uint64_t begin_attempt();
  Result<Attached> open_and_attach(std::uint64_t generation);
  Status attach(Attached& attached, std::uint64_t generation);
  static void detach(Attached& attached);
  bool publish(Attached& fresh);
  void reconnect_loop();
  bool reconnect_until_stopped();
  bool wait_interval();

  LibvirtOptions options_;
  std::shared_ptr<EventLoop> loop_;  // first: released after the connection is closed
  std::shared_ptr<CallbackState> state_;
  Attached attached_;                  // guarded by state_->mutex
  std::uint64_t next_generation_ = 0;  // used by open() and then the reconnect thread only
  std::thread reconnect_thread_;
};

}  // namespace hostagent::virt::detail
