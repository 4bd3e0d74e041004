// systemd/socket_activation: the listening sockets systemd passes (hostagent.socket,
// sd_listen_fds(3)), each matched to the api.listen address it stands for, so the API serves on
// them instead of binding its own.
#pragma once

#include <filesystem>
#include <map>
#include <vector>

#include "hostagent/common/result.hpp"

namespace hostagent::systemd {

// Unix socket path -> the passed listening fd bound to it.
using InheritedSockets = std::map<std::filesystem::path, int>;

// The fds systemd passed (LISTEN_FDS, LISTEN_PID: this process; the variables are then unset so
// nothing we start inherits them), matched as match_inherited_sockets does. Empty when the daemon
// was not socket-activated.
Result<InheritedSockets> inherited_sockets(const std::vector<std::filesystem::path>& unix_listen_paths);

// Each fd must be a listening AF_UNIX stream socket bound to one of `unix_listen_paths` (the unix:
// addresses of api.listen), each path at most once; anything else is an error naming the fd, what
// it is and the fix.
Result<InheritedSockets> match_inherited_sockets(const std::vector<int>& fds,
                                                 const std::vector<std::filesystem::path>& unix_listen_paths);

}  // namespace hostagent::systemd
