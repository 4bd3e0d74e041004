// Test helper: the HTTP client.
#include "http_client.hpp"

#include <poll.h>

#include <boost/asio/connect.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/http/read.hpp>
#include <boost/beast/http/string_body.hpp>
#include <boost/beast/http/write.hpp>

namespace hostagent::testing {
namespace {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using Clock = std::chrono::steady_clock;

Error failed(const std::string& what, const boost::system::error_code& ec) {
  return Error{ErrorCode::io_error, what + ": " + ec.message()};
}

http::request<http::string_body> make_request(const ClientRequest& r) {
  http::request<http::string_body> request;
  request.version(11);
  const auto verb = http::string_to_verb(r.method);
  if (verb == http::verb::unknown) {
    request.method_string(r.method);
  } else {
    request.method(verb);
  }
  request.target(r.target);
  request.set(http::field::host, "localhost");
  request.set(http::field::connection, "close");
  for (const auto& [name, value] : r.headers) request.set(name, value);
  if (!r.content_type.empty()) request.set(http::field::content_type, r.content_type);
  request.body() = r.body;
  if (!r.body.empty() || r.method == "POST") request.prepare_payload();
  return request;
}

// Waits for the socket to be readable; false when the deadline passes first.
bool wait_readable(int fd, Clock::time_point deadline) {
  const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
  if (left <= 0) return false;
  pollfd poll_fd{fd, POLLIN, 0};
  return ::poll(&poll_fd, 1, static_cast<int>(left)) > 0;
}

// http::read on a non-blocking socket: would_block means "poll, then again".
enum class ReadTo { header, some, end };

template <typename Stream, typename Parser>
boost::system::error_code read_by(Stream& stream, beast::flat_buffer& buffer, Parser& parser, ReadTo to,
                                  Clock::time_point deadline) {
  while (true) {
    boost::system::error_code ec;
    if (to == ReadTo::header) {
      http::read_header(stream, buffer, parser, ec);
    } else if (to == ReadTo::some) {
      http::read_some(stream, buffer, parser, ec);
    } else {
      http::read(stream, buffer, parser, ec);
    }
    if (ec != asio::error::would_block && ec != asio::error::try_again) return ec;
    if (!wait_readable(stream.native_handle(), deadline)) return asio::error::timed_out;
  }
}

ClientResponse to_response(const http::response<http::string_body>& message) {
  ClientResponse response;
  response.status = message.result_int();
  for (const auto& field : message) {
    std::string name(field.name_string());
    for (auto& c : name) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    if (response.headers.count(name) != 0) response.repeated_headers.push_back(name);
    response.headers[name] = std::string(field.value());
  }
  response.content_type = response.headers["content-type"];
  response.body = message.body();
  return response;
}

template <typename Stream>
Result<ClientResponse> exchange(Stream& stream, const ClientRequest& request, std::chrono::milliseconds timeout) {
  const auto deadline = Clock::now() + timeout;
  boost::system::error_code write_error;
  auto message = make_request(request);
  http::write(stream, message, write_error);
  // A server that refuses a request early (413) may close before the body is all sent: its answer
  // is still there to read.
  stream.non_blocking(true);
  beast::flat_buffer buffer;
  http::response_parser<http::string_body> parser;
  parser.body_limit(64U << 20);
  if (request.method == "HEAD") parser.skip(true);
  const auto ec = read_by(stream, buffer, parser, ReadTo::end, deadline);
  if (ec && !(ec == http::error::end_of_stream && parser.is_header_done())) {
    return failed(write_error ? "write (" + write_error.message() + "), then read" : "read", ec);
  }
  return to_response(parser.get());
}

}  // namespace

Result<ClientResponse> send_request(const ClientEndpoint& endpoint, const ClientRequest& request,
                                    std::chrono::milliseconds timeout) {
  asio::io_context io;
  boost::system::error_code ec;
  if (!endpoint.socket_path.empty()) {
    asio::local::stream_protocol::socket socket(io);
    socket.connect(asio::local::stream_protocol::endpoint(endpoint.socket_path.string()), ec);
    if (ec) return failed("connect " + endpoint.socket_path.string(), ec);
    return exchange(socket, request, timeout);
  }
  asio::ip::tcp::socket socket(io);
  socket.connect({asio::ip::make_address(endpoint.host), endpoint.port}, ec);
  if (ec) return failed("connect " + endpoint.host + ":" + std::to_string(endpoint.port), ec);
  return exchange(socket, request, timeout);
}

Result<std::unique_ptr<EventStreamReader>> EventStreamReader::open(const std::filesystem::path& socket_path,
                                                                   const std::string& target) {
  std::unique_ptr<EventStreamReader> reader(new EventStreamReader());
  boost::system::error_code ec;
  reader->socket_.connect(asio::local::stream_protocol::endpoint(socket_path.string()), ec);
  if (ec) return failed("connect " + socket_path.string(), ec);
  ClientRequest get;
  get.target = target;
  auto message = make_request(get);
  message.set(http::field::connection, "keep-alive");
  http::write(reader->socket_, message, ec);
  if (ec) return failed("write", ec);
  reader->socket_.non_blocking(true);
  ec = read_by(reader->socket_, reader->buffer_, reader->parser_, ReadTo::header,
               Clock::now() + std::chrono::seconds(30));
  if (ec) return failed("read the header", ec);
  reader->status_ = reader->parser_.get().result_int();
  reader->content_type_ = std::string(reader->parser_.get()[http::field::content_type]);
  return reader;
}

std::string EventStreamReader::read_until(const std::function<bool(const std::string&)>& done,
                                          std::chrono::milliseconds timeout) {
  const auto deadline = Clock::now() + timeout;
  char chunk[4096];
  while (!done(text_) && !parser_.is_done()) {
    parser_.get().body().data = chunk;
    parser_.get().body().size = sizeof(chunk);
    auto ec = read_by(socket_, buffer_, parser_, ReadTo::some, deadline);
    text_.append(chunk, sizeof(chunk) - parser_.get().body().size);
    if (ec == http::error::need_buffer) continue;
    if (ec) break;
  }
  return text_;
}

}  // namespace hostagent::testing
