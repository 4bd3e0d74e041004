// Listen addresses: both forms read, written back as read, and each malformed one refused with
// its reason.
#include <doctest/doctest.h>

#include <string>
#include <utility>
#include <vector>

#include "hostagent/common/listen_address.hpp"

namespace hostagent {
namespace {

TEST_CASE("parse_listen_address splits both forms") {
  auto unix_socket = parse_listen_address("unix:/run/hostagent/hostagent.sock");
  REQUIRE(unix_socket.ok());
  CHECK(unix_socket->kind == ListenAddress::Kind::unix_socket);
  CHECK(unix_socket->socket_path == "/run/hostagent/hostagent.sock");
  auto v4 = parse_listen_address("tcp://10.0.0.7:8443");
  REQUIRE(v4.ok());
  CHECK(v4->kind == ListenAddress::Kind::tcp);
  CHECK(v4->host == "10.0.0.7");
  CHECK(v4->port == 8443);
  auto v6 = parse_listen_address("tcp://[fe80::1]:443");
  REQUIRE(v6.ok());
  CHECK(v6->host == "fe80::1");
  CHECK(v6->port == 443);
}

TEST_CASE("to_string writes each form back as parse_listen_address reads it") {
  for (const std::string text : {"unix:/run/hostagent/hostagent.sock", "tcp://10.0.0.7:8443", "tcp://[fe80::1]:443",
                                 "tcp://[::]:8443", "tcp://api.example.net:1"}) {
    CAPTURE(text);
    auto address = parse_listen_address(text);
    REQUIRE(address.ok());
    CHECK(to_string(*address) == text);
  }
}

TEST_CASE("parse_listen_address refuses malformed addresses with the reason") {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"unix:run/api.sock", "the socket path: it is relative"},
      {"unix:/" + std::string(107, 'a'), "the socket path is 108 bytes, the kernel's limit is 107"},
      {"tcp://::1:80", "an IPv6 address goes in brackets, like tcp://[::1]:8443"},
      {"tcp://[::g]:80", "\"::g\" is not an IPv6 address"},
      {"tcp://host", "the port is missing"},
      {"tcp://:80", "the host is missing (0.0.0.0 listens on every IPv4 address)"},
      {"tcp://host:65536", "port \"65536\" is not a number 1..65535"},
      {"tcp://host:80/", "port \"80/\" is not a number 1..65535"},
      {"tcp://ho_st:80", "the host is neither a host name nor an IP address"},
      {"http://host:80", "the address starts with neither unix: nor tcp://"},
  };
  for (const auto& [text, reason] : cases) {
    auto address = parse_listen_address(text);
    REQUIRE_FALSE(address.ok());
    CHECK(address.error().code == ErrorCode::invalid_argument);
    CHECK(address.error().message == "listen address \"" + text + "\": " + reason +
                                         "; write unix:/ABSOLUTE/PATH or tcp://HOST:PORT with PORT 1..65535");
  }
}

}  // namespace
}  // namespace hostagent
