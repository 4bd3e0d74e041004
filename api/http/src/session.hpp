// api/http session: one client connection, for any of the three transports (unix socket, plain
// TCP, TLS over TCP). Everything it does runs on its strand; the handler runs on the server's
// handler pool and its response is posted back here, so a handler may block without holding a
// network thread. It enforces the per-connection limits with one deadline timer (the handshake and
// the headers within header_timeout, the whole request within request_timeout, each past its
// deadline a 408; the next request within idle_timeout; each write within request_timeout) and
// tells the server's ConnectionBudget each phase it enters, which may evict it for a newer one.
#pragma once

#include <algorithm>
#include <array>
#include <chrono>
#include <deque>
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
#include <boost/beast/websocket.hpp>
#include <boost/beast/websocket/ssl.hpp>

#include "auth.hpp"
#include "event_waker.hpp"
#include "hostagent/api/problem.hpp"
#include "request_conversion.hpp"
#include "server_context.hpp"
#include "socket_room.hpp"

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
  std::string remote;   // "unix" or "ADDRESS:PORT"
  std::string address;  // TCP: the address alone, which max_connections_per_peer counts; "" for unix
  std::optional<Identity> identity;
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
        buffer_(read_buffer_limit(server_->options.limits)),
        room_timer_(stream_.get_executor()) {}

  ~Session() override {
    if (!id_) return;
    server_->remove(*id_);
    server_->budget->leave(*id_);
  }

  Session(const Session&) = delete;
  Session& operator=(const Session&) = delete;

  void start() {
    id_ = server_->add(this->weak_from_this());  // stop() closes it, admitted or not
    const auto decision = server_->budget->admit(*id_, peer_.address, Clock::now());
    admission_ = decision.admission;
    if (decision.evict) server_->evict(*decision.evict);
    asio::dispatch(stream_.get_executor(), [self = this->shared_from_this()] { self->begin(); });
  }

  void close() override {
    asio::post(stream_.get_executor(), [self = this->shared_from_this()] { self->finish(); });
  }

  void evict() override {
    asio::post(stream_.get_executor(), [self = this->shared_from_this()] { self->on_evicted(); });
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
      self->on_deadline();
    });
  }
  void disarm() { timer_.cancel(); }

  // A request that did not arrive whole in time is answered 408 and closed (RFC 9110 15.5.9), where
  // the transport is up to carry it; anything else past its deadline (an idle keep-alive, a write
  // the client does not read) is closed.
  void on_deadline() {
    if (phase_ != Phase::awaiting || !handshake_done_ || writing_continue_) return finish();
    abandon_read();
    refuse(
        408, "request_timeout",
        parser_ && parser_->is_header_done()
            ? "the request body did not arrive within " + std::to_string(limits().request_timeout.count()) + " ms"
            : "the request's headers did not arrive within " + std::to_string(limits().header_timeout.count()) + " ms");
  }

  // The budget gave this connection's slot to a newer one: it is no longer counted, and goes.
  void on_evicted() {
    if (closed_) return;
    if (phase_ == Phase::awaiting && handshake_done_ && !writing_continue_) {
      abandon_read();
      return refuse(408, "request_timeout",
                    "the request had not arrived when the server needed the connection for another client");
    }
    if (phase_ != Phase::busy) finish();  // a busy one was answering already: it closes after
    evicted_ = true;
  }

  // Tells the budget this connection's phase; false (and the connection ended) when it no longer
  // holds a slot.
  bool enter(Phase phase) {
    phase_ = phase;
    if (server_->budget->enter(*id_, phase, Clock::now())) return true;
    finish();
    return false;
  }

  // The read in progress is given up for an answer: its completion (operation_aborted) is ignored,
  // where it would otherwise close the connection under the answer.
  void abandon_read() {
    abandoned_ = true;
    error_code ignored;
    socket().cancel(ignored);
  }

  // Answers a problem to a request that was not (or not wholly) read, and closes; the slot is given
  // back at once, since the connection only says why it goes.
  void refuse(unsigned status, const std::string& code, const std::string& detail) {
    phase_ = Phase::busy;
    server_->budget->leave(*id_);
    request_ = partial_request();
    respond(problem(status, code, detail, request_->path), true);
  }

  // ---- reading a request -----------------------------------------------------------------------

  void begin() {
    if (server_->stopping) return finish();
    arm(limits().header_timeout);  // the TLS handshake and the first request's headers, together
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
    handshake_done_ = true;
    // Refused at admission: answered at once, nothing read. The observer sees the 503 too (the
    // request metrics count it).
    if (admission_ == Admission::refused_full) {
      return refuse(503, "too_many_connections",
                    "the server holds " + std::to_string(limits().max_connections) +
                        " connections (its limit) and none can be closed for this one; retry later");
    }
    if (admission_ == Admission::refused_peer) {
      return refuse(503, "too_many_connections",
                    "this address holds " + std::to_string(limits().max_connections_per_peer) +
                        " connections (api.limits.max_connections_per_peer); use fewer, or retry later");
    }
    read_request(true);
  }

  void read_request(bool first) {
    if (closed_) return;
    parser_.emplace();
    apply_limits(*parser_, limits());
    request_.reset();
    authenticated_ = false;
    if (first) return read_header();  // awaiting since admission, under header_timeout since begin()
    if (buffer_.size() > 0) {
      if (!enter(Phase::awaiting)) return;
      arm(limits().header_timeout);
      return read_header();
    }
    // Keep-alive: idle_timeout until the next request begins, then header_timeout for its headers.
    if (!enter(Phase::idle)) return;
    arm(limits().idle_timeout);
    stream_.async_read_some(buffer_.prepare(1024),
                            [self = this->shared_from_this()](const error_code& error, std::size_t bytes) {
                              if (self->abandoned_) return;
                              if (error) return self->finish();
                              self->buffer_.commit(bytes);
                              if (!self->enter(Phase::awaiting)) return;
                              self->arm(self->limits().header_timeout);
                              self->read_header();
                            });
  }

  // Beast's async_read_header, by hand, so the header's bytes can be checked before Beast joins
  // folded lines: the parser takes the header only once all of it is in the buffer (it looks for
  // the blank line first), so until then the buffer holds every byte of it.
  void read_header() {
    const auto bytes = buffer_.data();
    const std::string_view unread(static_cast<const char*>(bytes.data()), bytes.size());
    if (auto folded = folding_rejection(unread)) return refuse(folded->status, folded->code, folded->detail);
    if (!unread.empty()) {
      error_code error;
      buffer_.consume(parser_->put(bytes, error));
      if (error && error != beast::http::error::need_more) return on_read_error(error);
      if (parser_->is_header_done()) return on_header();
    }
    const std::size_t room = std::min<std::size_t>(4096, buffer_.max_size() - buffer_.size());
    if (room == 0) return on_read_error(beast::http::error::buffer_overflow);
    stream_.async_read_some(buffer_.prepare(room),
                            [self = this->shared_from_this()](const error_code& error, std::size_t got) {
                              if (self->abandoned_) return;
                              if (error) return self->finish();  // gone, or closed by its deadline
                              self->buffer_.commit(got);
                              self->read_header();
                            });
  }

  void on_header() {
    arm(limits().request_timeout);  // the body
    const auto& header = parser_->get();
    if (auto refused = header_rejection(header)) return refuse(refused->status, refused->code, refused->detail);
    const auto expect = header[beast::http::field::expect];
    if (!parser_->is_done() && beast::iequals(expect, "100-continue")) {
      // curl and others wait (a second) for this before sending a body (RFC 9110 10.1.1).
      static constexpr std::string_view kContinue = "HTTP/1.1 100 Continue\r\n\r\n";
      writing_continue_ = true;
      return asio::async_write(stream_, asio::buffer(kContinue.data(), kContinue.size()),
                               [self = this->shared_from_this()](const error_code& write_error, std::size_t) {
                                 self->writing_continue_ = false;
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
                              if (self->abandoned_) return;
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
    refuse(rejection.status, rejection.code, rejection.detail);
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
    if (!enter(Phase::busy)) return;
    RequestRejection rejection;
    auto converted = to_http_request(parser_->get(), &rejection);
    if (!converted) return refuse(rejection.status, rejection.code, rejection.detail);
    request_ = std::make_shared<HttpRequest>(std::move(converted).value());
    request_->remote = peer_.remote;
    // A connection's identity (peer credentials, certificate) wins; bearer tokens are per request.
    std::optional<Identity> identity = peer_.identity;
    if (!identity) identity = identity_from_token(*request_, server_->options);
    if (identity) request_->identity = *identity;
    authenticated_ = identity.has_value();
    if (auto refused = authorization_problem(*request_, identity)) return respond(std::move(*refused), false);
    if (server_->stopping) return finish();
    if (admission_ == Admission::probation && !is_probe(request_->path)) {
      return respond(problem(503, "too_many_connections",
                             "the server is near its connection limit and serves only the health probes on this "
                             "connection; retry later",
                             request_->path),
                     true);
    }
    auto& pool = is_probe(request_->path) ? *server_->probe_pool : *server_->handler_pool;
    asio::post(pool, [self = this->shared_from_this(), request = request_] {
      HttpResponse response = self->run_handler(*request);
      asio::post(self->stream_.get_executor(),
                 [self, response = std::move(response)]() mutable { self->respond(std::move(response), false); });
    });
  }

  bool is_probe(const std::string& path) const {
    const auto& probes = server_->options.probe_paths;
    return std::find(probes.begin(), probes.end(), path) != probes.end();
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
    const bool head = request_ && request_->method == "HEAD";
    if (response.events && head) {
      response.events.reset();  // a HEAD of a stream: its headers; the stream unsubscribes
      response.content_type = "text/event-stream";
    }
    if (response.channel && !is_websocket_upgrade()) {  // an HTTP/1.0 request, say
      response = problem(426, "upgrade_required", "a WebSocket needs HTTP/1.1 with Upgrade: websocket (RFC 6455 4.1)",
                         request_ ? request_->path : "/");
      response.headers.emplace_back("Upgrade", "websocket");
    }
    if ((response.events || response.channel) && !closed_ && !admit_stream(response)) close_after = true;
    observe(response.status);
    if (closed_) return;  // the client left while the handler ran
    if (response.events) return start_events(std::move(response));
    if (response.channel) return start_channel(std::move(response));
    const unsigned version = parser_ && parser_->is_header_done() ? parser_->get().version() : 11;
    auto message = std::make_shared<beast::http::response<beast::http::string_body>>(
        static_cast<beast::http::status>(response.status), version);
    if (!response.content_type.empty()) message->set(beast::http::field::content_type, response.content_type);
    for (const auto& [name, value] : response.headers) message->insert(name, value);
    message->body() = std::move(response.body);
    message->prepare_payload();
    if (head) message->body().clear();  // Content-Length stays: the size a GET would send
    // A connection on probation is served once; one evicted while busy closes after its answer.
    const bool keep_alive = !close_after && !server_->stopping && admission_ == Admission::admitted && !evicted_ &&
                            parser_ && parser_->keep_alive();
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
    phase_ = Phase::busy;
    server_->budget->leave(*id_);  // bounded below by its own deadline; no longer the budget's
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

  // A stream takes one of max_event_streams; with none free, the answer becomes a 503 and the
  // connection closes after it (the stream the handler made is dropped, which unsubscribes it).
  bool admit_stream(HttpResponse& response) {
    bool at_cap = false;
    phase_ = Phase::stream;
    if (server_->budget->enter(*id_, Phase::stream, Clock::now(), &at_cap)) return true;
    phase_ = Phase::busy;
    response = problem(503, "too_many_connections",
                       at_cap ? "the server has " + std::to_string(limits().max_event_streams) +
                                    " event streams open (api.limits.max_event_streams); retry later"
                              : "the server needed this connection for another client; retry",
                       request_ ? request_->path : "/");
    return false;
  }

  void start_events(HttpResponse response) {
    events_ = std::move(response.events);
    (void)set_send_buffer(socket().native_handle(), limits().event_send_buffer);  // else the kernel's default
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

  // Writes what the stream has, as far as the socket takes it without waiting; the rest waits
  // in backlog_ (and what comes meanwhile in the stream's own bounded queue, which drops the
  // oldest and says so with its overflow frame, first of the next take).
  void pump() {
    if (channel_) return pump_channel();
    if (closed_ || writing_) return;
    if (backlog_.empty()) {
      for (auto& frame : events_->take()) backlog_.push_back(std::move(frame));
    }
    if (backlog_.empty() && heartbeat_due_) backlog_.emplace_back(": keepalive\n\n");
    heartbeat_due_ = false;
    if (backlog_.empty()) {
      if (!waiting_) {
        waiting_ = true;
        waker_ = std::make_shared<EventWaker>(this->weak_from_this(), stream_.get_executor());
        events_->wait(waker_->callback());
      }
      return;
    }
    std::string out = frames_that_fit();
    if (out.empty()) return wait_for_room();
    stalled_since_.reset();
    write_stream(std::move(out), false);
  }

  // The last frame may need this much: kept free in the send queue for it.
  static constexpr std::size_t kLastFrameRoom = 4096;

  std::string frames_that_fit() {
    const SocketRoom room = socket_room(socket().native_handle());
    const std::size_t free = room.known ? (room.free > kLastFrameRoom ? room.free - kLastFrameRoom : 0) : SIZE_MAX;
    std::string out;
    while (!backlog_.empty() && out.size() + backlog_.front().size() <= free) {
      out += backlog_.front();
      backlog_.pop_front();
    }
    // A frame larger than the whole queue goes once the queue is empty (the write then waits).
    if (out.empty() && room.empty && !backlog_.empty()) {
      out = std::move(backlog_.front());
      backlog_.pop_front();
    }
    return out;
  }

  // The reader has not made room: look again shortly; after request_timeout, say why and go.
  void wait_for_room() {
    const auto now = Clock::now();
    if (!stalled_since_) stalled_since_ = now;
    if (now - *stalled_since_ >= limits().request_timeout) {
      return write_stream(
          "event: end\ndata: {\"reason\":\"slow_reader\",\"detail\":\"the stream's reader made no room for " +
              std::to_string(limits().request_timeout.count()) + " ms; reconnect with Last-Event-ID to resume\"}\n\n",
          true);
    }
    room_timer_.expires_after(std::chrono::milliseconds(50));
    room_timer_.async_wait([self = this->shared_from_this()](const error_code& error) {
      if (!error && !self->closed_) self->pump();
    });
  }

  void write_stream(std::string out, bool last) {
    writing_ = true;
    pending_ = std::move(out);
    arm(limits().request_timeout);
    asio::async_write(stream_, asio::buffer(pending_),
                      [self = this->shared_from_this(), last](const error_code& error, std::size_t) {
                        self->writing_ = false;
                        self->disarm();
                        if (error) return self->finish();
                        self->last_write_ = Clock::now();
                        if (last) return self->linger();
                        self->pump();
                      });
  }

  // ---- WebSocket channels ----------------------------------------------------------------------
  // The handshake's answer goes out once the handler accepted; then one read (the client's next
  // message, not read while the channel has no room for the last) and one write (what the channel
  // has, or a ping once a heartbeat passes in silence, or the close) are outstanding at a time. A
  // write that the client does not read within request_timeout ends the connection: the channel,
  // not the socket, holds what waits, and bounds it.

  // The largest message the client may send: a console's typing, or a paste.
  static constexpr std::size_t kChannelMessageMax = std::size_t{64} << 10U;
  // A close frame's reason holds 123 bytes (RFC 6455 5.5.1: a control frame's payload is at most
  // 125, two of them the code).
  static constexpr std::size_t kCloseReasonMax = 120;

  bool is_websocket_upgrade() const { return parser_ && beast::websocket::is_upgrade(parser_->get()); }

  void start_channel(HttpResponse response) {
    channel_ = std::move(response.channel);
    (void)set_send_buffer(socket().native_handle(), limits().event_send_buffer);
    ws_ = std::make_unique<beast::websocket::stream<Stream&>>(stream_);
    ws_->binary(true);
    ws_->read_message_max(kChannelMessageMax);
    ws_->set_option(beast::websocket::stream_base::decorator(
        [headers = std::move(response.headers)](beast::websocket::response_type& answer) {
          for (const auto& [name, value] : headers) answer.insert(name, value);
        }));
    writing_ = true;
    arm(limits().request_timeout);
    ws_->async_accept(parser_->get(), [self = this->shared_from_this()](const error_code& error) {
      self->writing_ = false;
      self->disarm();
      if (error) return self->finish();
      self->schedule_heartbeat();
      self->read_channel();
      self->pump_channel();
    });
  }

  void read_channel() {
    if (closed_ || reading_) return;
    reading_ = true;
    ws_->async_read(ws_in_, [self = this->shared_from_this()](const error_code& error, std::size_t) {
      self->reading_ = false;
      if (error) return self->finish();  // the client closed, went away, or broke the protocol
      const auto data = self->ws_in_.data();
      self->unput_.append(static_cast<const char*>(data.data()), data.size());
      self->ws_in_.consume(data.size());
      self->offer_input();
    });
  }

  // The client's bytes to the channel; what it has no room for waits (and the reading with it)
  // until it wakes the connection. Once the channel ended nothing takes them: they are dropped, and
  // the connection closes.
  void offer_input() {
    if (closed_ || unput_.empty()) return;
    if (channel_->ended()) return unput_.clear();
    unput_.erase(0, channel_->put(unput_));
    if (unput_.empty()) return read_channel();
    await_channel();
  }

  void await_channel() {
    if (waiting_ || closed_) return;
    waiting_ = true;
    waker_ = std::make_shared<EventWaker>(this->weak_from_this(), stream_.get_executor());
    channel_->wait(waker_->callback());
  }

  void pump_channel() {
    if (closed_) return;
    offer_input();
    if (writing_) return;
    std::string out = channel_->take();
    if (!out.empty()) return write_channel(std::move(out));
    if (auto reason = channel_->ended()) return close_channel(*reason);
    if (heartbeat_due_) {
      heartbeat_due_ = false;
      return ping_channel();
    }
    await_channel();
  }

  void write_channel(std::string out) {
    writing_ = true;
    pending_ = std::move(out);
    arm(limits().request_timeout);
    ws_->async_write(asio::buffer(pending_), [self = this->shared_from_this()](const error_code& error, std::size_t) {
      self->after_channel_write(error);
    });
  }

  // A client that vanished without closing is found when its pings stop being taken.
  void ping_channel() {
    writing_ = true;
    arm(limits().request_timeout);
    ws_->async_ping({},
                    [self = this->shared_from_this()](const error_code& error) { self->after_channel_write(error); });
  }

  void after_channel_write(const error_code& error) {
    writing_ = false;
    disarm();
    if (error) return finish();
    last_write_ = Clock::now();
    pump_channel();
  }

  // The channel ended: its reason in the close frame, cut to fit whole UTF-8 characters.
  void close_channel(const std::string& reason) {
    std::string shown = reason.substr(0, std::min(reason.size(), kCloseReasonMax));
    while (shown.size() < reason.size() && !shown.empty() &&
           (static_cast<unsigned char>(reason[shown.size()]) & 0xC0U) == 0x80U) {
      shown.pop_back();
    }
    writing_ = true;
    arm(limits().request_timeout);
    ws_->async_close(beast::websocket::close_reason(beast::websocket::close_code::normal, shown),
                     [self = this->shared_from_this()](const error_code&) {
                       self->writing_ = false;
                       self->finish();
                     });
  }

  // ---- the end ---------------------------------------------------------------------------------

  void finish() {
    if (closed_) return;
    closed_ = true;
    server_->budget->leave(*id_);
    disarm();
    heartbeat_.cancel();
    room_timer_.cancel();
    error_code ignored;
    socket().shutdown(asio::socket_base::shutdown_both, ignored);
    socket().close(ignored);
    if (waker_) waker_->disarm();
    events_.reset();   // the stream's destructor unsubscribes it from whatever feeds it
    channel_.reset();  // and the channel's detaches it from what it joins
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
  Admission admission_ = Admission::refused_full;
  Phase phase_ = Phase::awaiting;  // as last told to the budget
  bool handshake_done_ = false;    // a 408 can be written
  bool evicted_ = false;           // evicted while busy: closes after its answer
  bool abandoned_ = false;         // the read in progress was given up for an answer (408)
  bool writing_continue_ = false;  // a 100 Continue is being written
  bool closed_ = false;
  std::array<char, 4096> scratch_{};
  // Event streams.
  std::shared_ptr<EventStream> events_;
  std::shared_ptr<EventWaker> waker_;
  std::string pending_;
  std::deque<std::string> backlog_;                 // taken from the stream, not yet written
  std::optional<Clock::time_point> stalled_since_;  // the reader has made no room since
  asio::steady_timer room_timer_;
  Clock::time_point last_write_ = Clock::now();
  bool writing_ = false;
  bool waiting_ = false;
  bool heartbeat_due_ = false;
  // WebSocket channels (waker_, pending_, writing_, waiting_ and heartbeat_due_ as above).
  std::shared_ptr<ByteChannel> channel_;
  std::unique_ptr<beast::websocket::stream<Stream&>> ws_;  // on stream_, declared after it: goes first
  beast::flat_buffer ws_in_;
  std::string unput_;  // from the client, not yet taken by the channel
  bool reading_ = false;
};

}  // namespace hostagent::api::detail
