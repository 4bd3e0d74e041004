#include "host_use_parse.hpp"

#include <arpa/inet.h>

#include <array>
#include <sstream>

namespace hostagent::discovery::detail {
namespace {

std::vector<std::string> words(const std::string& line) {
  std::istringstream in(line);
  std::vector<std::string> out;
  std::string word;
  while (in >> word) out.push_back(word);
  return out;
}

template <typename Fn>
void each_line(const std::string& text, Fn fn) {
  std::istringstream lines(text);
  std::string line;
  while (std::getline(lines, line)) fn(words(line));
}

bool is_hex(const std::string& text) {
  return !text.empty() && text.find_first_not_of("0123456789abcdefABCDEF") == std::string::npos;
}

}  // namespace

std::vector<MountEntry> parse_mountinfo(const std::string& text) {
  std::vector<MountEntry> out;
  each_line(text, [&](const std::vector<std::string>& w) {
    // The optional tags end at a lone "-"; the filesystem type and the source follow it.
    std::size_t dash = 6;
    while (dash < w.size() && w[dash] != "-") ++dash;
    if (w.size() < 6 || dash + 2 >= w.size() || w[2].find(':') == std::string::npos) return;
    out.push_back({w[2], w[dash + 2], w[4]});
  });
  return out;
}

std::vector<MountEntry> parse_mounts(const std::string& text) {
  std::vector<MountEntry> out;
  each_line(text, [&](const std::vector<std::string>& w) {
    if (w.size() >= 3) out.push_back({"", w[0], w[1]});
  });
  return out;
}

std::vector<std::string> parse_swaps(const std::string& text) {
  std::vector<std::string> out;
  each_line(text, [&](const std::vector<std::string>& w) {
    if (w.size() >= 2 && w[1] == "partition") out.push_back(w[0]);
  });
  return out;
}

std::vector<RouteEntry> parse_routes(const std::string& text) {
  std::vector<RouteEntry> out;
  each_line(text, [&](const std::vector<std::string>& w) {
    // The header, or not a route line: fib_route_seq_show prints the flags as %04X, so a longer
    // field is no route's (and would overflow stoul).
    if (w.size() < 8 || !is_hex(w[1]) || !is_hex(w[3]) || w[3].size() > 8) return;
    constexpr unsigned long kRtfUp = 0x0001;  // include/uapi/linux/route.h
    if ((std::stoul(w[3], nullptr, 16) & kRtfUp) == 0) return;
    out.push_back({w[0], w[1] == "00000000" && w[7] == "00000000"});
  });
  return out;
}

std::vector<AddressEntry> parse_if_inet6(const std::string& text) {
  std::vector<AddressEntry> out;
  each_line(text, [&](const std::vector<std::string>& w) {
    // if6_seq_show prints the scope as %02x: a longer field is not the kernel's line.
    if (w.size() < 6 || w[0].size() != 32 || !is_hex(w[0]) || !is_hex(w[3]) || w[3].size() > 2) return;
    // include/net/ipv6.h: IPV6_ADDR_SCOPE_GLOBAL 0x00, _SITELOCAL 0x05 (shown shifted as 0x40).
    const unsigned long scope = std::stoul(w[3], nullptr, 16);
    if (scope != 0x00 && scope != 0x40) return;
    std::array<unsigned char, 16> bytes{};
    for (std::size_t i = 0; i < bytes.size(); ++i) {
      bytes[i] = static_cast<unsigned char>(std::stoul(w[0].substr(2 * i, 2), nullptr, 16));
    }
    char buf[INET6_ADDRSTRLEN] = {};
    if (inet_ntop(AF_INET6, bytes.data(), buf, sizeof(buf)) == nullptr) return;
    out.push_back({w[5], buf});
  });
  return out;
}

}  // namespace hostagent::discovery::detail
