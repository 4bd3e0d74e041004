// api/rest, private: one client's server-sent event stream, fed by the service's events. The sink
// runs on the service's threads and only queues a frame; the queue is bounded per client, so a
// client that stops reading loses its oldest frames (and is told so with an `overflow` event)
// instead of growing the daemon's memory.
#pragma once

#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "hostagent/api/http_server.hpp"
#include "hostagent/service/vm_service.hpp"

namespace hostagent::api::detail {

// "id: N\nevent: NAME\ndata: JSON\n\n". Operation errors are problem objects, as in the API's answers.
std::string event_frame(uint64_t id, const daemon::ServiceEvent& event);
// The overflow frame, without an id: it stands for frames that were never sent.
std::string overflow_frame(uint64_t dropped);

class ServiceEventStream final : public EventStream {
 public:
  // Subscribed until destroyed. `capacity` frames wait at most.
  static std::shared_ptr<ServiceEventStream> open(daemon::VmService& service, std::size_t capacity);
  ~ServiceEventStream() override;
  ServiceEventStream(const ServiceEventStream&) = delete;
  ServiceEventStream& operator=(const ServiceEventStream&) = delete;

  std::vector<std::string> take() override;
  void wait(std::function<void()> wake) override;
  void push(const daemon::ServiceEvent& event);

 private:
  ServiceEventStream(daemon::VmService& service, std::size_t capacity) : service_(service), capacity_(capacity) {}

  daemon::VmService& service_;
  const std::size_t capacity_;
  uint64_t subscription_ = 0;
  std::mutex mutex_;
  std::deque<std::string> frames_;
  uint64_t next_id_ = 1;
  uint64_t dropped_ = 0;  // since the last take()
  std::function<void()> wake_;
};

}  // namespace hostagent::api::detail
