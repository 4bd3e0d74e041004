// daemon/log (private): one line per event to stderr, which systemd's journal captures with the
// unit's name and a timestamp; a sink tests can replace to keep their output readable.
#pragma once

#include <functional>
#include <string>

namespace hostagent::daemon {

enum class LogLevel { info, warning, error };

void log(LogLevel level, const std::string& message);
// Replaces where log lines go; nullptr restores stderr. Returns the previous sink.
std::function<void(LogLevel, const std::string&)> set_log_sink(std::function<void(LogLevel, const std::string&)> sink);

}  // namespace hostagent::daemon
