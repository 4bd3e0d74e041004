// api/http_server: the REST API's HTTP/1.1 server (Boost.Beast on Asio). It owns the listeners (a
// unix socket by default; TCP only with TLS client certificates or a bearer token), who each
// client is and what it may do, the limits that keep a slow or hostile client from holding the
// daemon, and the server-sent event streams. What a request means is the handler's business.
#pragma once

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "hostagent/common/listen_address.hpp"
#include "hostagent/common/result.hpp"

namespace hostagent::api {

// reader: reads only (is_read_method). operator: everything.
enum class Role { reader, operator_role };
const char* to_string(Role role);

// Whether a request with this method only reads, and so whether a reader may send it: GET and HEAD,
// the methods RFC 9110 (9.2.1) calls safe that this API knows. The one owner of the reader's rule:
// the server applies it before any handler, the REST routes again, and the audit log by it.
bool is_read_method(const std::string& method);

struct Identity {
  // Who, for the audit log: "uid:1000" (unix socket peer, SO_PEERCRED), "cert:CN=control-plane"
  // (TLS client certificate subject), "token:operator" / "token:reader".
  std::string principal;
  Role role = Role::reader;
};

struct HttpRequest {
  std::string method;                          // "GET", "POST", ...
  std::string target;                          // as sent: "/v1/vms?state=running"
  std::string path;                            // percent-decoded, without the query: "/v1/vms"
  std::map<std::string, std::string> query;    // decoded; a repeated key keeps the last value
  std::map<std::string, std::string> headers;  // lower-case names
  std::string body;
  Identity identity;
  std::string remote;  // "unix" or "203.0.113.5:40112", for logs
};

// A stream of server-sent events (text/event-stream). The server writes what take() returns, then
// calls wait() and writes again when woken; it ends the stream when the client goes away or the
// server stops, and then destroys the stream (which unsubscribes from whatever feeds it).
class EventStream {
 public:
  virtual ~EventStream() = default;
  // Frames ready now, each complete ("event: vm\ndata: {...}\n\n"); empty when none.
  virtual std::vector<std::string> take() = 0;
  // `wake` is called once, from any thread, when frames are waiting (at once if some already are).
  virtual void wait(std::function<void()> wake) = 0;
};

// A two-way byte channel a request is upgraded to: a WebSocket (RFC 6455) whose messages from the
// client go to put() and whose binary messages to the client are what take() returns. The server
// never blocks on it and bounds what it holds of it: what take() returns is written only as fast as
// the client reads, and a client that reads nothing for request_timeout is disconnected, so the
// channel must bound its own output (dropping, not waiting). The server destroys it when the client
// goes away or the server stops.
class ByteChannel {
 public:
  virtual ~ByteChannel() = default;
  // Bytes waiting for the client now; "" when none.
  virtual std::string take() = 0;
  // Bytes from the client; returns how many it took. The rest is offered again after a wake, and
  // the client's next message is not read until then.
  virtual std::size_t put(std::string_view bytes) = 0;
  // `wake` is called once, from any thread, when take() has bytes, put() has room or the channel
  // ended; at once when one of those holds already.
  virtual void wait(std::function<void()> wake) = 0;
  // Why the channel ended, once it has: the server writes what take() still has, then closes the
  // WebSocket with this reason (its first 120 bytes, as a close frame holds 123).
  virtual std::optional<std::string> ended() = 0;
};

struct HttpResponse {
  unsigned status = 200;
  std::string content_type = "application/json";
  std::string body;
  std::vector<std::pair<std::string, std::string>> headers;  // extra: Location, Retry-After, ...
  std::shared_ptr<EventStream> events;  // set: the body is this stream (status 200, text/event-stream)
  // Set: the request is a WebSocket upgrade the handler accepted (status 101, no body), and the
  // socket carries this channel from then on. Set only for a request that asked for the upgrade.
  std::shared_ptr<ByteChannel> channel;
};

// Runs on the server's handler threads, never on a network thread: it may block (on libvirt).
using RequestHandler = std::function<HttpResponse(const HttpRequest&)>;

// Called once per request when its response is ready, before it is written (or when the client
// left while the handler ran): for the audit log and request metrics. Before the write, so an audit
// line is on disk before the client can read the answer; an event stream's at its start.
struct RequestRecord {
  const HttpRequest* request = nullptr;
  unsigned status = 0;
  std::chrono::nanoseconds latency{0};  // from the whole request read to the response ready
  // The request arrived whole and its sender is known (peer credentials, a certificate, a valid
  // token): an attempt the audit log records. Refused connections, malformed requests and requests
  // without a valid token are not, so they cannot flood it; the request metrics count them.
  bool authenticated = false;
};
using RequestObserver = std::function<void(const RequestRecord&)>;

// The numbers that keep one client from holding the API; docs/api.md ("Connections") says how they
// work together, docs/configuration.md (api.limits) how an operator sets them.
struct ServerLimits {
  std::size_t max_body_bytes = 1 << 20;     // 413 above
  std::size_t max_header_bytes = 16 << 10;  // 431 above
  // From accept (or a keep-alive request's first byte) to the end of the headers: the TLS handshake,
  // the first byte and the whole header. Past it: 408, and the connection is closed.
  std::chrono::milliseconds header_timeout{5000};
  std::chrono::milliseconds request_timeout{10000};  // the body, from the end of the headers; 408 past it
  std::chrono::milliseconds idle_timeout{60000};     // a keep-alive connection with no request is closed
  // Every connection held, the reserve included. Once the general slots are taken, the oldest
  // connection still waiting for its request (then the oldest idle one) is evicted to make room.
  int max_connections = 256;
  // The last slots of max_connections: a connection there is served a health probe and nothing
  // else (503 with Retry-After), so probes are answered while the rest is full.
  int health_reserve = 16;
  int max_connections_per_peer = 64;                 // TCP, per peer address; beyond: 503 at once
  int max_event_streams = 32;                        // beyond: GET of an event stream is 503
  std::chrono::milliseconds event_heartbeat{15000};  // a comment line on idle event streams
  // The kernel send queue of an event stream (SO_SNDBUF): what a reader that stops reading holds
  // in the kernel. The server writes a stream only what fits there, so its frames wait in the
  // stream's own bounded queue (which counts what it drops: the `overflow` event) and room is kept
  // for a last frame: a stream whose reader makes no room for request_timeout is sent
  // `event: end` with {"reason":"slow_reader"} and closed.
  std::size_t event_send_buffer = 64 << 10;
};

struct ServerOptions {
  std::vector<ListenAddress> listen;
  // TCP only: mutual TLS when certificate, key and client_ca are set. A client certificate whose
  // subject CN is in operator_common_names is an operator; any other one the CA signed, a reader.
  std::string tls_certificate_file;
  std::string tls_key_file;
  std::string tls_client_ca_file;
  std::vector<std::string> operator_common_names;
  // TCP: bearer tokens ("Authorization: Bearer T"); "" for none. A TCP listener without TLS
  // requires at least one of them (the configuration check enforces it; start() refuses otherwise).
  std::string operator_token;
  std::string reader_token;
  // Unix sockets: made with this mode, and this group when it exists (else the process's group, and
  // a warning). Every peer that can connect is an operator: the socket's permissions are the control,
  // as for libvirt's own socket.
  unsigned socket_mode = 0660;
  std::string socket_group = "hostagent";
  // Unix sockets systemd already listens on and passed (socket activation, sd_listen_fds(3)): a
  // unix address of `listen` whose path is here is served on this fd, which the server then owns.
  // It is not bound; its mode and group are systemd's (SocketMode=, SocketGroup=); its file stays
  // when the server stops, so systemd goes on listening for the next start.
  std::map<std::filesystem::path, int> inherited_unix_sockets;
  ServerLimits limits;
  // The health probes: the paths a connection on probation (health_reserve) is served, and whose
  // handlers run on a thread of their own, never queued behind other requests.
  std::vector<std::string> probe_paths;
  int network_threads = 2;
  int handler_threads = 4;
};

// The connection budget as it stands (ServerLimits says what each number is held against).
struct ConnectionStats {
  int open = 0;     // holding a slot: general and reserve
  int reserve = 0;  // of open: on probation in the health reserve
  int event_streams = 0;
  std::uint64_t evicted = 0;       // since start: stalled or idle connections closed to make room
  std::uint64_t refused_peer = 0;  // since start: over max_connections_per_peer
  std::uint64_t refused_full = 0;  // since start: every slot held, none evictable
};

class HttpServer {
 public:
  // Binds every listener (a stale unix socket file is replaced; a live one, where another process
  // answers, is an error naming it) and starts serving. The handler and observer are called until
  // stop() returns.
  static Result<std::unique_ptr<HttpServer>> start(ServerOptions options, RequestHandler handler,
                                                   RequestObserver observer = nullptr);
  virtual ~HttpServer() = default;  // stops

  // Where it listens, as ListenAddress with the bound port filled in (tcp port 0 binds any port).
  virtual std::vector<ListenAddress> endpoints() const = 0;
  virtual ConnectionStats connection_stats() const = 0;
  // Stops accepting, ends event streams, closes connections, joins the threads; removes the unix
  // socket files it made. Idempotent.
  virtual void stop() = 0;
};

}  // namespace hostagent::api
