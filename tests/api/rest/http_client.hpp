// Test helper: a small HTTP/1.1 client (Boost.Beast) over a unix socket or TCP, one request per
// connection, every read bounded by a deadline so a broken server fails a test instead of hanging it;
// and a reader of server-sent event streams.
#pragma once

#include <boost/asio/io_context.hpp>
#include <boost/asio/local/stream_protocol.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/http/buffer_body.hpp>
#include <boost/beast/http/parser.hpp>
#include <chrono>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "hostagent/common/result.hpp"

namespace hostagent::testing {

struct ClientRequest {
  std::string method = "GET";
  std::string target = "/";
  std::string body = {};
  std::string content_type = {};  // "" sends none
  std::vector<std::pair<std::string, std::string>> headers = {};
};

struct ClientResponse {
  unsigned status = 0;
  std::string content_type;
  std::map<std::string, std::string> headers;  // lower-case names
  std::vector<std::string> repeated_headers;   // names sent more than once (headers holds the last)
  std::string body;
};

// Where to connect: a unix socket path, or host and port.
struct ClientEndpoint {
  std::filesystem::path socket_path;
  std::string host;
  uint16_t port = 0;
};

// io_error when the connection, the write or the read fails or the deadline passes.
Result<ClientResponse> send_request(const ClientEndpoint& endpoint, const ClientRequest& request,
                                    std::chrono::milliseconds timeout = std::chrono::seconds(30));

// A GET of an event stream held open; read_until collects the decoded body as it arrives.
class EventStreamReader {
 public:
  static Result<std::unique_ptr<EventStreamReader>> open(const std::filesystem::path& socket_path,
                                                         const std::string& target = "/v1/events");
  unsigned status() const { return status_; }
  const std::string& content_type() const { return content_type_; }
  // Reads until done(everything read so far) or the timeout; returns everything read so far.
  std::string read_until(const std::function<bool(const std::string&)>& done, std::chrono::milliseconds timeout);

 private:
  EventStreamReader() : socket_(io_) {}
  boost::asio::io_context io_;
  boost::asio::local::stream_protocol::socket socket_;
  boost::beast::flat_buffer buffer_;
  boost::beast::http::response_parser<boost::beast::http::buffer_body> parser_;
  unsigned status_ = 0;
  std::string content_type_;
  std::string text_;
};

}  // namespace hostagent::testing
