// Event streams: frame format, and a client that stops reading loses its oldest frames, is told,
// and never grows the daemon's memory.
#include <doctest/doctest.h>

#include <algorithm>
#include <atomic>
#include <memory>
#include <string>
#include <vector>

#include "api_fixture.hpp"
#include "event_stream.hpp"

namespace hostagent::api::detail {

TEST_CASE("an event frame is id, event name, one line of JSON and a blank line") {
  service::ServiceEvent vm;
  vm.kind = service::ServiceEvent::Kind::vm;
  vm.vm = "train-0";
  vm.vm_state = "running";
  vm.detail = "started (booted)\nwith a newline";
  CHECK(event_frame(41, vm) ==
        "id: 41\nevent: vm\ndata: {\"vm\":\"train-0\",\"state\":\"running\",\"detail\":\"started (booted)\\nwith a "
        "newline\"}\n\n");

  service::ServiceEvent device;
  device.kind = service::ServiceEvent::Kind::device;
  device.vm = "train-0";
  device.held = true;
  device.devices = {PciAddress::parse("0000:17:00.0").value()};
  CHECK(event_frame(43, device) ==
        "id: 43\nevent: device\ndata: {\"vm\":\"train-0\",\"held\":true,\"devices\":[\"0000:17:00.0\"]}\n\n");

  service::ServiceEvent operation;
  operation.kind = service::ServiceEvent::Kind::operation;
  operation.operation = service::OperationView{};
  operation.operation->id = "op-3";
  operation.operation->state = "failed";
  operation.operation->error = Error{ErrorCode::does_not_fit, "needs 8 GPUs"};
  const auto frame = event_frame(7, operation);
  CHECK(frame.rfind("id: 7\nevent: operation\ndata: {\"id\":\"op-3\"", 0) == 0);
  CHECK(frame.find("\"instance\":\"/v1/operations/op-3\"") != std::string::npos);
  CHECK(frame.find("\"status\":409") != std::string::npos);
  CHECK(overflow_frame(5) == "event: overflow\ndata: {\"dropped\":5}\n\n");
}

// One create: its events, as frames, through the log (waits for the operation's end).
void create_and_wait(testing::ApiFixture& api, const std::string& name) {
  auto op = api.service().begin_create(api.daemon().request(name, "gx3-16x128x1h100"));
  REQUIRE_MESSAGE(op.ok(), op.error().message);
  const auto ended = api.wait_operation(op->id);
  CHECK(std::string(ended.at("state").as_string()) == "succeeded");
}

// The id of a frame ("id: N\n..."); 0 for one without.
uint64_t id_of(const std::string& frame) {
  if (frame.rfind("id: ", 0) != 0) return 0;
  return std::stoull(frame.substr(4, frame.find('\n') - 4));
}

std::vector<uint64_t> ids_of(const std::vector<std::string>& frames) {
  std::vector<uint64_t> ids;
  ids.reserve(frames.size());
  for (const auto& frame : frames) ids.push_back(id_of(frame));
  return ids;
}

TEST_CASE("a stream keeps at most its capacity of frames and reports what it dropped") {
  testing::ApiFixture api;
  api.start();
  auto log = std::make_unique<EventLog>(api.service(), 16, 1);
  auto stream = log->open(2, std::nullopt);
  std::atomic<int> woken{0};
  stream->wait([&] { ++woken; });
  CHECK(stream->take().empty());

  create_and_wait(api, "ov-0");
  CHECK(woken.load() == 1);  // once, however many events came

  const auto frames = stream->take();
  REQUIRE(frames.size() == 3);
  CHECK(frames[0].rfind("event: overflow\ndata: {\"dropped\":", 0) == 0);
  CHECK(frames[1].rfind("id: ", 0) == 0);
  CHECK(stream->take().empty());
  stream.reset();
  log.reset();  // unsubscribes: later events reach nothing freed
  auto deleted = api.service().begin_delete("ov-0");
  REQUIRE_MESSAGE(deleted.ok(), deleted.error().message);
  api.wait_operation(deleted->id);
}

TEST_CASE("every stream sees one sequence of ids, from the log's first, in order") {
  testing::ApiFixture api;
  api.start();
  EventLog log(api.service(), 64, 5000);
  auto early = log.open(256, std::nullopt);
  create_and_wait(api, "seq-0");
  auto late = log.open(256, std::nullopt);
  create_and_wait(api, "seq-1");
  const auto early_ids = ids_of(early->take());
  const auto late_ids = ids_of(late->take());
  REQUIRE(early_ids.size() > late_ids.size());
  CHECK(early_ids.front() == 5000);
  for (std::size_t i = 1; i < early_ids.size(); ++i) CHECK(early_ids[i] == early_ids[i - 1] + 1);
  // The late stream's ids are the tail of the early one's: the same events, the same ids.
  CHECK(std::equal(late_ids.rbegin(), late_ids.rend(), early_ids.rbegin()));
}

TEST_CASE("Last-Event-ID: what was missed and is retained, an overflow for what is not, a reset for another run") {
  testing::ApiFixture api;
  api.start();
  EventLog log(api.service(), 4, 100);
  auto all = log.open(256, std::nullopt);
  create_and_wait(api, "resume-0");
  const auto sent = all->take();
  REQUIRE(sent.size() > 6);
  const uint64_t last = id_of(sent.back());

  // Seen up to two before the last: the last two again, nothing else.
  auto resumed = log.open(256, last - 2);
  const auto again = resumed->take();
  REQUIRE(again.size() == 2);
  CHECK(again[0] == sent[sent.size() - 2]);
  CHECK(again[1] == sent.back());
  // Seen everything: nothing to replay.
  CHECK(log.open(256, last)->take().empty());
  // Seen only the first: what fell out of the window of 4 is counted, the 4 follow.
  const auto gap = log.open(256, 100)->take();
  REQUIRE(gap.size() == 5);
  CHECK(gap[0] == overflow_frame(last - 100 - 4));
  CHECK(id_of(gap[1]) == last - 3);
  // An id of an earlier run (or none this log sent): a reset, nothing guessed.
  for (const uint64_t foreign : {uint64_t{99}, last + 1}) {
    const auto reset = log.open(256, foreign)->take();
    REQUIRE(reset.size() == 1);
    CHECK(reset[0].rfind("event: reset\ndata: {\"reason\":", 0) == 0);
  }
}

TEST_CASE("GET /v1/events resumes after Last-Event-ID, and refuses one that is not an id") {
  testing::ApiFixture api;
  api.start();
  const auto refused = api.unix_request({"GET", "/v1/events", "", "", {{"Last-Event-ID", "12abc"}}});
  CHECK(testing::field_of(testing::check_problem(refused, 400, "invalid_argument")) == "Last-Event-ID");
}

}  // namespace hostagent::api::detail
