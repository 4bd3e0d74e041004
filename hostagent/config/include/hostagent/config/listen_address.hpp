// hostagent/config/listen_address: the API's listen addresses ("unix:/run/hostagent/hostagent.sock",
// "tcp://HOST:PORT"), parsed once here so the configuration check and the listener that binds them
// agree on what an address means.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>

#include "hostagent/common/result.hpp"

namespace hostagent::config {

struct ListenAddress {
  enum class Kind { unix_socket, tcp };
  Kind kind = Kind::unix_socket;
  std::filesystem::path socket_path;  // unix_socket: absolute, at most 107 bytes (sun_path)
  std::string host;                   // tcp: a host name, an IPv4 address, or an IPv6 address without brackets
  uint16_t port = 0;                  // tcp: 1..65535
};

// ErrorCode::invalid_argument with what is wrong and the accepted forms.
Result<ListenAddress> parse_listen_address(const std::string& text);

}  // namespace hostagent::config
