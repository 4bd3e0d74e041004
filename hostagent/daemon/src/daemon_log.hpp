// daemon/daemon_log: the daemon's sources log through systemd/log, under short names.
#pragma once

#include "hostagent/systemd/log.hpp"

namespace hostagent::daemon {

using systemd::log;
using systemd::LogContext;
using systemd::LogLevel;

}  // namespace hostagent::daemon
