// api/api_client: the REST API's client, for hostagentctl and the benchmarks. Synchronous HTTP/1.1
// (Boost.Beast) over one keep-alive connection: a unix socket (the default), https:// with the
// server verified (and a client certificate for mutual TLS), or http:// with a bearer token (meant
// for loopback). Problems (RFC 9457) become Errors; the event stream is read frame by frame.
#pragma once

#include <boost/json/value.hpp>
#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "hostagent/common/result.hpp"

namespace hostagent::api {

inline constexpr const char* kDefaultApiUrl = "unix:/run/hostagent/hostagent.sock";

struct ClientOptions {
  // unix:/ABSOLUTE/PATH, https://HOST[:PORT] (443), http://HOST[:PORT] (80); IPv6 as [::1].
  std::string url = kDefaultApiUrl;
  std::string token;             // sent as "Authorization: Bearer TOKEN" when not empty
  std::string certificate_file;  // https: the client certificate (PEM chain), for mutual TLS
  std::string key_file;          // https: its private key (PEM)
  std::string ca_file;           // https: the CA that signed the server's certificate; "" = the system's
  std::chrono::milliseconds connect_timeout{5000};
  std::chrono::milliseconds read_timeout{30000};  // for one request's whole answer
  // The server, as messages name it ("is hostagentd running?"); another service's client (the
  // fleet's Placement) names its own.
  std::string server_name = "hostagentd";
  // Sent with every request, after the client's own: another service's authentication and version
  // headers ("X-Auth-Token", "OpenStack-API-Version").
  std::vector<std::pair<std::string, std::string>> headers;
};

struct ApiResponse {
  unsigned status = 0;
  std::string content_type;                    // without parameters: "application/json"
  std::map<std::string, std::string> headers;  // lower-case names
  std::string body;
};

// An RFC 9457 problem as hostagentd writes it (docs/api.md, "Errors").
struct Problem {
  unsigned status = 0;
  std::string type;
  std::string title;
  std::string detail;
  std::string instance;
  std::string code;         // "invalid_argument", "not_found", ..., or the HTTP layer's own ("unauthenticated")
  std::string field;        // the request field at fault, "" when none
  boost::json::value json;  // the whole body, for members beyond these (a template check's errors)
};

// The problem in a response body (problem+json, or any JSON object with "status" and "detail");
// nullopt when it is not one.
std::optional<Problem> parse_problem(const std::string& body);
// The Error a problem stands for: its code (ErrorCode's name, or the nearest for the HTTP layer's
// own: unauthenticated/forbidden -> invalid_argument, too_many_connections/not_ready ->
// unavailable), its detail, and the field when named: "DETAIL (field: F)".
Error problem_error(const Problem& problem);

// One server-sent event: `id`, `event` (the name; "message" when the frame names none) and `data`
// (its data lines joined with "\n").
struct ServerEvent {
  std::string id;
  std::string event;
  std::string data;
};

// A terminal's two ends, for ApiClient::attach: what is read from `input` goes to the server,
// what the server sends is written to `output`. `escape` read from input (never sent) ends the
// session, as does the end of input.
struct ConsoleIo {
  int input_fd = 0;
  int output_fd = 1;
  char escape = 0x1d;  // Ctrl-], as virsh console
};

class ApiClient {
 public:
  // Checks the URL and loads the TLS files; connects on the first request.
  static Result<std::unique_ptr<ApiClient>> make(ClientOptions options);
  virtual ~ApiClient() = default;

  // The URL as the operator gave it, for messages.
  virtual const std::string& url() const = 0;

  // One request and its answer, whatever the status. Errors: unavailable when the server cannot be
  // reached or goes away ("cannot connect to unix:/run/...: No such file or directory; is hostagentd
  // running?"), io_error for a timeout or a broken answer. A keep-alive connection the server closed
  // meanwhile is reopened once.
  virtual Result<ApiResponse> request(const std::string& method, const std::string& target,
                                      const std::string& body = "",
                                      const std::string& content_type = "application/json") = 0;

  // request(), then a status other than 2xx becomes the problem's Error (or one naming the status
  // when the body is not a problem).
  Result<ApiResponse> call(const std::string& method, const std::string& target, const std::string& body = "",
                           const std::string& content_type = "application/json");
  // GET, a 2xx JSON answer parsed.
  Result<boost::json::value> get_json(const std::string& target);
  // call() with a JSON body, the 2xx JSON answer parsed.
  Result<boost::json::value> send_json(const std::string& method, const std::string& target,
                                       const boost::json::value& body);

  // GET target (/v1/events) on a connection of its own and calls on_event for each event, in order,
  // until on_event returns false (ok) or the stream ends (unavailable: the server went away).
  // Comment lines (": keepalive") are skipped. `idle_timeout` bounds the wait for the next line; the
  // server sends a comment every 15 s.
  virtual Status read_events(const std::string& target, const std::function<bool(const ServerEvent&)>& on_event,
                             std::chrono::milliseconds idle_timeout = std::chrono::seconds(60)) = 0;

  // GET target (/v1/vms/NAME/console) upgraded to a WebSocket on a connection of its own, joined to
  // `io` until the escape byte or the end of input (ok, "") or until the server closes it (ok, its
  // reason: "taken over by uid:0", the guest stopped). A refusal (409, 403, 404) is its problem's
  // Error; unavailable when the server cannot be reached or goes away.
  virtual Result<std::string> attach(const std::string& target, const ConsoleIo& io) = 0;
};

// Splits complete frames off the front of buffer (a text/event-stream, "\n\n" between frames; "\r\n"
// accepted) and returns the events in them; what remains is a frame not complete yet. Frames
// without data (comments only) give no event.
std::vector<ServerEvent> take_server_events(std::string& buffer);

}  // namespace hostagent::api
