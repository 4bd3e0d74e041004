// virt/domain_events: lifecycle event kinds and their details, worded.
#include "domain_events.hpp"

#include <array>
#include <span>
#include <string>

namespace hostagent::virt {

std::string_view to_string(DomainEventKind kind) noexcept {
  switch (kind) {
    case DomainEventKind::defined:
      return "defined";
    case DomainEventKind::undefined:
      return "undefined";
    case DomainEventKind::started:
      return "started";
    case DomainEventKind::suspended:
      return "suspended";
    case DomainEventKind::resumed:
      return "resumed";
    case DomainEventKind::stopped:
      return "stopped";
    case DomainEventKind::shutdown:
      return "shutdown";
    case DomainEventKind::crashed:
      return "crashed";
    case DomainEventKind::agent_connected:
      return "agent_connected";
    case DomainEventKind::agent_disconnected:
      return "agent_disconnected";
    case DomainEventKind::other:
      return "other";
  }
  return "other";
}

namespace detail {
namespace {

using Words = std::span<const std::string_view>;

// Indexed by the detail enums of libvirt-domain.h (virDomainEvent*DetailType), in their order.
constexpr std::array<std::string_view, 4> kDefined{"added", "updated", "renamed", "from snapshot"};
constexpr std::array<std::string_view, 2> kUndefined{"removed", "renamed"};
constexpr std::array<std::string_view, 5> kStarted{"booted", "migrated", "restored", "from snapshot", "wakeup"};
constexpr std::array<std::string_view, 9> kSuspended{"paused",    "migrated", "I/O error",
                                                     "watchdog",  "restored", "from snapshot",
                                                     "API error", "postcopy", "postcopy failed"};
constexpr std::array<std::string_view, 5> kResumed{"unpaused", "migrated", "from snapshot", "postcopy",
                                                   "postcopy failed"};
constexpr std::array<std::string_view, 7> kStopped{"shutdown", "destroyed", "crashed",      "migrated",
                                                   "saved",    "failed",    "from snapshot"};
constexpr std::array<std::string_view, 3> kShutdown{"finished", "guest", "host"};
constexpr std::array<std::string_view, 2> kPmSuspended{"pmsuspended to memory", "pmsuspended to disk"};
constexpr std::array<std::string_view, 2> kCrashed{"panicked", "crashloaded"};

Words detail_words(int event) noexcept {
  switch (event) {
    case VIR_DOMAIN_EVENT_DEFINED:
      return kDefined;
    case VIR_DOMAIN_EVENT_UNDEFINED:
      return kUndefined;
    case VIR_DOMAIN_EVENT_STARTED:
      return kStarted;
    case VIR_DOMAIN_EVENT_SUSPENDED:
      return kSuspended;
    case VIR_DOMAIN_EVENT_RESUMED:
      return kResumed;
    case VIR_DOMAIN_EVENT_STOPPED:
      return kStopped;
    case VIR_DOMAIN_EVENT_SHUTDOWN:
      return kShutdown;
    case VIR_DOMAIN_EVENT_PMSUSPENDED:
      return kPmSuspended;
    case VIR_DOMAIN_EVENT_CRASHED:
      return kCrashed;
    default:
      return {};
  }
}

}  // namespace

DomainEventKind event_kind(int event) noexcept {
  switch (event) {
    case VIR_DOMAIN_EVENT_DEFINED:
      return DomainEventKind::defined;
    case VIR_DOMAIN_EVENT_UNDEFINED:
      return DomainEventKind::undefined;
    case VIR_DOMAIN_EVENT_STARTED:
      return DomainEventKind::started;
    case VIR_DOMAIN_EVENT_SUSPENDED:
      return DomainEventKind::suspended;
    case VIR_DOMAIN_EVENT_RESUMED:
      return DomainEventKind::resumed;
    case VIR_DOMAIN_EVENT_STOPPED:
      return DomainEventKind::stopped;
    case VIR_DOMAIN_EVENT_SHUTDOWN:
      return DomainEventKind::shutdown;
    case VIR_DOMAIN_EVENT_CRASHED:
      return DomainEventKind::crashed;
    default:  // VIR_DOMAIN_EVENT_PMSUSPENDED and anything newer
      return DomainEventKind::other;
  }
}

std::string_view event_detail(int event, int detail) noexcept {
  const Words words = detail_words(event);
  if (detail < 0 || static_cast<std::size_t>(detail) >= words.size()) return "unknown";
  return words[static_cast<std::size_t>(detail)];
}

namespace {

DomainEvent named_event(virDomainPtr domain) {
  DomainEvent out;
  const char* name = virDomainGetName(domain);
  out.name = name != nullptr ? name : "";
  std::array<char, VIR_UUID_STRING_BUFLEN> uuid{};
  if (virDomainGetUUIDString(domain, uuid.data()) == 0) out.uuid = uuid.data();
  return out;
}

// virConnectDomainEventAgentLifecycleReason, in its order.
constexpr std::array<std::string_view, 3> kAgentReasons{"unknown", "domain started", "channel"};

}  // namespace

DomainEvent lifecycle_event(virDomainPtr domain, int event, int detail) {
  DomainEvent out = named_event(domain);
  out.kind = event_kind(event);
  out.detail = std::string(event_detail(event, detail));
  return out;
}

DomainEvent agent_event(virDomainPtr domain, int state, int reason) {
  DomainEvent out = named_event(domain);
  out.kind = state == VIR_CONNECT_DOMAIN_EVENT_AGENT_LIFECYCLE_STATE_CONNECTED ? DomainEventKind::agent_connected
             : state == VIR_CONNECT_DOMAIN_EVENT_AGENT_LIFECYCLE_STATE_DISCONNECTED
                 ? DomainEventKind::agent_disconnected
                 : DomainEventKind::other;
  out.detail = reason >= 0 && static_cast<std::size_t>(reason) < kAgentReasons.size()
                   ? std::string(kAgentReasons[static_cast<std::size_t>(reason)])
                   : "unknown";
  return out;
}

}  // namespace detail
}  // namespace hostagent::virt
