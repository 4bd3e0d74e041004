// systemd/notifier: the daemon's side of sd_notify(3): READY=1, STATUS=, STOPPING=1 and
// WATCHDOG=1, through an interface so tests and the daemon's wiring can record what is sent.
#pragma once

#include <memory>
#include <string>

#include "hostagent/common/result.hpp"

namespace hostagent::systemd {

class Notifier {
 public:
  virtual ~Notifier() = default;
  // One datagram of newline-separated assignments, as sd_notify(3) takes them ("READY=1\nSTATUS=up").
  virtual Status notify(const std::string& assignments) = 0;

  // The status text is one line: a newline in it would start an assignment of its own.
  Status ready(const std::string& status) { return notify("READY=1\nSTATUS=" + one_line(status)); }
  Status status(const std::string& text) { return notify("STATUS=" + one_line(text)); }
  Status stopping(const std::string& status) { return notify("STOPPING=1\nSTATUS=" + one_line(status)); }
  Status watchdog() { return notify("WATCHDOG=1"); }

  static std::string one_line(std::string text);
};

// sd_notify(3) to $NOTIFY_SOCKET; without it (not started by systemd, or Type= other than notify)
// every call succeeds and sends nothing.
std::unique_ptr<Notifier> make_sd_notifier();

}  // namespace hostagent::systemd
