// api/transport: one connection of the client (unix socket, TCP, TLS over TCP) behind one interface,
// every operation synchronous with a deadline. Asio's timeouts exist only for asynchronous
// operations, so each call starts one and runs the client's io_context until it completes.
#pragma once

#include <boost/asio/io_context.hpp>
#include <boost/asio/ssl/context.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/http.hpp>
#include <chrono>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "hostagent/api/api_client.hpp"

#include "client_url.hpp"
#include "hostagent/common/result.hpp"

namespace hostagent::api::detail {

namespace http = boost::beast::http;
using Deadline = std::chrono::steady_clock::duration;
using StringResponseParser = http::response_parser<http::string_body>;
using StreamResponseParser = http::response_parser<http::buffer_body>;

// A WebSocket's opening handshake (RFC 6455 4.1), and the terminal it is then joined to.
struct WebSocketRequest {
  std::string host;                                          // the Host header
  std::string target;                                        // "/v1/vms/vm1/console"
  std::vector<std::pair<std::string, std::string>> headers;  // Authorization, User-Agent, ...
  Deadline handshake_timeout{};
  ConsoleIo io;
};

// How a WebSocket session went: the server's close reason, or the refusal's status and body.
struct WebSocketOutcome {
  unsigned refused_status = 0;  // the handshake was answered with this instead of 101
  std::string refused_body;
  std::string close_reason;  // "" when the client ended it
};

class Transport {
 public:
  virtual ~Transport() = default;
  virtual boost::system::error_code write(http::request<http::string_body>& request, Deadline timeout) = 0;
  virtual boost::system::error_code read(boost::beast::flat_buffer& buffer, StringResponseParser& parser,
                                         Deadline timeout) = 0;
  virtual boost::system::error_code read_header(boost::beast::flat_buffer& buffer, StreamResponseParser& parser,
                                                Deadline timeout) = 0;
  // Some of the body: what arrived, up to the parser's buffer (need_buffer is not an error).
  virtual boost::system::error_code read_some(boost::beast::flat_buffer& buffer, StreamResponseParser& parser,
                                              Deadline timeout) = 0;
  virtual void close() = 0;
  // This connection upgraded to a WebSocket and joined to request.io until either side ends it
  // (ApiClient::attach). An error for what broke the connection.
  virtual Result<WebSocketOutcome> run_websocket(const WebSocketRequest& request, const std::string& what) = 0;
};

struct ConnectSettings {
  const ClientEndpoint* endpoint = nullptr;
  const std::string* url = nullptr;          // for messages
  boost::asio::ssl::context* tls = nullptr;  // https only
  Deadline timeout{};
  const std::string* server_name = nullptr;  // for messages: "is hostagentd running?"
};

// unavailable for what the operator can fix by starting or reaching the daemon (refused, no such
// socket, unreachable); invalid_argument for a name that does not resolve; io_error for a TLS
// handshake that fails (a certificate the CA did not sign, a host name it does not name).
Result<std::unique_ptr<Transport>> connect(boost::asio::io_context& io, const ConnectSettings& settings);

}  // namespace hostagent::api::detail
