// api/client_url: what an ApiClient URL names (unix:PATH, https://HOST:PORT, http://HOST:PORT),
// checked before anything connects.
#pragma once

#include <cstdint>
#include <string>

#include "hostagent/common/result.hpp"

namespace hostagent::api::detail {

struct ClientEndpoint {
  enum class Kind { unix_socket, http, https };
  Kind kind = Kind::unix_socket;
  std::string socket_path;  // unix_socket
  std::string host;         // http(s): a name or an address, IPv6 without brackets
  uint16_t port = 0;
};

// invalid_argument naming the URL and the accepted forms.
Result<ClientEndpoint> parse_client_url(const std::string& url);

// "localhost", 127.0.0.0/8 or ::1: where a bearer token in clear text does not leave the machine.
bool is_loopback_host(const std::string& host);

}  // namespace hostagent::api::detail
