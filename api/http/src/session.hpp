// api/http session: one client connection, for any of the three transports (unix socket, plain
// TCP, TLS over TCP). Everything it does runs on its strand; the handler runs on the server's
// handler pool and its response is posted back here, so a handler may block without holding a
// network thread. It enforces the per-connection limits with one deadline timer: the whole request
// within request_timeout, the next request within idle_timeout, each write within request_timeout.
#pragma once

#include <array>
#include <chrono>
#include <exception>
#include <memory>
#include <optional>
#include <string>
#include <type_traits>
#include <utility>

#include <boost/asio/bind_executor.hpp>
#include <boost/asio/buffer.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/ssl/stream.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/core/stream_traits.hpp>
#include <boost/beast/http.hpp>

#include "auth.hpp"
#include "event_waker.hpp"
#include "hostagent/api/problem.hpp"
#include "request_conversion.hpp"
#include "server_context.hpp"

namespace hostagent::api::detail {

namespace asio = boost::asio;
namespace beast = boost::beast;
using boost::system::error_code;
using Clock = std::chrono::steady_clock;

template <class Stream>
inline constexpr bool kIsTls = false;
template <class Next>
inline constexpr bool kIsTls<asio::ssl::stream<Next>> = true;

// What a connection is before its first request: the transport and, where the transport says who
// the peer is (SO_PEERCRED, a client certificate), the identity.
struct Peer {
  std::string remote;  // "unix" or "ADDRESS:PORT"
  std::optional<Identity> identity;
  bool counted = true;    // holds a max_connections slot (released at the end)
  bool overload = false;  // over max_connections: answer 503 and close
};

template <class Stream>
class Session final : public Connection, public std::enable_shared_from_this<Session<Stream>> {
 public:
  Session(std::shared_ptr<ServerContext> server, Stream stream, Peer peer)
      : server_(std::move(server)),
        stream_(std::move(stream)),
        peer_(std::move(peer)),
        timer_(stream_.get_executor()),
        heartbeat_(stream_.get_executor()),
        buffer_(read_buffer_limit(server_->options.limits)) {}

  ~Session() override {
    if (id_) server_->remove(*id_);
    if (peer_.counted) server_->release_slot();
  }

  Session(const Session&) = delete;
  Session& operator=(const Session&) = delete;

  void start() {
    id_ = server_->add(this->weak_from_this());  // stop() closes it, counted or not
    asio::dispatch(stream_.get_executor(), [self = this->shared_from_this()] { self->begin(); });
  }

  void close() override {
    asio::post(stream_.get_executor(), [self = this->shared_from_this()] { self->finish(); });
  }

  void on_wake() override {
    waiting_ = false;
    pump();
  }

 private:
  const ServerLimits& limits() const { return server_->options.limits; }
  auto& socket() { return beast::get_lowest_layer(stream_); }

  // The largest buffer one request needs; beyond it a read fails rather than grow without bound.
  static std::size_t read_buffer_limit(const ServerLimits& limits) {
    return limits.max_header_bytes + limits.max_body_bytes + 4096;
  }

  // ---- deadlines -------------------------------------------------------------------------------

  void arm(std::chrono::milliseconds timeout) {
    timer_.expires_after(timeout);
    timer_.async_wait([self = this->shared_from_this()](const error_code& error) {
      // A wait that completed just before a re-arm still reports success: check the expiry.
      if (error || self->timer_.expiry() > Clock::now()) return;
      self->finish();
    });
  }
  void disarm() { timer_.cancel(); }

  // ---- reading a request -----------------------------------------------------------------------

  void begin() {
    if (server_->stopping) return finish();
    arm(limits().request_timeout);  // the TLS handshake and the first request, together
    if constexpr (kIsTls<Stream>) {
      stream_.async_handshake(
          asio::ssl::stream_base::server,
          [self = this->shared_from_this()](const error_code& error) { self->on_handshake(error); });
    } else {
      after_handshake();
    }
  }

  void on_handshake(const error_code& error) {
    if (error) return finish();
    if constexpr (kIsTls<Stream>) {
      if (auto common_name = peer_common_name(stream_.native_handle())) {
        peer_.identity = identity_from_certificate(*common_name, server_->options);
      }
    }
    after_handshake();
  }

  void after_handshake() {
    if (peer_.overload) {
      request_ = partial_request();  // for the observer: 503s count in the request metrics too
      return respond(problem(503, "too_many_connections",
                             "the server has " + std::to_string(limits().max_connections) +
                                 " connections open (its limit); retry later",
                             "/"),
                     true);
    }
    read_request(true);
  }

  void read_request(bool first) {
    if (closed_) return;
    parser_.emplace();
    apply_limits(*parser_, limits());
    request_.reset();
    authenticated_ = false;
    if (first || buffer_.size() > 0) {
      if (!first) arm(limits().request_timeout);
      return read_header();
    }
    // Keep-alive: idle_timeout until the next request begins, then request_timeout for all of it.
    arm(limits().idle_timeout);
    stream_.async_read_some(buffer_.prepare(1024),
                            [self = this->shared_from_this()](const error_code& error, std::size_t bytes) {
                              if (error) return self->finish();
                              self->buffer_.commit(bytes);
                              self->arm(self->limits().request_timeout);
                              self->read_header();
                            });
  }

  void read_header() {
    beast::http::async_read_header(
        stream_, buffer_, *parser_,
        [self = this->shared_from_this()](const error_code& error, std::size_t) { self->on_header(error); });
  }

  void on_header(const error_code& error) {
    if (error) return on_read_error(error);
    const auto& header = parser_->get();
    if (auto refused = framing_rejection(header)) {
      request_ = partial_request();
      return respond(problem(refused->status, refused->code, refused->detail, request_->path), true);
    }
    const auto expect = header[beast::http::field::expect];
    if (!parser_->is_done() && beast::iequals(expect, "100-continue")) {
      // curl and others wait (a second) for this before sending a body (RFC 9110 10.1.1).
      static constexpr std::string_view kContinue = "HTTP/1.1 100 Continue\r\n\r\n";
      return asio::async_write(stream_, asio::buffer(kContinue.data(), kContinue.size()),
                               [self = this->shared_from_this()](const error_code& write_error, std::size_t) {
                                 if (write_error) return self->finish();
                                 self->read_body();
                               });
    }
    read_body();
  }

  void read_body() {
    if (parser_->is_done()) return on_request();
    beast::http::async_read(stream_, buffer_, *parser_,
                            [self = this->shared_from_this()](const error_code& error, std::size_t) {
                              if (error) return self->on_read_error(error);
                              self->on_request();
                            });
  }

  static bool is_http_error(const error_code& error) {
    return error.category() == beast::http::make_error_code(beast::http::error::bad_target).category();
  }

  void on_read_error(const error_code& error) {
    // The client went away, timed out (the timer closed the socket), or ended the stream between
    // requests: nothing to answer. A request that broke a rule gets its problem, then the close.
    const bool malformed = is_http_error(error) && error != beast::http::error::end_of_stream &&
                           error != beast::http::error::partial_message;
    if (!malformed || closed_) return finish();
    const RequestRejection rejection = rejection_for(error, parser_->is_header_done(), limits());
    request_ = partial_request();
    respond(problem(rejection.status, rejection.code, rejection.detail, request_->path), true);
  }

  // For the observer when a request was refused before it was whole: what is known of it.
  std::shared_ptr<HttpRequest> partial_request() {
    auto request = std::make_shared<HttpRequest>();
    if (parser_ && parser_->is_header_done()) {
      request->method = std::string(parser_->get().method_string());
      request->target = std::string(parser_->get().target());
      request->path = request->target.substr(0, request->target.find('?'));
    }
    request->identity = peer_.identity.value_or(Identity{});
    request->remote = peer_.remote;
    return request;
  }

  // ---- running the handler ---------------------------------------------------------------------

  void on_request() {
    disarm();
    received_at_ = Clock::now();
    RequestRejection rejection;
    auto converted = to_http_request(parser_->get(), &rejection);
    if (!converted) {
      request_ = partial_request();
      return respond(problem(rejection.status, rejection.code, rejection.detail, request_->path), true);
    }
    request_ = std::make_shared<HttpRequest>(std::move(converted).value());
    request_->remote = peer_.remote;
    // A connection's identity (peer credentials, certificate) wins; bearer tokens are per request.
    std::optional<Identity> identity = peer_.identity;
    if (!identity) identity = identity_from_token(*request_, server_->options);
    if (identity) request_->identity = *identity;
    authenticated_ = identity.has_value();
    if (auto refused = authorization_problem(*request_, identity)) return respond(std::move(*refused), false);
    if (server_->stopping) return finish();
    asio::post(*server_->handler_pool, [self = this->shared_from_this(), request = request_] {
      HttpResponse response = self->run_handler(*request);
      asio::post(self->stream_.get_executor(),
                 [self, response = std::move(response)]() mutable { self->respond(std::move(response), false); });
    });
  }

  HttpResponse run_handler(const HttpRequest& request) {
    if (server_->stopping) return problem(503, "unavailable", "the server is stopping", request.path);
    try {
      return server_->handler(request);
    } catch (const std::exception& e) {
      return problem(500, "internal", std::string("the request handler failed: ") + e.what(), request.path);
    }
  }

  // ---- writing the response --------------------------------------------------------------------

  void observe(unsigned status) {
    if (!server_->observer || !request_) return;
    RequestRecord record;
    record.request = request_.get();
    record.status = status;
    record.authenticated = authenticated_;
    record.latency = std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now() - received_at_);
    server_->observer(record);
  }

  // Observed first, before a byte is written: the audit line of a change exists before its client
  // can read the answer (and so before it can send the next request).
  void respond(HttpResponse response, bool close_after) {
    observe(response.status);
    if (closed_) return;  // the client left while the handler ran
    if (response.events) return start_events(std::move(response));
    const bool head = request_ && request_->method == "HEAD";
    const unsigned version = parser_ && parser_->is_header_done() ? parser_->get().version() : 11;
    auto message = std::make_shared<beast::http::response<beast::http::string_body>>(
        static_cast<beast::http::status>(response.status), version);
    if (!response.content_type.empty()) message->set(beast::http::field::content_type, response.content_type);
    for (const auto& [name, value] : response.headers) message->insert(name, value);
    message->body() = std::move(response.body);
    message->prepare_payload();
    if (head) message->body().clear();  // Content-Length stays: the size a GET would send
    const bool keep_alive = !close_after && !server_->stopping && parser_ && parser_->keep_alive();
    message->keep_alive(keep_alive);
    arm(limits().request_timeout);
    beast::http::async_write(
        stream_, *message,
        [self = this->shared_from_this(), message, keep_alive](const error_code& error, std::size_t) {
          self->disarm();
          if (error) return self->finish();
          if (keep_alive) return self->read_request(false);
          self->linger();
        });
  }

  // Half-close, then read and discard what the client still sends (a body we refused, say) until it
  // closes too: closing with unread data makes the kernel send RST, and a client may then lose the
  // response it has not read yet.
  void linger() {
    error_code ignored;
    socket().shutdown(asio::socket_base::shutdown_send, ignored);
    arm(std::min<std::chrono::milliseconds>(limits().request_timeout, std::chrono::milliseconds(2000)));
    drain();
  }
  void drain() {
    socket().async_read_some(asio::buffer(scratch_),
                             [self = this->shared_from_this()](const error_code& error, std::size_t) {
                               if (error) return self->finish();
                               self->drain();
                             });
  }

  // ---- event streams ---------------------------------------------------------------------------

  void start_events(HttpResponse response) {
    events_ = std::move(response.events);
    auto header = std::make_shared<beast::http::response<beast::http::empty_body>>(beast::http::status::ok, 11);
    header->set(beast::http::field::content_type, "text/event-stream");
    header->set(beast::http::field::cache_control, "no-cache");
    for (const auto& [name, value] : response.headers) header->insert(name, value);
    // No Content-Length and no chunking: the body is everything until the connection closes.
    header->keep_alive(false);
    arm(limits().request_timeout);
    beast::http::async_write(stream_, *header,
                             [self = this->shared_from_this(), header](const error_code& error, std::size_t) {
                               self->disarm();
                               if (error) return self->finish();
                               self->watch_for_close();
                               self->schedule_heartbeat();
                               self->pump();
                             });
  }

  // The client sends nothing on an event stream; a read completes when it closes.
  void watch_for_close() {
    stream_.async_read_some(asio::buffer(scratch_),
                            [self = this->shared_from_this()](const error_code& error, std::size_t) {
                              if (error) return self->finish();
                              self->watch_for_close();
                            });
  }

  void schedule_heartbeat() {
    heartbeat_.expires_after(limits().event_heartbeat);
    heartbeat_.async_wait([self = this->shared_from_this()](const error_code& error) {
      if (error || self->closed_) return;
      if (Clock::now() - self->last_write_ >= self->limits().event_heartbeat) self->heartbeat_due_ = true;
      self->pump();
      self->schedule_heartbeat();
    });
  }

  void pump() {
    if (closed_ || writing_) return;
    std::string out;
    for (auto& frame : events_->take()) out += frame;
    if (out.empty() && heartbeat_due_) out = ": keepalive\n\n";
    heartbeat_due_ = false;
    if (out.empty()) {
      if (!waiting_) {
        waiting_ = true;
        waker_ = std::make_shared<EventWaker>(this->weak_from_this(), stream_.get_executor());
        events_->wait(waker_->callback());
      }
      return;
    }
    writing_ = true;
    pending_ = std::move(out);
    arm(limits().request_timeout);
    asio::async_write(stream_, asio::buffer(pending_),
                      [self = this->shared_from_this()](const error_code& error, std::size_t) {
                        self->writing_ = false;
                        self->disarm();
                        if (error) return self->finish();
                        self->last_write_ = Clock::now();
                        self->pump();
                      });
  }

  // ---- the end ---------------------------------------------------------------------------------

  void finish() {
    if (closed_) return;
    closed_ = true;
    disarm();
    heartbeat_.cancel();
    error_code ignored;
    socket().shutdown(asio::socket_base::shutdown_both, ignored);
    socket().close(ignored);
    if (waker_) waker_->disarm();
    events_.reset();  // the stream's destructor unsubscribes it from whatever feeds it
  }

  std::shared_ptr<ServerContext> server_;
  Stream stream_;
  Peer peer_;
  asio::steady_timer timer_;
  asio::steady_timer heartbeat_;
  beast::flat_buffer buffer_;
  std::optional<RequestParser> parser_;
  std::shared_ptr<HttpRequest> request_;
  Clock::time_point received_at_ = Clock::now();
  bool authenticated_ = false;  // the request was whole and its sender known (RequestRecord)
  std::optional<std::uint64_t> id_;
  bool closed_ = false;
  std::array<char, 4096> scratch_{};
  // Event streams.
  std::shared_ptr<EventStream> events_;
  std::shared_ptr<EventWaker> waker_;
  std::string pending_;
  Clock::time_point last_write_ = Clock::now();
  bool writing_ = false;
  bool waiting_ = false;
  bool heartbeat_due_ = false;
};

}  // namespace hostagent::api::detail
