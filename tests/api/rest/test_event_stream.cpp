// Event streams: frame format, and a client that stops reading loses its oldest frames, is told,
// and never grows the daemon's memory.
#include <doctest/doctest.h>

#include <atomic>

#include "api_fixture.hpp"
#include "event_stream.hpp"

namespace hostagent::api::detail {

TEST_CASE("an event frame is id, event name, one line of JSON and a blank line") {
  daemon::ServiceEvent vm;
  vm.kind = daemon::ServiceEvent::Kind::vm;
  vm.vm = "train-0";
  vm.vm_state = "running";
  vm.detail = "started (booted)\nwith a newline";
  CHECK(event_frame(41, vm) ==
        "id: 41\nevent: vm\ndata: {\"vm\":\"train-0\",\"state\":\"running\",\"detail\":\"started (booted)\\nwith a "
        "newline\"}\n\n");

  daemon::ServiceEvent device;
  device.kind = daemon::ServiceEvent::Kind::device;
  device.vm = "train-0";
  device.held = true;
  device.devices = {PciAddress::parse("0000:17:00.0").value()};
  CHECK(event_frame(43, device) ==
        "id: 43\nevent: device\ndata: {\"vm\":\"train-0\",\"held\":true,\"devices\":[\"0000:17:00.0\"]}\n\n");

  daemon::ServiceEvent operation;
  operation.kind = daemon::ServiceEvent::Kind::operation;
  operation.operation = daemon::OperationView{};
  operation.operation->id = "op-3";
  operation.operation->state = "failed";
  operation.operation->error = Error{ErrorCode::does_not_fit, "needs 8 GPUs"};
  const auto frame = event_frame(7, operation);
  CHECK(frame.rfind("id: 7\nevent: operation\ndata: {\"id\":\"op-3\"", 0) == 0);
  CHECK(frame.find("\"instance\":\"/v1/operations/op-3\"") != std::string::npos);
  CHECK(frame.find("\"status\":409") != std::string::npos);
  CHECK(overflow_frame(5) == "event: overflow\ndata: {\"dropped\":5}\n\n");
}

TEST_CASE("a stream keeps at most its capacity of frames and reports what it dropped") {
  testing::ApiFixture api;
  api.start();
  auto stream = ServiceEventStream::open(api.service(), 2);
  std::atomic<int> woken{0};
  stream->wait([&] { ++woken; });
  CHECK(stream->take().empty());

  auto op = api.service().begin_create(api.daemon().request("ov-0", "gx3-16x128x1h100"));
  REQUIRE_MESSAGE(op.ok(), op.error().message);
  const auto ended = api.wait_operation(op->id);
  CHECK(std::string(ended.at("state").as_string()) == "succeeded");
  CHECK(woken.load() == 1);  // once, however many events came

  const auto frames = stream->take();
  REQUIRE(frames.size() == 3);
  CHECK(frames[0].rfind("event: overflow\ndata: {\"dropped\":", 0) == 0);
  CHECK(frames[1].rfind("id: ", 0) == 0);
  CHECK(stream->take().empty());
  // wait() with frames already waiting wakes at once.
  stream.reset();  // unsubscribes: later events reach nothing freed
  auto deleted = api.service().begin_delete("ov-0");
  REQUIRE_MESSAGE(deleted.ok(), deleted.error().message);
  api.wait_operation(deleted->id);
}

}  // namespace hostagent::api::detail
