// hostagent/common/listen_address: the API's listen addresses ("unix:/run/hostagent/hostagent.sock",
// "tcp://HOST:PORT"), parsed and written back here so the configuration check, the listener that
// binds them and every message naming one agree on what an address means.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>

#include "hostagent/common/result.hpp"

namespace hostagent {

struct ListenAddress {
  enum class Kind { unix_socket, tcp };
  Kind kind = Kind::unix_socket;
  std::filesystem::path socket_path;  // unix_socket: absolute, at most 107 bytes (sun_path)
  std::string host;                   // tcp: a host name, an IPv4 address, or an IPv6 address without brackets
  uint16_t port = 0;                  // tcp: 1..65535
};

inline constexpr std::string_view kListenForms = "unix:/ABSOLUTE/PATH or tcp://HOST:PORT with PORT 1..65535";

// ErrorCode::invalid_argument with what is wrong and the accepted forms.
Result<ListenAddress> parse_listen_address(const std::string& text);
// Why text is not a listen address, or nullopt after filling out: the reason alone, for the
// configuration reader, which words it as "found X (why), expected Y".
std::optional<std::string> listen_address_problem(const std::string& text, ListenAddress& out);
// The address as parse_listen_address reads it back: an IPv6 host in brackets.
std::string to_string(const ListenAddress& address);

}  // namespace hostagent
