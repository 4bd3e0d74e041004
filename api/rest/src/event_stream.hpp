// api/rest, private: the server-sent events. One EventLog per API numbers the service's events in
// one sequence for every stream and keeps the last of them, so a client that reconnects with
// Last-Event-ID gets what it missed; each client's ServiceEventStream queues the frames the log
// hands it, bounded, so a client that stops reading loses its oldest frames (and is told so with an
// `overflow` event) instead of growing the daemon's memory.
#pragma once

#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "hostagent/api/http_server.hpp"
#include "hostagent/service/vm_service.hpp"

namespace hostagent::api::detail {

// "id: N\nevent: NAME\ndata: JSON\n\n". Operation errors are problem objects, as in the API's answers.
std::string event_frame(uint64_t id, const service::ServiceEvent& event);
// The overflow frame, without an id: it stands for frames that were never sent.
std::string overflow_frame(uint64_t dropped);
// The reset frame, without an id: what the client missed is not known; it should re-read what it
// follows. `why` is JSON-escaped here.
std::string reset_frame(const std::string& why);

class ServiceEventStream final : public EventStream {
 public:
  explicit ServiceEventStream(std::size_t capacity) : capacity_(capacity) {}

  std::vector<std::string> take() override;
  void wait(std::function<void()> wake) override;
  // Queues a frame; past capacity the oldest waiting one is dropped and counted.
  void push_frame(std::string frame);

 private:
  const std::size_t capacity_;
  std::mutex mutex_;
  std::deque<std::string> frames_;
  uint64_t dropped_ = 0;  // since the last take()
  std::function<void()> wake_;
};

class EventLog {
 public:
  // Subscribed to `service` until destroyed. Ids start at `first_id`: the daemon passes its start
  // time in microseconds since the epoch, so ids also increase across restarts (a run makes far
  // fewer events than it lives microseconds). The last `retained` frames are kept.
  EventLog(service::VmService& service, std::size_t retained, uint64_t first_id);
  ~EventLog();
  EventLog(const EventLog&) = delete;
  EventLog& operator=(const EventLog&) = delete;

  // A stream of every event from now on, after those since `last_seen` (Last-Event-ID) that are
  // still retained: an `overflow` first when some were not, a `reset` when the id is not one of
  // this run's (the daemon restarted since). At most `capacity` frames wait in it.
  std::shared_ptr<ServiceEventStream> open(std::size_t capacity, std::optional<uint64_t> last_seen);

 private:
  void publish(const service::ServiceEvent& event);
  std::vector<std::string> missed_since(uint64_t last_seen) const;  // under mutex_

  service::VmService& service_;
  const std::size_t retained_limit_;
  const uint64_t first_id_;
  uint64_t subscription_ = 0;
  mutable std::mutex mutex_;
  uint64_t next_id_;
  std::deque<std::pair<uint64_t, std::string>> retained_;  // oldest first
  std::vector<std::weak_ptr<ServiceEventStream>> streams_;
};

}  // namespace hostagent::api::detail
