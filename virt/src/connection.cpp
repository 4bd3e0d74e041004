// virt/connection: opening, watching and reopening the libvirt connection.
#include "connection.hpp"

#include <libvirt/virterror.h>
#include <libxml/parser.h>
#include <libxml/relaxng.h>
#include <libxml/xmlschemastypes.h>

#include <chrono>
#include <mutex>
#include <string>
#include <utility>

#include "domain_events.hpp"
#include "libvirt_error.hpp"

namespace hostagent::virt::detail {
namespace {

// libvirt validates a domain against its RelaxNG schema with libxml2 (VIR_DOMAIN_DEFINE_VALIDATE,
// VIR_DOMAIN_START_VALIDATE): in this process for the in-process drivers (test:///). libxml2 2.9's
// type libraries are set up on first use by xmlRelaxNGInitTypes (relaxng.c) and xmlSchemaInitTypes
// (xmlschemastypes.c), each a check of a plain flag, then the set-up, then the flag set, with no
// lock: two first validations at once race, and one fails with "Error type 'unsignedInt' is not
// exported by type library" (seen under 200 concurrent creates on test:///). libxml2 2.12 moved
// both into xmlInitParser's locked set-up; here they run once, before any connection exists.
void init_schema_types_once() {
  static std::once_flag once;
  std::call_once(once, [] {
    xmlInitParser();
    xmlSchemaInitTypes();
    xmlRelaxNGInitTypes();
  });
}

using Clock = std::chrono::steady_clock;

// libvirtd's first start can spend seconds probing QEMU; the first connect polls this often.
constexpr std::chrono::milliseconds kFirstConnectPoll{200};

using StateRef = std::shared_ptr<CallbackState>;

int on_lifecycle(virConnectPtr /*conn*/, virDomainPtr domain, int event, int detail, void* opaque) {
  const StateRef& state = *static_cast<StateRef*>(opaque);
  state->emit(lifecycle_event(domain, event, detail));
  return 0;
}

int on_agent_lifecycle(virConnectPtr /*conn*/, virDomainPtr domain, int state, int reason, void* opaque) {
  const StateRef& state_ref = *static_cast<StateRef*>(opaque);
  state_ref->emit(agent_event(domain, state, reason));
  return 0;
}

void free_state_ref(void* opaque) {
  delete static_cast<StateRef*>(opaque);
}

// libvirt calls this on the event loop thread when the connection closes: EOF from libvirtd, a
// keepalive timeout, or an error on the socket (remote driver, virNetClientCloseLocked).
void on_close(virConnectPtr /*conn*/, int /*reason*/, void* opaque) {
  const auto* context = static_cast<CloseContext*>(opaque);
  context->state->closed(context->generation);
}

std::string interval_text(std::chrono::milliseconds interval) {
  if (interval.count() % 1000 == 0) return std::to_string(interval.count() / 1000) + "s";
  return std::to_string(interval.count()) + "ms";
}

// A failure to reach libvirtd (no socket yet, connection refused) is worth retrying; anything
// else (an unknown driver, an unparsable URI) will fail the same way every time.
bool is_transport_failure(const LibvirtError& error) {
  return error.domain == VIR_FROM_RPC || error.code == VIR_ERR_SYSTEM_ERROR;
}

}  // namespace

void CallbackState::set_sinks(DomainEventSink domain_sink, ConnectionEventSink connection_sink) {
  const std::lock_guard lock(sink_mutex);
  on_domain = std::move(domain_sink);
  on_connection = std::move(connection_sink);
}

// The sink runs under the lock, so set_sinks() returns only once no old sink is running: a
// subscriber that unsubscribes and then goes away is never called after it is gone.
void CallbackState::emit(const DomainEvent& event) {
  const std::lock_guard lock(sink_mutex);
  if (on_domain) on_domain(event);
}

void CallbackState::emit(ConnectionEvent event) {
  const std::lock_guard lock(sink_mutex);
  if (on_connection) on_connection(event);
}

void CallbackState::closed(std::uint64_t closed_generation) {
  bool was_connected = false;
  {
    const std::lock_guard lock(mutex);
    if (closed_generation != generation || lost) return;
    lost = true;
    was_connected = connected.exchange(false);
  }
  cv.notify_all();
  // A connection that closed while it was being set up was never announced, so its loss is not.
  if (was_connected) emit(ConnectionEvent::lost);
}

Connection::Connection(LibvirtOptions options, std::shared_ptr<EventLoop> loop)
    : options_(std::move(options)), loop_(std::move(loop)), state_(std::make_shared<CallbackState>()) {}

Connection::~Connection() {
  {
    const std::lock_guard lock(state_->mutex);
    state_->stopping = true;
  }
  state_->cv.notify_all();
  if (reconnect_thread_.joinable()) reconnect_thread_.join();
  Attached last;
  {
    const std::lock_guard lock(state_->mutex);
    last = std::move(attached_);
    state_->connected.store(false);
  }
  // Registered callbacks hold references on the connection: without this it would never close.
  detach(last);
}

Status Connection::open() {
  const auto deadline = Clock::now() + options_.connect_timeout;
  for (;;) {
    auto fresh = open_and_attach(begin_attempt());
    if (fresh.ok() && publish(fresh.value())) break;
    if (!fresh.ok() && fresh.error().code != ErrorCode::unavailable) return std::move(fresh).error();
    if (Clock::now() >= deadline) {
      const std::string why = fresh.ok() ? "the connection closed while it was set up" : fresh.error().message;
      return Error{ErrorCode::unavailable, "libvirt at " + options_.uri + " did not answer within " +
                                               interval_text(options_.connect_timeout) +
                                               " (is libvirtd running?): " + why};
    }
    std::this_thread::sleep_for(kFirstConnectPoll);
  }
  reconnect_thread_ = std::thread([this] { reconnect_loop(); });
  return ok_status();
}

void Connection::subscribe(DomainEventSink on_domain, ConnectionEventSink on_connection) {
  state_->set_sinks(std::move(on_domain), std::move(on_connection));
}

Result<ConnPtr> Connection::get(std::string_view what) const {
  const std::lock_guard lock(state_->mutex);
  if (!state_->connected.load() || !attached_.conn) {
    return Error{ErrorCode::unavailable, std::string(what) + ": libvirt at " + options_.uri +
                                             " is not connected; reconnecting every " +
                                             interval_text(options_.reconnect_interval)};
  }
  return attached_.conn;
}

// From here on, only the close callback of the connection about to be opened counts.
std::uint64_t Connection::begin_attempt() {
  const std::lock_guard lock(state_->mutex);
  state_->generation = ++next_generation_;
  state_->lost = false;
  return state_->generation;
}

Result<Connection::Attached> Connection::open_and_attach(std::uint64_t generation) {
  init_schema_types_once();
  virConnectPtr raw = virConnectOpen(options_.uri.c_str());
  if (raw == nullptr) {
    const LibvirtError error = take_last_error();
    const ErrorCode code = is_transport_failure(error) ? ErrorCode::unavailable : ErrorCode::invalid_argument;
    return Error{code, "open libvirt at " + options_.uri + ": " + error.message};
  }
  Attached attached;
  attached.conn = adopt_connection(raw);
  HA_TRY_STATUS(attach(attached, generation));
  return attached;
}

Status Connection::attach(Attached& attached, std::uint64_t generation) {
  virConnectPtr conn = attached.conn.get();
  // Returns -1 with VIR_ERR_NO_SUPPORT on drivers without keepalive (test:///): nothing to detect.
  if (virConnectSetKeepAlive(conn, options_.keepalive_interval_s, static_cast<unsigned>(options_.keepalive_count)) <
      0) {
    const LibvirtError error = take_last_error();
    if (error.code != VIR_ERR_NO_SUPPORT)
      return call_error(conn, error, "enable keepalive on libvirt at " + options_.uri);
  }
  auto* state_ref = new StateRef(state_);
  attached.domain_callback = virConnectDomainEventRegisterAny(
      conn, nullptr, VIR_DOMAIN_EVENT_ID_LIFECYCLE, VIR_DOMAIN_EVENT_CALLBACK(on_lifecycle), state_ref, free_state_ref);
  if (attached.domain_callback < 0) {
    delete state_ref;  // libvirt does not call the free callback of a failed registration
    return last_call_error(conn, "register for domain events on libvirt at " + options_.uri);
  }
  auto* agent_ref = new StateRef(state_);
  attached.agent_callback =
      virConnectDomainEventRegisterAny(conn, nullptr, VIR_DOMAIN_EVENT_ID_AGENT_LIFECYCLE,
                                       VIR_DOMAIN_EVENT_CALLBACK(on_agent_lifecycle), agent_ref, free_state_ref);
  if (attached.agent_callback < 0) {
    delete agent_ref;
    const Error error = last_call_error(conn, "register for guest agent events on libvirt at " + options_.uri);
    detach(attached);
    return error;
  }
  attached.close_context = std::make_unique<CloseContext>(CloseContext{state_, generation});
  if (virConnectRegisterCloseCallback(conn, on_close, attached.close_context.get(), nullptr) < 0) {
    const Error error = last_call_error(conn, "register the close callback on libvirt at " + options_.uri);
    detach(attached);
    return error;
  }
  return ok_status();
}

// Works on a dead connection too: libvirt drops the callbacks locally before telling libvirtd.
void Connection::detach(Attached& attached) {
  if (!attached.conn) return;
  if (attached.domain_callback >= 0 &&
      virConnectDomainEventDeregisterAny(attached.conn.get(), attached.domain_callback) < 0) {
    discard_last_error();
  }
  attached.domain_callback = -1;
  if (attached.agent_callback >= 0 &&
      virConnectDomainEventDeregisterAny(attached.conn.get(), attached.agent_callback) < 0) {
    discard_last_error();
  }
  attached.agent_callback = -1;
  // Fails harmlessly when the callback already fired (libvirt then forgot it).
  if (virConnectUnregisterCloseCallback(attached.conn.get(), on_close) < 0) discard_last_error();
  attached.close_context.reset();
  attached.conn.reset();
}

// Makes `fresh` the connection calls use, unless its close callback already fired.
bool Connection::publish(Attached& fresh) {
  {
    const std::lock_guard lock(state_->mutex);
    if (!state_->lost) {
      attached_ = std::move(fresh);
      state_->connected.store(true);
      return true;
    }
  }
  detach(fresh);
  return false;
}

void Connection::reconnect_loop() {
  std::unique_lock lock(state_->mutex);
  for (;;) {
    state_->cv.wait(lock, [this] { return state_->stopping || state_->lost; });
    if (state_->stopping) return;
    Attached dead = std::move(attached_);
    attached_ = Attached{};
    lock.unlock();
    detach(dead);  // drops our reference: libvirt closes the dead connection
    const bool reconnected = reconnect_until_stopped();
    lock.lock();
    if (!reconnected) return;
  }
}

bool Connection::reconnect_until_stopped() {
  for (;;) {
    if (!wait_interval()) return false;
    auto fresh = open_and_attach(begin_attempt());
    if (!fresh.ok() || !publish(fresh.value())) continue;
    // Delivered on the event thread, like every other event, so a sink sees one thread.
    loop_->post([state = state_] { state->emit(ConnectionEvent::connected); });
    return true;
  }
}

// Waits one reconnect interval; false when the Connection is being destroyed.
bool Connection::wait_interval() {
  std::unique_lock lock(state_->mutex);
  return !state_->cv.wait_for(lock, options_.reconnect_interval, [this] { return state_->stopping; });
}

}  // namespace hostagent::virt::detail
