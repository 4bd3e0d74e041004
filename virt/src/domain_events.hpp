// virt/domain_events: libvirt's lifecycle event (VIR_DOMAIN_EVENT_* and its detail) and its guest agent
// event (connected, disconnected) as a DomainEvent.
#pragma once

#include <libvirt/libvirt.h>

#include <string_view>

#include "hostagent/virt/hypervisor.hpp"

namespace hostagent::virt::detail {

DomainEventKind event_kind(int event) noexcept;
// The detail in words ("booted", "destroyed", ...); "unknown" for a detail newer than this code.
std::string_view event_detail(int event, int detail) noexcept;
// Reads only what the virDomainPtr carries locally (name, UUID): safe on the event thread.
DomainEvent lifecycle_event(virDomainPtr domain, int event, int detail);
// The agent lifecycle event (VIR_CONNECT_DOMAIN_EVENT_AGENT_LIFECYCLE_STATE_* and its reason).
DomainEvent agent_event(virDomainPtr domain, int state, int reason);

}  // namespace hostagent::virt::detail
