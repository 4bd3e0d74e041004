// api/client_url: parsing the client's URL with Boost.URL; unix: is ours, not a URL scheme.
#include "client_url.hpp"

#include <boost/asio/ip/address.hpp>
#include <boost/url/parse.hpp>
#include <charconv>

namespace hostagent::api::detail {
namespace {

constexpr std::size_t kMaxSocketPath = 107;  // sun_path holds 108 bytes with the terminating NUL

Error bad_url(const std::string& url, const std::string& why) {
  return {ErrorCode::invalid_argument,
          "API URL '" + url + "': " + why +
              "; use unix:/ABSOLUTE/PATH (default unix:/run/hostagent/hostagent.sock), https://HOST:PORT or "
              "http://HOST:PORT"};
}

Result<ClientEndpoint> parse_unix(const std::string& url) {
  ClientEndpoint endpoint;
  endpoint.socket_path = url.substr(5);
  if (endpoint.socket_path.empty() || endpoint.socket_path.front() != '/') {
    return bad_url(url, "the socket path must be absolute");
  }
  if (endpoint.socket_path.size() > kMaxSocketPath) {
    return bad_url(url, "the socket path is longer than 107 bytes (sun_path)");
  }
  return endpoint;
}

}  // namespace

Result<ClientEndpoint> parse_client_url(const std::string& url) {
  if (url.rfind("unix:", 0) == 0) return parse_unix(url);
  const auto parsed = boost::urls::parse_absolute_uri(url);
  if (!parsed) return bad_url(url, "not a URL (" + parsed.error().message() + ")");
  ClientEndpoint endpoint;
  const std::string scheme(parsed->scheme());
  if (scheme == "https") {
    endpoint.kind = ClientEndpoint::Kind::https;
    endpoint.port = 443;
  } else if (scheme == "http") {
    endpoint.kind = ClientEndpoint::Kind::http;
    endpoint.port = 80;
  } else {
    return bad_url(url, "unknown scheme '" + scheme + "'");
  }
  if (!parsed->has_authority() || parsed->host().empty()) return bad_url(url, "no host");
  if (parsed->has_userinfo()) return bad_url(url, "user information is not accepted; use --token-file");
  const auto path = parsed->encoded_path();
  if (!path.empty() && path != "/") return bad_url(url, "a path is not accepted (the API lives under /v1)");
  if (parsed->has_query() || parsed->has_fragment()) return bad_url(url, "a query or fragment is not accepted");
  endpoint.host = parsed->host_address();  // an IPv6 address without its brackets
  if (parsed->has_port()) {
    const std::string port(parsed->port());
    unsigned value = 0;
    const auto [end, ec] = std::from_chars(port.data(), port.data() + port.size(), value);
    if (ec != std::errc() || end != port.data() + port.size() || value == 0 || value > 65535) {
      return bad_url(url, "port '" + port + "' is not 1..65535");
    }
    endpoint.port = static_cast<uint16_t>(value);
  }
  return endpoint;
}

bool is_loopback_host(const std::string& host) {
  if (host == "localhost") return true;
  boost::system::error_code ec;
  const auto address = boost::asio::ip::make_address(host, ec);
  return !ec && address.is_loopback();
}

}  // namespace hostagent::api::detail
