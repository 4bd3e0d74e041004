// daemon/event_hub (private): fans the service's changes out to the API's subscribers. Sinks run
// under the hub's lock, on the thread that made the change, so unsubscribe() returning means the
// sink is not running and never will again.
#pragma once

#include <cstdint>
#include <map>
#include <mutex>

#include "hostagent/service/vm_service.hpp"

namespace hostagent::daemon {

class EventHub {
 public:
  uint64_t subscribe(service::ServiceEventSink sink);
  void unsubscribe(uint64_t id);
  // Never called with another lock of the daemon's held: a sink may take the API's locks.
  void publish(const service::ServiceEvent& event);

 private:
  std::mutex mutex_;
  uint64_t next_id_ = 1;
  std::map<uint64_t, service::ServiceEventSink> sinks_;
};

}  // namespace hostagent::daemon
