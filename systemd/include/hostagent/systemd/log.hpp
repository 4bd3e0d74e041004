// hostagent/systemd/log: hostagent's log lines. Under systemd, with stderr connected to the journal,
// each line is a journal record with structured fields (systemd/journal: MESSAGE,
// PRIORITY, HOSTAGENT_VM, HOSTAGENT_OPERATION, HOSTAGENT_DEVICE); otherwise one line on stderr with
// its sd-daemon(3) priority prefix. A sink tests can replace to keep their output readable.
#pragma once

#include <functional>
#include <string>

#include "hostagent/systemd/journal.hpp"

namespace hostagent::systemd {

enum class LogLevel { info, warning, error };

// What a line is about ({.vm = name, .operation = "create"}); "" where it has none.
using LogContext = JournalContext;

void log(LogLevel level, const std::string& message, const LogContext& context = {});

using LogSink = std::function<void(LogLevel, const std::string&, const LogContext&)>;
// Replaces where log lines go; nullptr restores the default (journal or stderr). Returns the previous sink.
LogSink set_log_sink(LogSink sink);

}  // namespace hostagent::systemd
