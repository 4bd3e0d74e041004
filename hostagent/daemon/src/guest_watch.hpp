// daemon/guest_watch (private): the guest's own phases, after a create or start resumed it. `kernel`
// ends when the serial console's log shows the template's kernel marker; `up` when the guest agent
// answers (libvirt said it connected, then it answered a command) or the console shows the up
// marker, whichever is first. Each is added to its operation's timeline as it is seen, after the
// operation ended too (OperationTracker::late_phase). A guest watched longer than its template's
// seconds is let go with what was seen, and logged; one that stops is let go at once.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <filesystem>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "hostagent/config/daemon_config.hpp"
#include "hostagent/daemon/clock.hpp"
#include "hostagent/virt/hypervisor.hpp"
#include "hostagent/vmtemplates/vm_template.hpp"
#include "operation_tracker.hpp"

namespace hostagent::daemon {

inline constexpr std::string_view kKernelPhase = "kernel";
inline constexpr std::string_view kUpPhase = "up";

// Where the VM's serial console is logged (render's <serial><log>, appended across boots); nullopt
// on the test driver, whose domains have no console.
std::optional<std::filesystem::path> console_log_path(const config::DaemonConfig& config, const std::string& vm);

// Finds markers in a byte stream read in pieces, one found even when a read ends inside it. Parsing
// apart from the reading, so it is tested on any split.
class MarkerScan {
 public:
  explicit MarkerScan(std::vector<std::string> markers);
  // The indexes of the markers `bytes` completes, each reported once, in the order they end.
  std::vector<std::size_t> feed(std::string_view bytes);

 private:
  std::vector<std::string> markers_;
  std::vector<bool> found_;
  std::string tail_;  // the last bytes fed, as many as the longest marker less one
  std::size_t keep_ = 0;
};

struct GuestWatchRequest {
  std::string operation;  // the create or start whose timeline gets the phases
  std::string vm;
  std::optional<std::filesystem::path> console;  // nullopt: none to read
  std::uint64_t console_from = 0;                // the log's size before the resume: the boot is after it
  vmtemplates::BootWatch watch;
  std::chrono::steady_clock::time_point resumed;
};

class GuestWatch {
 public:
  // How often each watched console is read, and the guest agent asked once it connected.
  static constexpr std::chrono::milliseconds kPoll{100};
  static constexpr std::chrono::milliseconds kPingEvery{1000};

  GuestWatch(Clock& clock, virt::Hypervisor& hypervisor, OperationTracker& operations);
  ~GuestWatch();
  GuestWatch(const GuestWatch&) = delete;
  GuestWatch& operator=(const GuestWatch&) = delete;

  // Replaces a watch of the same VM (a start after a stop).
  void watch(GuestWatchRequest request);
  // On libvirt's event thread: no libvirt call, no file read. An agent that connected is asked on
  // the watch's thread; a VM that stopped or went is let go.
  void on_event(const virt::DomainEvent& event);
  // The VMs watched now, those handed to watch() and not yet polled among them.
  std::set<std::string> watched();
  // Blocks until the thread, having ended more than `after` rounds of polling, waits for its next
  // (kPoll by the injected clock, or a new watch), and says how many it has ended; nullopt after
  // `limit` of real time. Tests step the thread so: wait for it idle, move the clock, wait again.
  std::optional<std::uint64_t> await_idle(std::uint64_t after, std::chrono::milliseconds limit);

 private:
  struct Watched {
    explicit Watched(GuestWatchRequest from)
        : request(std::move(from)),
          scan({request.watch.kernel_marker, request.watch.up_marker}),
          console_read(request.console_from),
          last_mark(request.resumed) {}

    GuestWatchRequest request;
    MarkerScan scan;  // markers 0: the kernel's, 1: up's
    std::uint64_t console_read = 0;
    bool kernel_seen = false;
    bool up = false;  // the watch is over
    std::chrono::steady_clock::time_point last_mark;
    bool agent_connected = false;
    std::optional<std::chrono::steady_clock::time_point> last_ping;
    std::string agent_error;  // the last ping's, for the log when up is never seen
  };

  void run();
  void take_incoming(std::map<std::string, Watched>& watches);
  // False once the watch is over: up seen, or past its seconds.
  bool poll(Watched& watched);
  void read_console(Watched& watched);
  void ask_agent(Watched& watched);
  void mark(Watched& watched, std::string_view phase, std::string detail);
  void give_up(const Watched& watched);

  Clock& clock_;
  virt::Hypervisor& hypervisor_;
  OperationTracker& operations_;
  std::mutex mutex_;
  std::condition_variable wake_;  // a new watch, or stopping_: waited on through clock_
  bool stopping_ = false;
  std::uint64_t rounds_ = 0;  // rounds of polling ended
  bool idle_ = false;         // waiting for the next round
  std::condition_variable idled_;
  std::vector<GuestWatchRequest> incoming_;
  std::map<std::string, bool> agent_changes_;  // by VM: connected (true) or not, since the last poll
  std::set<std::string> gone_;                 // VMs stopped since the last poll
  std::set<std::string> watched_;              // what the thread watches, as of its last poll
  std::jthread thread_;                        // last: started once the rest exists
};

}  // namespace hostagent::daemon
