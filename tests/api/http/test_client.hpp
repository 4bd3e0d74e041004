// Small HTTP clients for the server's tests: unix socket, TCP and TLS, written with Beast on their
// own io_context. Every operation is bounded (run_for): a server that never answers fails the test
// instead of hanging it.
#pragma once

#include <chrono>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <boost/asio.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>

namespace hostagent::api::testing {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using Response = http::response<http::string_body>;
using boost::system::error_code;

inline constexpr auto kWait = std::chrono::seconds(10);

template <class Stream>
class Client {
 public:
  template <class... Args>
  explicit Client(Args&&... args) : stream_(io_, std::forward<Args>(args)...) {}
  Client(const Client&) = delete;
  Client& operator=(const Client&) = delete;

  Stream& stream() { return stream_; }
  asio::io_context& io() { return io_; }

  // Runs the queued operations; false (and the connection closed) when they take over kWait.
  bool run() {
    io_.restart();
    io_.run_for(kWait);
    if (io_.stopped()) return true;
    error_code ignored;
    beast::get_lowest_layer(stream_).close(ignored);
    io_.restart();
    io_.run_for(std::chrono::seconds(1));
    return false;
  }

  bool send(const std::string& raw) {
    error_code result = asio::error::timed_out;
    asio::async_write(stream_, asio::buffer(raw), [&](const error_code& error, std::size_t) { result = error; });
    return run() && !result;
  }

  std::optional<Response> read() {
    http::response_parser<http::string_body> parser;
    parser.body_limit(boost::none);
    error_code result = asio::error::timed_out;
    http::async_read(stream_, buffer_, parser, [&](const error_code& error, std::size_t) { result = error; });
    if (!run() || result) return std::nullopt;
    return parser.release();
  }

  std::optional<Response> request(http::verb method, const std::string& target, const std::string& body = "",
                                  const std::vector<std::pair<std::string, std::string>>& headers = {},
                                  unsigned version = 11) {
    http::request<http::string_body> message(method, target, version);
    message.set(http::field::host, "localhost");
    for (const auto& [name, value] : headers) message.set(name, value);
    message.body() = body;
    message.prepare_payload();
    error_code result = asio::error::timed_out;
    http::async_write(stream_, message, [&](const error_code& error, std::size_t) { result = error; });
    if (!run() || result) return std::nullopt;
    return read();
  }

  // Reads until `delimiter` has arrived; what came so far (all of it) or nullopt on error/timeout.
  std::optional<std::string> read_until(const std::string& delimiter) {
    error_code result = asio::error::timed_out;
    asio::async_read_until(stream_, asio::dynamic_buffer(text_), delimiter,
                           [&](const error_code& error, std::size_t) { result = error; });
    if (!run() || result) return std::nullopt;
    return text_;
  }
  void clear_text() { text_.clear(); }

  // True when the server closes the connection (EOF or reset) within kWait; data before it is
  // discarded.
  bool closed_by_server() {
    std::array<char, 4096> scratch{};
    error_code result;
    bool done = false;
    std::function<void()> next = [&] {
      stream_.async_read_some(asio::buffer(scratch), [&](const error_code& error, std::size_t) {
        if (error) {
          result = error;
          done = true;
          return;
        }
        next();
      });
    };
    if (buffer_.size() > 0) buffer_.consume(buffer_.size());
    next();
    return run() && done && result != asio::error::timed_out;
  }

 private:
  asio::io_context io_;
  Stream stream_;
  beast::flat_buffer buffer_;
  std::string text_;
};

using UnixClient = Client<asio::local::stream_protocol::socket>;
using TcpClient = Client<asio::ip::tcp::socket>;

inline std::unique_ptr<UnixClient> connect_unix(const std::filesystem::path& path) {
  auto client = std::make_unique<UnixClient>();
  error_code error;
  client->stream().connect(asio::local::stream_protocol::endpoint(path.string()), error);
  if (error) return nullptr;
  return client;
}

inline std::unique_ptr<TcpClient> connect_tcp(const std::string& host, uint16_t port) {
  auto client = std::make_unique<TcpClient>();
  error_code error;
  client->stream().connect(asio::ip::tcp::endpoint(asio::ip::make_address(host), port), error);
  if (error) return nullptr;
  return client;
}

// A TLS client: the context outlives the stream that refers to it.
struct TlsClient {
  std::unique_ptr<asio::ssl::context> context;
  std::unique_ptr<Client<asio::ssl::stream<asio::ip::tcp::socket>>> client;
  bool handshake_ok = false;
};

// Verifies the server against `ca`; presents `certificate`/`key` when given.
inline TlsClient connect_tls(uint16_t port, const std::filesystem::path& ca, const std::filesystem::path& certificate,
                             const std::filesystem::path& key) {
  TlsClient out;
  out.context = std::make_unique<asio::ssl::context>(asio::ssl::context::tls_client);
  out.context->load_verify_file(ca.string());
  out.context->set_verify_mode(asio::ssl::verify_peer);
  if (!certificate.empty()) {
    out.context->use_certificate_chain_file(certificate.string());
    out.context->use_private_key_file(key.string(), asio::ssl::context::pem);
  }
  out.client = std::make_unique<Client<asio::ssl::stream<asio::ip::tcp::socket>>>(*out.context);
  error_code error;
  beast::get_lowest_layer(out.client->stream())
      .connect(asio::ip::tcp::endpoint(asio::ip::make_address("127.0.0.1"), port), error);
  if (error) return out;
  error_code result = asio::error::timed_out;
  out.client->stream().async_handshake(asio::ssl::stream_base::client, [&](const error_code& e) { result = e; });
  out.handshake_ok = out.client->run() && !result;
  return out;
}

}  // namespace hostagent::api::testing
