// api/http_server: the server's life: checking the options, binding the listeners, the network
// threads (one io_context) and the handler pool, accepting connections into sessions, and stop().
#include "hostagent/api/http_server.hpp"

#include <optional>
#include <thread>

#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/strand.hpp>

#include "listeners.hpp"
#include "session.hpp"
#include "tls.hpp"

namespace hostagent::api {

const char* to_string(Role role) {
  return role == Role::operator_role ? "operator" : "reader";
}

bool is_read_method(const std::string& method) {
  return method == "GET" || method == "HEAD";
}

namespace detail {
namespace {

using tcp = asio::ip::tcp;
using unix_socket = asio::local::stream_protocol;
using TlsStream = asio::ssl::stream<tcp::socket>;

Error invalid(std::string message) {
  return Error{ErrorCode::invalid_argument, std::move(message)};
}

// "203.0.113.5:40112" and "203.0.113.5" (what max_connections_per_peer counts by).
Peer tcp_peer(const tcp::socket& socket) {
  Peer peer;
  error_code error;
  const auto endpoint = socket.remote_endpoint(error);
  if (error) {
    peer.remote = peer.address = "tcp:unknown";
    return peer;
  }
  const auto address = endpoint.address();
  peer.address = address.is_v6() ? "[" + address.to_string() + "]" : address.to_string();
  peer.remote = peer.address + ":" + std::to_string(endpoint.port());
  return peer;
}

Status check_options(const ServerOptions& options, const RequestHandler& handler) {
  if (!handler) return invalid("HttpServer::start: no request handler");
  if (options.listen.empty()) return invalid("api.listen: no address to listen on; add unix:PATH or tcp://HOST:PORT");
  if (options.network_threads < 1 || options.handler_threads < 1) {
    return invalid("network_threads and handler_threads must be at least 1");
  }
  const auto& limits = options.limits;
  if (limits.max_connections < 1 || limits.max_body_bytes == 0 || limits.max_header_bytes == 0 ||
      limits.header_timeout.count() <= 0 || limits.request_timeout.count() <= 0 || limits.idle_timeout.count() <= 0 ||
      limits.event_heartbeat.count() <= 0 || limits.max_connections_per_peer < 1 || limits.max_event_streams < 1) {
    return invalid(
        "api limits: connections, body and header sizes, timeouts, per-peer and stream caps and the heartbeat must be "
        "positive");
  }
  if (limits.health_reserve < 1 || limits.health_reserve >= limits.max_connections) {
    return invalid("api.limits.health_reserve: " + std::to_string(limits.health_reserve) +
                   " must be at least 1 and below max_connections (" + std::to_string(limits.max_connections) + ")");
  }
  // Nothing reachable over the network is unauthenticated: TCP needs client certificates or a token.
  const bool tokens = !options.operator_token.empty() || !options.reader_token.empty();
  const bool client_certificates = !options.tls_client_ca_file.empty();
  for (const auto& address : options.listen) {
    if (address.kind == ListenAddress::Kind::tcp && !tokens && !client_certificates) {
      return invalid("api.listen " + hostagent::to_string(address) +
                     ": a TCP listener needs authentication; configure api.tls with a client_ca, or a token file");
    }
  }
  return ok_status();
}

class ServerImpl final : public HttpServer {
 public:
  ServerImpl(ServerOptions options, RequestHandler handler, RequestObserver observer)
      : handler_pool_(std::make_unique<asio::thread_pool>(static_cast<std::size_t>(options.handler_threads))),
        probe_pool_(std::make_unique<asio::thread_pool>(1)),
        context_(std::make_shared<ServerContext>()) {
    context_->options = std::move(options);
    context_->handler = std::move(handler);
    context_->observer = std::move(observer);
    context_->handler_pool = handler_pool_.get();
    context_->probe_pool = probe_pool_.get();
    context_->budget = std::make_unique<ConnectionBudget>(ServerContext::budget_limits(context_->options.limits));
  }
  ~ServerImpl() override { stop(); }
  ServerImpl(const ServerImpl&) = delete;
  ServerImpl& operator=(const ServerImpl&) = delete;

  Status bind() {
    const auto& options = context_->options;
    if (tls_enabled(options)) {
      HA_TRY(context_->tls, make_tls_context(options));
    }
    for (const auto& address : options.listen) {
      if (address.kind == ListenAddress::Kind::unix_socket) {
        const auto inherited = options.inherited_unix_sockets.find(address.socket_path);
        HA_TRY(auto listener,
               inherited != options.inherited_unix_sockets.end()
                   ? adopt_unix(asio::make_strand(io_), address.socket_path, inherited->second)
                   : bind_unix(asio::make_strand(io_), address.socket_path, options.socket_mode, options.socket_group));
        unix_.push_back(std::move(listener));
        endpoints_.push_back(address);
      } else {
        HA_TRY(auto acceptor, bind_tcp(asio::make_strand(io_), address));
        ListenAddress bound = address;
        bound.port = acceptor->local_endpoint().port();
        endpoints_.push_back(bound);
        tcp_.push_back(std::move(acceptor));
      }
    }
    return ok_status();
  }

  void run() {
    for (auto& listener : unix_) accept_unix(*listener.acceptor);
    for (auto& acceptor : tcp_) accept_tcp(*acceptor);
    for (int i = 0; i < context_->options.network_threads; ++i) threads_.emplace_back([this] { io_.run(); });
  }

  std::vector<ListenAddress> endpoints() const override { return endpoints_; }
  ConnectionStats connection_stats() const override {
    const auto counts = context_->budget->counts();
    return ConnectionStats{counts.general + counts.probation,
                           counts.probation,
                           counts.streams,
                           counts.evicted,
                           counts.refused_peer,
                           counts.refused_full};
  }

  void stop() override {
    const std::lock_guard lock(stop_mutex_);
    if (stopped_) return;
    stopped_ = true;
    context_->stopping = true;
    for (auto& listener : unix_) close_acceptor(*listener.acceptor);
    for (auto& acceptor : tcp_) close_acceptor(*acceptor);
    for (auto& connection : context_->snapshot()) connection->close();
    // Handlers in flight finish (they may be blocked on libvirt); their answers find the
    // connections closed. Then, with nothing left to do, io_context::run returns on every thread.
    handler_pool_->join();
    probe_pool_->join();
    work_.reset();
    for (auto& thread : threads_) thread.join();
    threads_.clear();
    for (const auto& listener : unix_) remove_socket_file(listener);
  }

 private:
  template <class Acceptor>
  static void close_acceptor(Acceptor& acceptor) {
    asio::post(acceptor.get_executor(), [&acceptor] {
      error_code ignored;
      acceptor.close(ignored);
    });
  }

  // A failed accept (EMFILE, ENOBUFS) is retried after a pause rather than in a busy loop.
  template <class Acceptor, class Retry>
  void after_accept_error(Acceptor& acceptor, const error_code& error, Retry retry) {
    if (error == asio::error::operation_aborted || context_->stopping || !acceptor.is_open()) return;
    auto timer = std::make_shared<asio::steady_timer>(acceptor.get_executor(), std::chrono::milliseconds(100));
    timer->async_wait([timer, retry](const error_code&) { retry(); });
  }

  void accept_unix(unix_socket::acceptor& acceptor) {
    acceptor.async_accept(asio::make_strand(io_),
                          [this, &acceptor](const error_code& error, unix_socket::socket socket) {
                            if (error)
                              return after_accept_error(acceptor, error, [this, &acceptor] { accept_unix(acceptor); });
                            Peer peer;
                            peer.remote = "unix";
                            peer.identity = identity_from_peer_credentials(socket.native_handle());
                            if (!peer.identity) peer.identity = Identity{"uid:unknown", Role::operator_role};
                            launch<unix_socket::socket>(std::move(socket), std::move(peer));
                            accept_unix(acceptor);
                          });
  }

  void accept_tcp(tcp::acceptor& acceptor) {
    acceptor.async_accept(asio::make_strand(io_), [this, &acceptor](const error_code& error, tcp::socket socket) {
      if (error) return after_accept_error(acceptor, error, [this, &acceptor] { accept_tcp(acceptor); });
      error_code ignored;
      socket.set_option(tcp::no_delay(true), ignored);  // small responses, request/response pattern
      Peer peer = tcp_peer(socket);
      if (context_->tls) {
        launch<TlsStream>(TlsStream(std::move(socket), *context_->tls), std::move(peer));
      } else {
        launch<tcp::socket>(std::move(socket), std::move(peer));
      }
      accept_tcp(acceptor);
    });
  }

  template <class Stream>
  void launch(Stream stream, Peer peer) {
    if (context_->stopping) return;
    auto session = std::make_shared<Session<Stream>>(context_, std::move(stream), std::move(peer));
    session->start();
    // Registered before this check, so stop() either closes it or it sees stopping here.
    if (context_->stopping) session->close();
  }

  asio::io_context io_;
  std::optional<asio::executor_work_guard<asio::io_context::executor_type>> work_{io_.get_executor()};
  std::unique_ptr<asio::thread_pool> handler_pool_;
  std::unique_ptr<asio::thread_pool> probe_pool_;  // the probe paths' handlers alone
  std::shared_ptr<ServerContext> context_;
  std::vector<UnixListener> unix_;
  std::vector<std::unique_ptr<tcp::acceptor>> tcp_;
  std::vector<ListenAddress> endpoints_;
  std::vector<std::thread> threads_;
  std::mutex stop_mutex_;
  bool stopped_ = false;
};

}  // namespace
}  // namespace detail

Result<std::unique_ptr<HttpServer>> HttpServer::start(ServerOptions options, RequestHandler handler,
                                                      RequestObserver observer) {
  HA_TRY_STATUS(detail::check_options(options, handler));
  auto server = std::make_unique<detail::ServerImpl>(std::move(options), std::move(handler), std::move(observer));
  auto bound = server->bind();
  if (!bound) {
    server->stop();  // removes the socket files already made
    return std::move(bound).error();
  }
  server->run();
  return std::unique_ptr<HttpServer>(std::move(server));
}

}  // namespace hostagent::api
