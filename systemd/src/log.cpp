// systemd/log: journal records with fields when stderr is the journal (decided once, from
// JOURNAL_STREAM: systemd.exec(5)); else stderr lines prefixed with the sd-daemon(3) priority, so a
// journal that captures them anyway files them under the right level ("<3>" error, "<4>" warning,
// "<6>" info).
#include "hostagent/systemd/log.hpp"

#include <cstdio>
#include <mutex>

#include "hostagent/common/text.hpp"

namespace hostagent::systemd {
namespace {

std::mutex& sink_mutex() {
  static std::mutex mutex;
  return mutex;
}

LogSink& sink() {
  static LogSink current;
  return current;
}

int priority(LogLevel level) {
  switch (level) {
    case LogLevel::error:
      return kPriorityError;
    case LogLevel::warning:
      return kPriorityWarning;
    case LogLevel::info:
      break;
  }
  return kPriorityInfo;
}

bool to_journal() {
  static const bool journal = stderr_is_journal();
  return journal;
}

void write_default(LogLevel level, const std::string& message, const LogContext& context) {
  // A journal that refuses (its socket gone while journald restarts) still has our stderr.
  if (to_journal() && send_to_journal(journal_fields(priority(level), message, context)).ok()) {
    return;
  }
  std::fprintf(stderr, "<%d>%s\n", priority(level), message.c_str());
}

}  // namespace

// Every line is one line of readable text, whatever a name, a peer or libvirt put in it: a newline
// would forge a second line, an escape sequence would rewrite the operator's terminal, a bidi
// override would reorder what is read (common/text's shown()).
void log(LogLevel level, const std::string& message, const LogContext& context) {
  const std::string line = text::shown(message);
  const LogContext fields{text::shown(context.vm), text::shown(context.operation), text::shown(context.device)};
  std::lock_guard lock(sink_mutex());
  if (sink()) {
    sink()(level, line, fields);
    return;
  }
  write_default(level, line, fields);
}

LogSink set_log_sink(LogSink sink_fn) {
  std::lock_guard lock(sink_mutex());
  auto previous = std::move(sink());
  sink() = std::move(sink_fn);
  return previous;
}

}  // namespace hostagent::systemd
