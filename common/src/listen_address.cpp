// hostagent/common/listen_address: the two address forms, read and written.
#include "hostagent/common/listen_address.hpp"

#include <arpa/inet.h>

#include <algorithm>
#include <cctype>
#include <charconv>

#include "hostagent/common/paths.hpp"

namespace hostagent {
namespace {

// sun_path is 108 bytes and the kernel needs room for the terminating NUL (unix(7)).
constexpr std::size_t kMaxSocketPath = 107;
constexpr std::size_t kMaxHostName = 253;  // RFC 1035: a DNS name's text form

bool host_name_char(char c) {
  return std::isalnum(static_cast<unsigned char>(c)) != 0 || c == '.' || c == '-';
}

std::optional<std::string> unix_problem(const std::string& path, ListenAddress& out) {
  if (auto problem = absolute_path_problem(path)) return "the socket path: " + *problem;
  if (path.size() > kMaxSocketPath) {
    return "the socket path is " + std::to_string(path.size()) + " bytes, the kernel's limit is 107";
  }
  out = ListenAddress{ListenAddress::Kind::unix_socket, path, "", 0};
  return std::nullopt;
}

std::optional<std::string> port_problem(std::string_view text, uint16_t& port) {
  unsigned value = 0;
  const auto* end = text.data() + text.size();
  const auto parsed = std::from_chars(text.data(), end, value);
  const bool digits = !text.empty() && text.size() <= 5 && std::all_of(text.begin(), text.end(), [](char c) {
    return std::isdigit(static_cast<unsigned char>(c)) != 0;
  });
  if (!digits || parsed.ec != std::errc() || parsed.ptr != end || value < 1 || value > 65535) {
    return "port \"" + std::string(text) + "\" is not a number 1..65535";
  }
  port = static_cast<uint16_t>(value);
  return std::nullopt;
}

std::optional<std::string> host_problem(std::string_view host, bool bracketed) {
  if (bracketed) {
    in6_addr address{};
    const std::string text(host);
    if (inet_pton(AF_INET6, text.c_str(), &address) != 1) return "\"" + text + "\" is not an IPv6 address";
    return std::nullopt;
  }
  if (host.find(':') != std::string_view::npos) return "an IPv6 address goes in brackets, like tcp://[::1]:8443";
  if (host.empty()) return "the host is missing (0.0.0.0 listens on every IPv4 address)";
  if (host.size() > kMaxHostName || !std::all_of(host.begin(), host.end(), host_name_char)) {
    return "the host is neither a host name nor an IP address";
  }
  return std::nullopt;
}

std::optional<std::string> tcp_problem(std::string_view rest, ListenAddress& out) {
  const bool bracketed = rest.starts_with('[');
  const std::size_t host_end = bracketed ? rest.find(']') : rest.rfind(':');
  if (host_end == std::string_view::npos)
    return bracketed ? "the ']' after the IPv6 address is missing" : "the port is missing";
  const std::size_t colon = bracketed ? host_end + 1 : host_end;
  if (colon >= rest.size() || rest[colon] != ':') return "the port is missing";
  const std::string_view host = bracketed ? rest.substr(1, host_end - 1) : rest.substr(0, host_end);
  if (auto problem = host_problem(host, bracketed)) return problem;
  uint16_t port = 0;
  if (auto problem = port_problem(rest.substr(colon + 1), port)) return problem;
  out = ListenAddress{ListenAddress::Kind::tcp, {}, std::string(host), port};
  return std::nullopt;
}

}  // namespace

std::optional<std::string> listen_address_problem(const std::string& text, ListenAddress& out) {
  if (text.starts_with("unix:")) return unix_problem(text.substr(5), out);
  if (text.starts_with("tcp://")) return tcp_problem(std::string_view(text).substr(6), out);
  return std::string("the address starts with neither unix: nor tcp://");
}

Result<ListenAddress> parse_listen_address(const std::string& text) {
  ListenAddress address;
  if (auto problem = listen_address_problem(text, address)) {
    return Error{ErrorCode::invalid_argument,
                 "listen address \"" + text + "\": " + *problem + "; write " + std::string(kListenForms)};
  }
  return address;
}

std::string to_string(const ListenAddress& address) {
  if (address.kind == ListenAddress::Kind::unix_socket) return "unix:" + address.socket_path.string();
  // RFC 3986 3.2.2: an IPv6 literal's colons would read as the port's without the brackets.
  const bool v6 = address.host.find(':') != std::string::npos;
  return "tcp://" + (v6 ? "[" + address.host + "]" : address.host) + ":" + std::to_string(address.port);
}

}  // namespace hostagent
