// daemon/guest_watch: the guest's kernel and up phases, read from its console log and its agent.
#include "guest_watch.hpp"

#include <algorithm>
#include <fstream>
#include <utility>

#include "daemon_log.hpp"
#include "hostagent/common/text.hpp"

namespace hostagent::daemon {
namespace {

namespace fs = std::filesystem;

// At most this much of a console is read per poll: a guest that floods its console is read over
// several polls rather than in one allocation.
constexpr std::uintmax_t kMaxReadPerPoll = 1U << 20;

double seconds_between(std::chrono::steady_clock::time_point from, std::chrono::steady_clock::time_point to) {
  return std::chrono::duration<double>(to - from).count();
}

}  // namespace

std::optional<fs::path> console_log_path(const config::DaemonConfig& config, const std::string& vm) {
  if (config.domain_type == "test") return std::nullopt;
  return config.console_log_directory / (vm + ".log");
}

MarkerScan::MarkerScan(std::vector<std::string> markers) : markers_(std::move(markers)), found_(markers_.size()) {
  for (const auto& marker : markers_) keep_ = std::max(keep_, marker.empty() ? 0 : marker.size() - 1);
}

std::vector<std::size_t> MarkerScan::feed(std::string_view bytes) {
  // Searched: the tail kept from before (too short to hold a whole marker) and the new bytes. A
  // marker found here ends in the new bytes, so none is found twice.
  std::string window = tail_;
  window.append(bytes);
  std::vector<std::pair<std::size_t, std::size_t>> ends;  // (where it ends, which)
  for (std::size_t i = 0; i < markers_.size(); ++i) {
    if (found_[i] || markers_[i].empty()) continue;
    const auto at = window.find(markers_[i]);
    if (at == std::string::npos) continue;
    found_[i] = true;
    ends.emplace_back(at + markers_[i].size(), i);
  }
  std::sort(ends.begin(), ends.end());
  tail_ = window.size() > keep_ ? window.substr(window.size() - keep_) : window;
  std::vector<std::size_t> found;
  found.reserve(ends.size());
  for (const auto& end : ends) found.push_back(end.second);
  return found;
}

GuestWatch::GuestWatch(Clock& clock, virt::Hypervisor& hypervisor, OperationTracker& operations)
    : clock_(clock), hypervisor_(hypervisor), operations_(operations), thread_([this] { run(); }) {}

GuestWatch::~GuestWatch() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  wake_.notify_all();
}

void GuestWatch::watch(GuestWatchRequest request) {
  {
    std::lock_guard lock(mutex_);
    incoming_.push_back(std::move(request));
  }
  wake_.notify_all();
}

void GuestWatch::on_event(const virt::DomainEvent& event) {
  using Kind = virt::DomainEventKind;
  std::lock_guard lock(mutex_);
  if (event.kind == Kind::agent_connected || event.kind == Kind::agent_disconnected) {
    agent_changes_[event.name] = event.kind == Kind::agent_connected;
  } else if (event.kind == Kind::stopped || event.kind == Kind::crashed || event.kind == Kind::undefined) {
    gone_.insert(event.name);
  }
}

std::set<std::string> GuestWatch::watched() {
  std::lock_guard lock(mutex_);
  auto watched = watched_;
  for (const auto& request : incoming_) watched.insert(request.vm);  // taken at the next poll
  return watched;
}

std::optional<std::uint64_t> GuestWatch::await_idle(std::uint64_t after, std::chrono::milliseconds limit) {
  std::unique_lock lock(mutex_);
  if (!idled_.wait_for(lock, limit, [&] { return idle_ && rounds_ > after; })) return std::nullopt;
  return rounds_;
}

void GuestWatch::run() {
  std::map<std::string, Watched> watches;  // this thread's alone
  std::unique_lock lock(mutex_);
  while (!stopping_) {
    lock.unlock();
    take_incoming(watches);
    for (auto it = watches.begin(); it != watches.end();) it = poll(it->second) ? std::next(it) : watches.erase(it);
    lock.lock();
    watched_.clear();
    for (const auto& [vm, watched] : watches) watched_.insert(vm);
    ++rounds_;
    idle_ = true;
    idled_.notify_all();
    // The next round after kPoll by the injected clock: tests move it, and the round follows.
    clock_.wait_until(wake_, lock, clock_.steady_now() + kPoll, [this] { return stopping_ || !incoming_.empty(); });
    idle_ = false;
  }
}

void GuestWatch::take_incoming(std::map<std::string, Watched>& watches) {
  std::lock_guard lock(mutex_);
  // Stops first: a VM stopped and started again since the last poll keeps its new watch.
  for (const auto& vm : gone_) watches.erase(vm);
  gone_.clear();
  for (auto& request : incoming_) {
    const auto vm = request.vm;
    watches.insert_or_assign(vm, Watched(std::move(request)));
  }
  incoming_.clear();
  for (const auto& [vm, connected] : agent_changes_) {
    if (const auto it = watches.find(vm); it != watches.end()) it->second.agent_connected = connected;
  }
  agent_changes_.clear();
}

bool GuestWatch::poll(Watched& watched) {
  const auto& watch = watched.request.watch;
  if (watched.request.console) read_console(watched);
  if (!watched.up && watch.agent && watched.agent_connected) ask_agent(watched);
  if (watched.up) return false;
  // What is left to see: the kernel on the console, up from the agent or the console.
  const bool console = watched.request.console.has_value();
  const bool kernel_left = console && !watched.kernel_seen;
  const bool up_left = watch.agent || (console && !watch.up_marker.empty());
  if (!kernel_left && !up_left) return false;
  if (clock_.steady_now() - watched.request.resumed < std::chrono::seconds(watch.seconds)) return true;
  give_up(watched);
  return false;
}

void GuestWatch::read_console(Watched& watched) {
  std::error_code ec;
  const auto size = fs::file_size(*watched.request.console, ec);
  if (ec) return;  // not written yet
  // virtlogd rotated the log (its max_size): what the guest wrote since is the new file's.
  if (size < watched.console_read) watched.console_read = 0;
  if (size == watched.console_read) return;
  std::ifstream in(*watched.request.console, std::ios::binary);
  if (!in) return;
  in.seekg(static_cast<std::streamoff>(watched.console_read));
  std::string bytes(static_cast<std::size_t>(std::min(size - watched.console_read, kMaxReadPerPoll)), '\0');
  in.read(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  bytes.resize(static_cast<std::size_t>(in.gcount()));
  watched.console_read += bytes.size();
  const auto& watch = watched.request.watch;
  for (const auto index : watched.scan.feed(bytes)) {
    if (watched.up) return;  // a kernel marker after up is a reboot's, not this boot's
    if (index == 0) {
      watched.kernel_seen = true;
      mark(watched, kKernelPhase, "console showed " + text::quoted(watch.kernel_marker));
    } else {
      watched.up = true;
      mark(watched, kUpPhase, "console showed " + text::quoted(watch.up_marker));
    }
  }
}

void GuestWatch::ask_agent(Watched& watched) {
  const auto now = clock_.steady_now();
  if (watched.last_ping && now - *watched.last_ping < kPingEvery) return;
  watched.last_ping = now;
  const auto answered = hypervisor_.agent_ping(watched.request.vm);
  if (!answered.ok()) {
    watched.agent_error = answered.error().message;
    return;
  }
  watched.up = true;
  mark(watched, kUpPhase, "guest agent answered");
}

void GuestWatch::mark(Watched& watched, std::string_view phase, std::string detail) {
  const auto now = clock_.steady_now();
  operations_.late_phase(watched.request.operation,
                         service::TimelinePhase{std::string(phase), rfc3339_ms(clock_.now()),
                                                seconds_between(watched.last_mark, now), std::move(detail)});
  watched.last_mark = now;
}

void GuestWatch::give_up(const Watched& watched) {
  const auto& watch = watched.request.watch;
  std::string seen = watched.kernel_seen ? "its kernel started, " : "";
  std::string why;
  if (watch.agent) {
    why = watched.agent_connected ? "its guest agent connected and did not answer (" + watched.agent_error + ")"
                                  : "its guest agent never connected";
  }
  if (!watch.up_marker.empty()) {
    why += (why.empty() ? "" : ", and ") + std::string("its console did not show ") + text::quoted(watch.up_marker);
  }
  if (!watched.kernel_seen && watched.request.console) {
    why += (why.empty() ? "" : "; ") + std::string("its console did not show ") + text::quoted(watch.kernel_marker);
  }
  log(LogLevel::warning,
      watched.request.vm + ": not seen up within " + std::to_string(watch.seconds) + " s of its resume: " + seen + why,
      {.vm = watched.request.vm, .operation = watched.request.operation});
}

}  // namespace hostagent::daemon
