// systemd/log: journal records with fields when stderr is the journal (decided once, from
// JOURNAL_STREAM: systemd.exec(5)); else stderr lines prefixed with the sd-daemon(3) priority, so a
// journal that captures them anyway files them under the right level ("<3>" error, "<4>" warning,
// "<6>" info).
#include "hostagent/systemd/log.hpp"

#include <cstdio>
#include <mutex>

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

void log(LogLevel level, const std::string& message, const LogContext& context) {
  std::lock_guard lock(sink_mutex());
  if (sink()) {
    sink()(level, message, context);
    return;
  }
  write_default(level, message, context);
}

LogSink set_log_sink(LogSink sink_fn) {
  std::lock_guard lock(sink_mutex());
  auto previous = std::move(sink());
  sink() = std::move(sink_fn);
  return previous;
}

}  // namespace hostagent::systemd
