// api/http listeners: unix sockets (stale files, mode, group) and TCP ports.
#include "listeners.hpp"

#include <grp.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <optional>
#include <vector>

#include <boost/asio/socket_base.hpp>

namespace hostagent::api::detail {
namespace {

namespace asio = boost::asio;
using boost::system::error_code;

Error asio_error(const error_code& error, const std::string& operation, const std::string& what) {
  return Error{ErrorCode::io_error, operation + " " + what + ": " + error.message()};
}

// Whether a process accepts on the socket file: connect() succeeds only then; ECONNREFUSED is the
// kernel's answer for a socket file nobody listens on (unix(7)), i.e. one left by a crashed daemon.
Result<bool> socket_is_live(const std::filesystem::path& path) {
  const int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return errno_error(errno, "socket() to probe", path.string());
  sockaddr_un address{};
  address.sun_family = AF_UNIX;
  std::strncpy(address.sun_path, path.c_str(), sizeof(address.sun_path) - 1);
  const int rc = ::connect(fd, reinterpret_cast<const sockaddr*>(&address), sizeof(address));
  const int err = errno;
  ::close(fd);
  if (rc == 0) return true;
  if (err == ECONNREFUSED) return false;
  return errno_error(err, "connect to probe the existing socket", path.string());
}

// Clears the way for bind(): nothing there, or a stale socket removed.
Status clear_stale_socket(const std::filesystem::path& path) {
  struct stat info {};
  if (::lstat(path.c_str(), &info) != 0) {
    if (errno == ENOENT) return ok_status();
    return errno_error(errno, "stat", path.string());
  }
  if (!S_ISSOCK(info.st_mode)) {
    return Error{ErrorCode::invalid_argument, path.string() +
                                                  " exists and is not a socket; remove it or choose another "
                                                  "api.listen path (hostagent never deletes it)"};
  }
  HA_TRY(const bool live, socket_is_live(path));
  if (live) {
    return Error{ErrorCode::conflict, path.string() +
                                          ": another process is serving on this socket (is hostagentd already "
                                          "running?); stop it or choose another api.listen path"};
  }
  if (::unlink(path.c_str()) != 0 && errno != ENOENT) return errno_error(errno, "remove stale socket", path.string());
  return ok_status();
}

std::optional<gid_t> group_id(const std::string& name) {
  std::vector<char> buffer(16384);
  group entry{};
  group* found = nullptr;
  if (::getgrnam_r(name.c_str(), &entry, buffer.data(), buffer.size(), &found) != 0 || found == nullptr) {
    return std::nullopt;
  }
  return found->gr_gid;
}

Status set_permissions(const std::filesystem::path& path, unsigned mode, const std::string& group) {
  if (::chmod(path.c_str(), static_cast<mode_t>(mode)) != 0) return errno_error(errno, "chmod", path.string());
  if (group.empty()) return ok_status();
  const auto gid = group_id(group);
  if (!gid) {
    std::fprintf(stderr,
                 "hostagent: warning: group '%s' does not exist; %s keeps the daemon's group (create it: "
                 "groupadd --system %s)\n",
                 group.c_str(), path.c_str(), group.c_str());
    return ok_status();
  }
  if (::chown(path.c_str(), static_cast<uid_t>(-1), *gid) != 0) {
    return errno_error(errno, "chown to group " + group, path.string());
  }
  return ok_status();
}

}  // namespace

Result<UnixListener> bind_unix(const asio::any_io_executor& io, const std::filesystem::path& path, unsigned mode,
                               const std::string& group) {
  HA_TRY_STATUS(clear_stale_socket(path));
  UnixListener listener;
  listener.path = path;
  listener.acceptor = std::make_unique<UnixAcceptor>(io);
  error_code error;
  const asio::local::stream_protocol::endpoint endpoint(path.string());
  if (listener.acceptor->open(endpoint.protocol(), error)) return asio_error(error, "open unix socket", path.string());
  if (listener.acceptor->bind(endpoint, error)) return asio_error(error, "bind", path.string());
  struct stat info {};
  if (::stat(path.c_str(), &info) != 0) return errno_error(errno, "stat", path.string());
  listener.device = info.st_dev;
  listener.inode = info.st_ino;
  // Permissions before listen(): no client connects through a mode wider than configured.
  auto permissions = set_permissions(path, mode, group);
  if (!permissions) {
    remove_socket_file(listener);
    return std::move(permissions).error();
  }
  if (listener.acceptor->listen(asio::socket_base::max_listen_connections, error)) {
    remove_socket_file(listener);
    return asio_error(error, "listen", path.string());
  }
  return listener;
}

Result<UnixListener> adopt_unix(const asio::any_io_executor& io, const std::filesystem::path& path, int fd) {
  UnixListener listener;
  listener.path = path;
  listener.owns_file = false;
  listener.acceptor = std::make_unique<UnixAcceptor>(io);
  error_code error;
  if (listener.acceptor->assign(asio::local::stream_protocol(), fd, error)) {
    return asio_error(error, "serve on the socket systemd passed for", path.string());
  }
  return listener;
}

void remove_socket_file(const UnixListener& listener) {
  if (!listener.owns_file) return;
  struct stat info {};
  if (::lstat(listener.path.c_str(), &info) != 0) return;
  if (info.st_dev == listener.device && info.st_ino == listener.inode) ::unlink(listener.path.c_str());
}

Result<std::unique_ptr<TcpAcceptor>> bind_tcp(const asio::any_io_executor& io, const ListenAddress& address) {
  const std::string where = hostagent::to_string(address);
  asio::ip::tcp::resolver resolver(io);
  error_code error;
  const auto results =
      resolver.resolve(address.host, std::to_string(address.port),
                       asio::ip::tcp::resolver::passive | asio::ip::tcp::resolver::numeric_service, error);
  if (error || results.empty()) {
    return Error{ErrorCode::invalid_argument,
                 where + ": cannot resolve host '" + address.host + "' (" + error.message() + "); use an address"};
  }
  const auto endpoint = results.begin()->endpoint();
  auto acceptor = std::make_unique<TcpAcceptor>(io);
  if (acceptor->open(endpoint.protocol(), error)) return asio_error(error, "open", where);
  // SO_REUSEADDR: a restarted daemon rebinds while the old connections sit in TIME_WAIT.
  if (acceptor->set_option(asio::socket_base::reuse_address(true), error)) {
    return asio_error(error, "set SO_REUSEADDR on", where);
  }
  if (acceptor->bind(endpoint, error)) return asio_error(error, "bind", where);
  if (acceptor->listen(asio::socket_base::max_listen_connections, error)) return asio_error(error, "listen", where);
  return acceptor;
}

}  // namespace hostagent::api::detail
