// systemd/notifier: sd_notify(3) behind the Notifier interface.
#include "hostagent/systemd/notifier.hpp"

#include <systemd/sd-daemon.h>

#include <algorithm>
#include <cstdlib>

namespace hostagent::systemd {
namespace {

class SdNotifier final : public Notifier {
 public:
  Status notify(const std::string& assignments) override {
    // unset_environment 0: the watchdog thread and later messages need NOTIFY_SOCKET still.
    const int rc = ::sd_notify(0, assignments.c_str());
    if (rc < 0) {
      const char* socket = std::getenv("NOTIFY_SOCKET");
      return errno_error(-rc, "sd_notify to", socket != nullptr ? socket : "$NOTIFY_SOCKET");
    }
    return ok_status();
  }
};

}  // namespace

std::string Notifier::one_line(std::string text) {
  std::replace(text.begin(), text.end(), '\n', ' ');
  return text;
}

std::unique_ptr<Notifier> make_sd_notifier() {
  return std::make_unique<SdNotifier>();
}

}  // namespace hostagent::systemd
