// daemon/log: stderr lines prefixed with the sd-daemon(3) priority, so the journal files them
// under the right level ("<3>" error, "<4>" warning, "<6>" info).
#include "log.hpp"

#include <cstdio>
#include <mutex>

namespace hostagent::daemon {
namespace {

std::mutex& sink_mutex() {
  static std::mutex mutex;
  return mutex;
}

std::function<void(LogLevel, const std::string&)>& sink() {
  static std::function<void(LogLevel, const std::string&)> current;
  return current;
}

const char* priority(LogLevel level) {
  switch (level) {
    case LogLevel::error:
      return "<3>";
    case LogLevel::warning:
      return "<4>";
    case LogLevel::info:
      break;
  }
  return "<6>";
}

}  // namespace

void log(LogLevel level, const std::string& message) {
  std::lock_guard lock(sink_mutex());
  if (sink()) {
    sink()(level, message);
    return;
  }
  std::fprintf(stderr, "%s%s\n", priority(level), message.c_str());
}

std::function<void(LogLevel, const std::string&)> set_log_sink(
    std::function<void(LogLevel, const std::string&)> sink_fn) {
  std::lock_guard lock(sink_mutex());
  auto previous = std::move(sink());
  sink() = std::move(sink_fn);
  return previous;
}

}  // namespace hostagent::daemon
