// api/transport: connecting over a unix socket, TCP or TLS, and the synchronous-with-deadline calls.
#include "transport.hpp"

#include "websocket_console.hpp"

#include <openssl/ssl.h>
#include <openssl/x509v3.h>

#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/local/stream_protocol.hpp>
#include <boost/asio/ssl/stream.hpp>
#include <boost/beast/core/basic_stream.hpp>
#include <boost/beast/core/tcp_stream.hpp>
#include <boost/beast/ssl.hpp>
#include <cerrno>

namespace hostagent::api::detail {
namespace {

namespace net = boost::asio;
namespace beast = boost::beast;
using boost::system::error_code;
using UnixStream = beast::basic_stream<net::local::stream_protocol>;
using TlsStream = net::ssl::stream<beast::tcp_stream>;

// Starts one asynchronous operation and runs the client's own io_context until its handler ran.
template <class Start>
error_code run(net::io_context& io, Start&& start) {
  error_code result = net::error::would_block;
  bool done = false;
  start([&result, &done](error_code ec, auto&&...) {
    result = ec;
    done = true;
  });
  io.restart();
  io.run();
  HA_ASSERT(done);
  return result;
}

template <class Stream>
class StreamTransport final : public Transport {
 public:
  StreamTransport(net::io_context& io, Stream stream) : io_(io), stream_(std::move(stream)) {}
  ~StreamTransport() override { close(); }
  StreamTransport(const StreamTransport&) = delete;
  StreamTransport& operator=(const StreamTransport&) = delete;

  error_code write(http::request<http::string_body>& request, Deadline timeout) override {
    beast::get_lowest_layer(stream_).expires_after(timeout);
    return run(io_, [&](auto handler) { http::async_write(stream_, request, std::move(handler)); });
  }
  error_code read(beast::flat_buffer& buffer, StringResponseParser& parser, Deadline timeout) override {
    beast::get_lowest_layer(stream_).expires_after(timeout);
    return run(io_, [&](auto handler) { http::async_read(stream_, buffer, parser, std::move(handler)); });
  }
  error_code read_header(beast::flat_buffer& buffer, StreamResponseParser& parser, Deadline timeout) override {
    beast::get_lowest_layer(stream_).expires_after(timeout);
    return run(io_, [&](auto handler) { http::async_read_header(stream_, buffer, parser, std::move(handler)); });
  }
  error_code read_some(beast::flat_buffer& buffer, StreamResponseParser& parser, Deadline timeout) override {
    beast::get_lowest_layer(stream_).expires_after(timeout);
    const auto ec = run(io_, [&](auto handler) { http::async_read_some(stream_, buffer, parser, std::move(handler)); });
    return ec == http::error::need_buffer ? error_code{} : ec;
  }
  void close() override {
    error_code ignored;
    beast::get_lowest_layer(stream_).socket().close(ignored);
  }
  Result<WebSocketOutcome> run_websocket(const WebSocketRequest& request, const std::string& what) override {
    return run_console(io_, stream_, request, what, [this](auto start) { return run(io_, start); });
  }

 private:
  net::io_context& io_;
  Stream stream_;
};

std::string seconds_text(Deadline timeout) {
  const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(timeout).count();
  return ms % 1000 == 0 ? std::to_string(ms / 1000) + "s" : std::to_string(ms) + "ms";
}

// What the operator can do about a failed connect, by errno.
Error connect_error(const ConnectSettings& settings, const error_code& ec) {
  const std::string prefix = "cannot connect to " + *settings.url + ": ";
  if (ec == beast::error::timeout) {
    return {ErrorCode::unavailable, prefix + "no answer within " + seconds_text(settings.timeout) + "; is " +
                                        *settings.server_name + " running, and is the address right?"};
  }
  const bool unix_socket = settings.endpoint->kind == ClientEndpoint::Kind::unix_socket;
  std::string hint = "; is " + *settings.server_name + " running?";
  if (ec == net::error::access_denied || ec.value() == EPERM) {
    hint = unix_socket ? "; run as root or as a member of the socket's group (hostagent)" : "";
  } else if (!unix_socket && ec == net::error::connection_refused && *settings.server_name == "hostagentd") {
    hint = "; is hostagentd running with this address among its api.listen?";
  }
  return {ErrorCode::unavailable, prefix + ec.message() + hint};
}

Result<std::unique_ptr<Transport>> connect_unix(net::io_context& io, const ConnectSettings& settings) {
  UnixStream stream(io);
  stream.expires_after(settings.timeout);
  const net::local::stream_protocol::endpoint endpoint(settings.endpoint->socket_path);
  const auto ec = run(io, [&](auto handler) { stream.async_connect(endpoint, std::move(handler)); });
  if (ec) return connect_error(settings, ec);
  return std::unique_ptr<Transport>(std::make_unique<StreamTransport<UnixStream>>(io, std::move(stream)));
}

Result<beast::tcp_stream> connect_tcp(net::io_context& io, const ConnectSettings& settings) {
  net::ip::tcp::resolver resolver(io);
  net::ip::tcp::resolver::results_type addresses;
  const auto& host = settings.endpoint->host;
  auto ec = run(io, [&](auto handler) {
    resolver.async_resolve(
        host, std::to_string(settings.endpoint->port),
        [&addresses, handler](error_code resolved, net::ip::tcp::resolver::results_type found) mutable {
          addresses = std::move(found);
          handler(resolved);
        });
  });
  if (ec) {
    return Error{ErrorCode::unavailable, "cannot connect to " + *settings.url + ": cannot resolve '" + host +
                                             "': " + ec.message() + "; check the host name in --url"};
  }
  beast::tcp_stream stream(io);
  stream.expires_after(settings.timeout);
  ec = run(io, [&](auto handler) { stream.async_connect(addresses, std::move(handler)); });
  if (ec) return connect_error(settings, ec);
  return stream;
}

// The server's certificate must name the host we asked for (RFC 6125): an IP address against its
// IP SANs, a name against its DNS SANs (OpenSSL's X509_VERIFY_PARAM does the matching).
void expect_peer_name(TlsStream& stream, const std::string& host) {
  SSL* ssl = stream.native_handle();
  error_code ec;
  net::ip::make_address(host, ec);
  if (!ec) {
    X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(ssl), host.c_str());
    return;
  }
  SSL_set_tlsext_host_name(ssl, host.c_str());  // SNI, for a server with several certificates
  SSL_set1_host(ssl, host.c_str());
}

Result<std::unique_ptr<Transport>> connect_tls(net::io_context& io, const ConnectSettings& settings) {
  HA_TRY(auto tcp, connect_tcp(io, settings));
  TlsStream stream(std::move(tcp), *settings.tls);
  expect_peer_name(stream, settings.endpoint->host);
  beast::get_lowest_layer(stream).expires_after(settings.timeout);
  const auto ec =
      run(io, [&](auto handler) { stream.async_handshake(net::ssl::stream_base::client, std::move(handler)); });
  if (ec) {
    std::string why = ec.message();
    const long verify = SSL_get_verify_result(stream.native_handle());
    if (verify != X509_V_OK) why += " (" + std::string(X509_verify_cert_error_string(verify)) + ")";
    return Error{ErrorCode::io_error, "TLS handshake with " + *settings.url + " failed: " + why +
                                          "; check --ca (the CA that signed the server's certificate), that the "
                                          "certificate names '" +
                                          settings.endpoint->host +
                                          "', and --cert/--key when the server asks for a client certificate"};
  }
  return std::unique_ptr<Transport>(std::make_unique<StreamTransport<TlsStream>>(io, std::move(stream)));
}

}  // namespace

Result<std::unique_ptr<Transport>> connect(net::io_context& io, const ConnectSettings& settings) {
  switch (settings.endpoint->kind) {
    case ClientEndpoint::Kind::unix_socket:
      return connect_unix(io, settings);
    case ClientEndpoint::Kind::http: {
      HA_TRY(auto tcp, connect_tcp(io, settings));
      return std::unique_ptr<Transport>(std::make_unique<StreamTransport<beast::tcp_stream>>(io, std::move(tcp)));
    }
    case ClientEndpoint::Kind::https:
      return connect_tls(io, settings);
  }
  HA_ASSERT(false);
  return Error{ErrorCode::internal, "unreachable"};
}

}  // namespace hostagent::api::detail
