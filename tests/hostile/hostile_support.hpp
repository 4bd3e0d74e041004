// tests/hostile: what the attacks share: raw client sockets an attacker drives by hand (unix, or TCP
// from any loopback address), the open-file limit two thousand of them need, slow clients' limits,
// and the latencies a test prints for its reader.
#pragma once

#include <arpa/inet.h>
#include <doctest/doctest.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "hostagent/api/http_server.hpp"

namespace hostagent::testing {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

inline constexpr int kStalled = 1000;
inline constexpr auto kDeadline = std::chrono::seconds(10);  // the client's bound on every answer

// The test holds both ends of every connection: two descriptors each, and then some.
inline void raise_open_files() {
  constexpr rlim_t kWanted = rlim_t{4} * kStalled + 256;
  rlimit limit{};
  REQUIRE(::getrlimit(RLIMIT_NOFILE, &limit) == 0);
  REQUIRE_MESSAGE(limit.rlim_max >= kWanted, "the hard open-file limit ", limit.rlim_max, " is below the ", kWanted,
                  " this test needs (ulimit -Hn)");
  limit.rlim_cur = std::max(limit.rlim_cur, kWanted);
  REQUIRE(::setrlimit(RLIMIT_NOFILE, &limit) == 0);
}

// A client socket the attacker drives by hand: connect, send part of a request, read what comes.
class RawConnection {
 public:
  static RawConnection unix_socket(const std::filesystem::path& path) {
    RawConnection connection(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
    sockaddr_un address{};
    address.sun_family = AF_UNIX;
    std::strncpy(address.sun_path, path.c_str(), sizeof(address.sun_path) - 1);
    connection.connected_ =
        connection.fd_ >= 0 && ::connect(connection.fd_, reinterpret_cast<sockaddr*>(&address), sizeof(address)) == 0;
    return connection;
  }
  // From `source` (any address of 127.0.0.0/8 is this machine's) to 127.0.0.1:port.
  static RawConnection tcp(const std::string& source, uint16_t port) {
    RawConnection connection(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
    sockaddr_in from{};
    from.sin_family = AF_INET;
    ::inet_pton(AF_INET, source.c_str(), &from.sin_addr);
    sockaddr_in to{};
    to.sin_family = AF_INET;
    to.sin_port = htons(port);
    ::inet_pton(AF_INET, "127.0.0.1", &to.sin_addr);
    connection.connected_ = connection.fd_ >= 0 &&
                            ::bind(connection.fd_, reinterpret_cast<sockaddr*>(&from), sizeof(from)) == 0 &&
                            ::connect(connection.fd_, reinterpret_cast<sockaddr*>(&to), sizeof(to)) == 0;
    return connection;
  }
  RawConnection(RawConnection&& other) noexcept : fd_(other.fd_), connected_(other.connected_) { other.fd_ = -1; }
  RawConnection& operator=(RawConnection&&) = delete;
  RawConnection(const RawConnection&) = delete;
  ~RawConnection() {
    if (fd_ >= 0) ::close(fd_);
  }

  bool connected() const { return connected_; }
  bool send(const std::string& bytes) const {
    return connected_ && ::send(fd_, bytes.data(), bytes.size(), MSG_NOSIGNAL) == static_cast<ssize_t>(bytes.size());
  }
  // The status line the server sent first ("HTTP/1.1 503 ..."), or what came within `wait`.
  std::string status_line(milliseconds wait) const {
    std::string out;
    const auto end = Clock::now() + wait;
    char c = 0;
    while (out.find("\r\n") == std::string::npos && readable_by(end) && ::recv(fd_, &c, 1, 0) == 1) out.push_back(c);
    return out.substr(0, out.find("\r\n"));
  }
  // Whether the server closed the connection within `wait` (what it sent before is discarded).
  bool closed_by_server(milliseconds wait) const {
    const auto end = Clock::now() + wait;
    char buffer[4096];
    while (readable_by(end)) {
      if (::recv(fd_, buffer, sizeof(buffer), 0) <= 0) return true;
    }
    return false;
  }
  // At most `most` bytes of what the server sent, waiting up to `wait` for the first of them.
  std::string read_some(std::size_t most, milliseconds wait) const {
    if (!readable_by(Clock::now() + wait)) return {};
    std::string out(most, '\0');
    const ssize_t got = ::recv(fd_, out.data(), most, 0);
    out.resize(got > 0 ? static_cast<std::size_t>(got) : 0);
    return out;
  }
  // What the server sent within `wait` (until it closed, or the wait ended).
  std::string read_all(milliseconds wait) const {
    std::string out;
    const auto end = Clock::now() + wait;
    char buffer[4096];
    for (ssize_t got = 0; readable_by(end) && (got = ::recv(fd_, buffer, sizeof(buffer), 0)) > 0;) {
      out.append(buffer, static_cast<std::size_t>(got));
    }
    return out;
  }

 private:
  explicit RawConnection(int fd) : fd_(fd) {}
  // Whether something (data, or the end of the stream) can be read before `end`.
  bool readable_by(Clock::time_point end) const {
    const auto left = std::chrono::duration_cast<milliseconds>(end - Clock::now()).count();
    pollfd ready{fd_, POLLIN, 0};
    return left > 0 && ::poll(&ready, 1, static_cast<int>(left)) > 0;
  }
  int fd_ = -1;
  bool connected_ = false;
};

// Latencies of the answers a test waited for, printed at its end.
struct Latencies {
  std::vector<double> ms;
  void add(Clock::time_point since) {
    ms.push_back(std::chrono::duration<double, std::milli>(Clock::now() - since).count());
  }
  void print(const std::string& what) {
    if (ms.empty()) return;
    std::sort(ms.begin(), ms.end());
    std::printf("%s: %zu answers, p50 %.1f ms, p99 %.1f ms, max %.1f ms\n", what.c_str(), ms.size(), ms[ms.size() / 2],
                ms[std::min(ms.size() - 1, ms.size() * 99 / 100)], ms.back());
  }
};

// Slow clients that never finish and never time out on their own within the test: the budget alone
// must keep the API answering.
inline api::ServerLimits patient_limits() {
  api::ServerLimits limits;
  limits.header_timeout = std::chrono::minutes(5);
  limits.request_timeout = std::chrono::minutes(5);
  limits.idle_timeout = std::chrono::minutes(5);
  return limits;
}

}  // namespace hostagent::testing
