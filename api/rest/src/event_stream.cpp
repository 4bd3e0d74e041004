// api/rest: server-sent event streams over the service's events.
#include "event_stream.hpp"

#include <boost/json/serialize.hpp>

#include "hostagent/api/vm_json.hpp"
#include "operation_json.hpp"

namespace hostagent::api::detail {

std::string event_frame(uint64_t id, const daemon::ServiceEvent& event) {
  const boost::json::value data = event.kind == daemon::ServiceEvent::Kind::operation && event.operation
                                      ? operation_json(*event.operation)
                                      : api::to_json(event);
  // serialize() escapes control characters, so the data stays on one line as the format needs.
  return "id: " + std::to_string(id) + "\nevent: " + event_name(event.kind) +
         "\ndata: " + boost::json::serialize(data) + "\n\n";
}

std::string overflow_frame(uint64_t dropped) {
  return "event: overflow\ndata: {\"dropped\":" + std::to_string(dropped) + "}\n\n";
}

std::shared_ptr<ServiceEventStream> ServiceEventStream::open(daemon::VmService& service, std::size_t capacity) {
  std::shared_ptr<ServiceEventStream> stream(new ServiceEventStream(service, capacity));
  // The sink holds a raw pointer: the destructor unsubscribes, which waits for a running sink,
  // before any member is gone.
  ServiceEventStream* raw = stream.get();
  stream->subscription_ = service.subscribe([raw](const daemon::ServiceEvent& event) { raw->push(event); });
  return stream;
}

ServiceEventStream::~ServiceEventStream() {
  service_.unsubscribe(subscription_);
}

void ServiceEventStream::push(const daemon::ServiceEvent& event) {
  std::function<void()> wake;
  {
    std::lock_guard lock(mutex_);
    if (capacity_ == 0) return;
    while (frames_.size() >= capacity_) {
      frames_.pop_front();
      ++dropped_;
    }
    frames_.push_back(event_frame(next_id_++, event));
    wake = std::move(wake_);
    wake_ = nullptr;
  }
  if (wake) wake();
}

std::vector<std::string> ServiceEventStream::take() {
  std::lock_guard lock(mutex_);
  std::vector<std::string> out;
  out.reserve(frames_.size() + 1);
  if (dropped_ > 0) out.push_back(overflow_frame(dropped_));
  dropped_ = 0;
  for (auto& frame : frames_) out.push_back(std::move(frame));
  frames_.clear();
  return out;
}

void ServiceEventStream::wait(std::function<void()> wake) {
  {
    std::lock_guard lock(mutex_);
    if (frames_.empty() && dropped_ == 0) {
      wake_ = std::move(wake);
      return;
    }
  }
  if (wake) wake();
}

}  // namespace hostagent::api::detail
