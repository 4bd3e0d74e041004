// api/rest: server-sent event streams over the service's events.
#include "event_stream.hpp"

#include <boost/json/serialize.hpp>
#include <boost/json/value.hpp>

#include "hostagent/api/vm_json.hpp"
#include "operation_json.hpp"

namespace hostagent::api::detail {

std::string event_frame(uint64_t id, const service::ServiceEvent& event) {
  const boost::json::value data = event.kind == service::ServiceEvent::Kind::operation && event.operation
                                      ? operation_json(*event.operation)
                                      : api::to_json(event);
  // serialize() escapes control characters, so the data stays on one line as the format needs.
  return "id: " + std::to_string(id) + "\nevent: " + event_name(event.kind) +
         "\ndata: " + boost::json::serialize(data) + "\n\n";
}

std::string overflow_frame(uint64_t dropped) {
  return "event: overflow\ndata: {\"dropped\":" + std::to_string(dropped) + "}\n\n";
}

std::string reset_frame(const std::string& why) {
  return "event: reset\ndata: {\"reason\":" + boost::json::serialize(boost::json::value(why)) + "}\n\n";
}

void ServiceEventStream::push_frame(std::string frame) {
  std::function<void()> wake;
  {
    std::lock_guard lock(mutex_);
    if (capacity_ == 0) return;
    while (frames_.size() >= capacity_) {
      frames_.pop_front();
      ++dropped_;
    }
    frames_.push_back(std::move(frame));
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

EventLog::EventLog(service::VmService& service, std::size_t retained, uint64_t first_id)
    : service_(service), retained_limit_(retained), first_id_(first_id), next_id_(first_id) {
  // The sink holds `this`: the destructor unsubscribes, which waits for a running sink, first.
  subscription_ = service_.subscribe([this](const service::ServiceEvent& event) { publish(event); });
}

EventLog::~EventLog() {
  service_.unsubscribe(subscription_);
}

// Under the log's lock from numbering to the last stream's queue, so every stream sees the ids in
// order whichever of the service's threads the events come from. A stream's push takes only its
// own lock and posts its wake: it never calls back here.
void EventLog::publish(const service::ServiceEvent& event) {
  const std::lock_guard lock(mutex_);
  const uint64_t id = next_id_++;
  std::string frame = event_frame(id, event);
  if (retained_limit_ > 0) {
    retained_.emplace_back(id, frame);
    if (retained_.size() > retained_limit_) retained_.pop_front();
  }
  std::erase_if(streams_, [](const std::weak_ptr<ServiceEventStream>& stream) { return stream.expired(); });
  for (const auto& weak : streams_) {
    if (auto stream = weak.lock()) stream->push_frame(frame);
  }
}

std::shared_ptr<ServiceEventStream> EventLog::open(std::size_t capacity, std::optional<uint64_t> last_seen) {
  auto stream = std::make_shared<ServiceEventStream>(capacity);
  const std::lock_guard lock(mutex_);
  if (last_seen) {
    for (auto& frame : missed_since(*last_seen)) stream->push_frame(std::move(frame));
  }
  streams_.push_back(stream);
  return stream;
}

std::vector<std::string> EventLog::missed_since(uint64_t last_seen) const {
  if (last_seen < first_id_ || last_seen >= next_id_) {
    return {reset_frame("Last-Event-ID " + std::to_string(last_seen) +
                        " is not an event of this daemon's run (it restarted since): re-read what you follow")};
  }
  std::vector<std::string> out;
  const uint64_t oldest = retained_.empty() ? next_id_ : retained_.front().first;
  if (last_seen + 1 < oldest) out.push_back(overflow_frame(oldest - last_seen - 1));
  for (const auto& [id, frame] : retained_) {
    if (id > last_seen) out.push_back(frame);
  }
  return out;
}

}  // namespace hostagent::api::detail
