// virt/console_stream: a domain's serial console on a non-blocking libvirt stream, the way virsh's
// own console client drives one (tools/virsh-console.c): a stream event callback reads the guest's
// output as it comes and sends queued input when the stream is writable. Every stream call runs on
// libvirt's event loop thread, where its callbacks run, so no call races a callback.
#include <libvirt/libvirt.h>

#include <algorithm>
#include <array>
#include <functional>
#include <mutex>
#include <string>

#include "libvirt_error.hpp"
#include "libvirt_hypervisor.hpp"

namespace hostagent::virt::detail {
namespace {

// What the callbacks, the loop's tasks and the Console share. The stream is touched only on the
// loop thread; the rest under `mutex`. The stream callback's opaque is a plain pointer to it, with no
// free callback: libvirt's remote driver never called a stream callback's free callback before its
// 2025 fix (remoteStreamCallbackFree tested `!cbdata->cb`, never true), so the state cannot be
// handed to it. It lives as long as the Console and, after it, the task that removes the callback
// on the loop thread: no callback runs once that removal returns there.
struct ConsoleState {
  std::mutex mutex;
  ConsoleSinks sinks;  // cleared when the Console goes: nothing is told after that
  std::string input;   // queued for the guest, at most kConsoleInputBytes
  bool ended = false;  // the stream is done; send() takes nothing
  bool input_full = false;
  virStreamPtr stream = nullptr;  // the loop thread's
  bool watching_writable = false;
};

using StatePtr = std::shared_ptr<ConsoleState>;

constexpr int kReadEvents = VIR_STREAM_EVENT_READABLE | VIR_STREAM_EVENT_ERROR | VIR_STREAM_EVENT_HANGUP;
// One callback reads at most this much, so one chatty guest does not hold the loop thread.
constexpr int kReadsPerEvent = 16;

// On the loop thread: the stream ends, once; the user hears why.
void end(ConsoleState& state, const std::string& reason) {
  ConsoleSinks sinks;
  {
    const std::lock_guard lock(state.mutex);
    if (state.ended) return;
    state.ended = true;
    sinks = state.sinks;
  }
  virStreamEventRemoveCallback(state.stream);
  virStreamAbort(state.stream);
  discard_last_error();  // an aborted stream that had already failed reports it again
  if (sinks.ended) sinks.ended(reason);
}

void read_output(ConsoleState& state) {
  std::array<char, 16384> buffer{};
  for (int round = 0; round < kReadsPerEvent; ++round) {
    const int got = virStreamRecv(state.stream, buffer.data(), buffer.size());
    if (got == -2) return;  // nothing more now (VIR_STREAM_NONBLOCK)
    if (got == 0) return end(state, "the console closed: the guest stopped or libvirt closed it");
    if (got < 0) {
      // QEMU's driver aborts this stream when another client forces the console open
      // (virChrdevOpen with VIR_DOMAIN_CONSOLE_FORCE), and it reads here as an error.
      return end(state, "the console ended: " + take_last_error().message);
    }
    std::function<void(std::string_view)> output;
    {
      const std::lock_guard lock(state.mutex);
      output = state.sinks.output;
    }
    if (output) output(std::string_view(buffer.data(), static_cast<std::size_t>(got)));
  }
}

// Sends what is queued, as far as the stream takes it now; watches for writability while some waits.
void send_input(ConsoleState& state) {
  std::string pending;
  {
    const std::lock_guard lock(state.mutex);
    if (state.ended) return;
    pending = state.input;
  }
  std::size_t sent = 0;
  while (sent < pending.size()) {
    const int wrote = virStreamSend(state.stream, pending.data() + sent, pending.size() - sent);
    if (wrote == -2) break;
    if (wrote < 0) return end(state, "the console ended: " + take_last_error().message);
    sent += static_cast<std::size_t>(wrote);
  }
  std::function<void()> writable;
  bool waiting = false;
  {
    const std::lock_guard lock(state.mutex);
    state.input.erase(0, sent);
    waiting = !state.input.empty();
    if (sent > 0 && state.input_full) {
      state.input_full = false;
      writable = state.sinks.writable;
    }
  }
  if (waiting != state.watching_writable) {
    state.watching_writable = waiting;
    virStreamEventUpdateCallback(state.stream, kReadEvents | (waiting ? VIR_STREAM_EVENT_WRITABLE : 0));
  }
  if (writable) writable();
}

void on_stream_event(virStreamPtr /*stream*/, int events, void* opaque) {
  ConsoleState& state = *static_cast<ConsoleState*>(opaque);
  if ((events & VIR_STREAM_EVENT_READABLE) != 0) read_output(state);
  if ((events & VIR_STREAM_EVENT_WRITABLE) != 0) send_input(state);
  if ((events & (VIR_STREAM_EVENT_ERROR | VIR_STREAM_EVENT_HANGUP)) != 0) {
    end(state, "the console ended: libvirt reported the stream " +
                   std::string((events & VIR_STREAM_EVENT_HANGUP) != 0 ? "hung up" : "failed"));
  }
}

class LibvirtConsole final : public Console {
 public:
  LibvirtConsole(StatePtr state, std::shared_ptr<EventLoop> loop) : state_(std::move(state)), loop_(std::move(loop)) {}

  ~LibvirtConsole() override {
    std::function<void()> released;
    {
      const std::lock_guard lock(state_->mutex);
      released = std::move(state_->sinks.released);
      state_->sinks = {};
    }
    // The stream goes on the loop thread, after any callback running now.
    loop_->post([state = state_, released = std::move(released)] {
      end(*state, "closed");
      virStreamFree(state->stream);
      if (released) released();
    });
  }
  LibvirtConsole(const LibvirtConsole&) = delete;
  LibvirtConsole& operator=(const LibvirtConsole&) = delete;

  std::size_t send(std::string_view bytes) override {
    std::size_t taken = 0;
    {
      const std::lock_guard lock(state_->mutex);
      if (state_->ended) return 0;
      taken = std::min(bytes.size(), kConsoleInputBytes - state_->input.size());
      state_->input.append(bytes.substr(0, taken));
      if (taken < bytes.size()) state_->input_full = true;
    }
    if (taken > 0) loop_->post([state = state_] { send_input(*state); });
    return taken;
  }

 private:
  StatePtr state_;
  std::shared_ptr<EventLoop> loop_;
};

struct StreamFree {
  void operator()(virStreamPtr stream) const { virStreamFree(stream); }
};

// QEMU's driver refuses a second client without VIR_DOMAIN_CONSOLE_FORCE with this message and
// VIR_ERR_OPERATION_FAILED (qemuDomainOpenConsole, when virChrdevOpen finds the device busy).
bool console_busy(const LibvirtError& error) {
  return error.code == VIR_ERR_OPERATION_FAILED && error.message.find("Active console session") != std::string::npos;
}

}  // namespace

Result<std::unique_ptr<Console>> LibvirtHypervisor::open_console(const std::string& name, bool force,
                                                                 ConsoleSinks sinks) {
  const std::string what = "open the serial console of domain " + name;
  HA_TRY(ConnPtr conn, connection_->get(what));
  HA_TRY(DomainPtr domain, find_domain(conn, name, what));
  std::unique_ptr<virStream, StreamFree> stream(virStreamNew(conn.get(), VIR_STREAM_NONBLOCK));
  if (!stream) return last_call_error(conn.get(), what);
  if (virDomainOpenConsole(domain.get(), nullptr, stream.get(), force ? VIR_DOMAIN_CONSOLE_FORCE : 0) < 0) {
    const LibvirtError error = take_last_error();
    if (console_busy(error)) {
      return Error{ErrorCode::conflict, what + ": another client holds it (" + error.message + ")"};
    }
    // libvirt's test driver has no consoles (no domainOpenConsole).
    if (error.code == VIR_ERR_NO_SUPPORT) return Error{ErrorCode::unsupported, what + ": " + error.message};
    return call_error(conn.get(), error, what);
  }
  auto state = std::make_shared<ConsoleState>();
  state->sinks = std::move(sinks);
  state->stream = stream.get();
  if (virStreamEventAddCallback(stream.get(), kReadEvents, on_stream_event, state.get(), nullptr) < 0) {
    const Error error = last_call_error(conn.get(), what);
    virStreamAbort(stream.get());
    discard_last_error();
    return error;
  }
  (void)stream.release();  // the Console's now: freed on the loop thread
  return std::unique_ptr<Console>(new LibvirtConsole(std::move(state), connection_->loop()));
}

}  // namespace hostagent::virt::detail
