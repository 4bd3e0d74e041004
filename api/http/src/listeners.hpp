// api/http listeners: binding the API's addresses. A unix socket is made with the configured mode
// and group and replaces a stale file; a TCP address binds its port (0: any).
#pragma once

#include <sys/types.h>

#include <filesystem>
#include <memory>
#include <string>

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/local/stream_protocol.hpp>

#include "hostagent/common/listen_address.hpp"
#include "hostagent/common/result.hpp"

namespace hostagent::api::detail {

using UnixAcceptor = boost::asio::local::stream_protocol::acceptor;
using TcpAcceptor = boost::asio::ip::tcp::acceptor;

struct UnixListener {
  std::unique_ptr<UnixAcceptor> acceptor;
  std::filesystem::path path;
  // The file bind() made: removed at stop only while it is still this one, so a successor that
  // replaced it as stale keeps its socket.
  dev_t device = 0;
  ino_t inode = 0;
  bool owns_file = true;  // false for a socket systemd passed: the file is systemd's
};

// A live socket (another process accepts on it) is ErrorCode::conflict naming the path; a path that
// exists and is not a socket is invalid_argument (never removed); a missing group is a warning.
Result<UnixListener> bind_unix(const boost::asio::any_io_executor& io, const std::filesystem::path& path, unsigned mode,
                               const std::string& group);
void remove_socket_file(const UnixListener& listener);

// A listening unix socket passed by systemd, served as it is; the acceptor owns `fd` once this succeeds.
Result<UnixListener> adopt_unix(const boost::asio::any_io_executor& io, const std::filesystem::path& path, int fd);

Result<std::unique_ptr<TcpAcceptor>> bind_tcp(const boost::asio::any_io_executor& io, const ListenAddress& address);

}  // namespace hostagent::api::detail
