// systemd/socket_activation: sd_listen_fds(3) and checking what each passed fd is.
#include "hostagent/systemd/socket_activation.hpp"

#include <sys/socket.h>
#include <sys/un.h>
#include <systemd/sd-daemon.h>

#include <algorithm>
#include <cstddef>
#include <cstring>
#include <optional>
#include <string>

namespace hostagent::systemd {
namespace {

namespace fs = std::filesystem;

constexpr const char* kFix =
    "hostagent.socket's ListenStream= and the configuration's api.listen must name the same unix socket paths";

// The path a unix socket is bound to; "@name" for the abstract namespace (unix(7)), nullopt when
// the fd is not a unix socket or getsockname(2) fails.
std::optional<std::string> bound_path(int fd) {
  sockaddr_un address{};
  socklen_t length = sizeof(address);
  if (::getsockname(fd, reinterpret_cast<sockaddr*>(&address), &length) != 0 || address.sun_family != AF_UNIX) {
    return std::nullopt;
  }
  const auto size = static_cast<std::size_t>(length) - offsetof(sockaddr_un, sun_path);
  if (size == 0) return std::string();  // unnamed
  if (address.sun_path[0] == '\0') return "@" + std::string(address.sun_path + 1, size - 1);
  return std::string(address.sun_path, strnlen(address.sun_path, size));
}

std::string listed(const std::vector<fs::path>& paths) {
  if (paths.empty()) return "no unix: address";
  std::string out;
  for (const auto& path : paths) out += (out.empty() ? "unix:" : ", unix:") + path.string();
  return out;
}

Result<fs::path> match_one(int fd, const std::vector<fs::path>& paths) {
  const std::string which = "socket activation: fd " + std::to_string(fd);
  // sd_is_socket_unix: AF_UNIX, SOCK_STREAM, listening (listen(2) called), any path.
  if (::sd_is_socket_unix(fd, SOCK_STREAM, 1, nullptr, 0) <= 0) {
    return Error{ErrorCode::invalid_argument,
                 which +
                     " is not a listening unix stream socket; hostagent serves its API only on unix sockets "
                     "passed by systemd: " +
                     kFix};
  }
  const auto path = bound_path(fd);
  if (!path || path->empty() || path->front() != '/') {
    return Error{
        ErrorCode::invalid_argument,
        which + " is a unix socket at " + (path && !path->empty() ? *path : "no path") + ", not a file path; " + kFix};
  }
  const auto found = std::find_if(paths.begin(), paths.end(),
                                  [&](const fs::path& configured) { return configured.lexically_normal() == *path; });
  if (found == paths.end()) {
    return Error{ErrorCode::invalid_argument, which + " is the socket " + *path + ", which api.listen does not name (" +
                                                  listed(paths) + "): " + kFix};
  }
  return *found;
}

}  // namespace

Result<InheritedSockets> match_inherited_sockets(const std::vector<int>& fds, const std::vector<fs::path>& paths) {
  InheritedSockets sockets;
  for (const int fd : fds) {
    HA_TRY(auto path, match_one(fd, paths));
    if (!sockets.emplace(path, fd).second) {
      return Error{ErrorCode::invalid_argument,
                   "socket activation: two sockets passed for " + path.string() + "; " + kFix};
    }
  }
  return sockets;
}

Result<InheritedSockets> inherited_sockets(const std::vector<fs::path>& paths) {
  // unset_environment 1: LISTEN_PID/LISTEN_FDS name this process only. sd_listen_fds also sets
  // FD_CLOEXEC on each fd, so no child inherits them either.
  const int count = ::sd_listen_fds(1);
  if (count < 0) return errno_error(-count, "read LISTEN_FDS/LISTEN_PID from", "the environment");
  std::vector<int> fds(static_cast<std::size_t>(count));
  for (int i = 0; i < count; ++i) fds[static_cast<std::size_t>(i)] = SD_LISTEN_FDS_START + i;
  return match_inherited_sockets(fds, paths);
}

}  // namespace hostagent::systemd
