// daemon/event_hub: subscribers of the service's changes.
#include "event_hub.hpp"

namespace hostagent::daemon {

uint64_t EventHub::subscribe(service::ServiceEventSink sink) {
  std::lock_guard lock(mutex_);
  const uint64_t id = next_id_++;
  sinks_.emplace(id, std::move(sink));
  return id;
}

void EventHub::unsubscribe(uint64_t id) {
  std::lock_guard lock(mutex_);
  sinks_.erase(id);
}

void EventHub::publish(const service::ServiceEvent& event) {
  std::lock_guard lock(mutex_);
  for (const auto& [id, sink] : sinks_) sink(event);
}

}  // namespace hostagent::daemon
