// hostile, event streams: a reader too slow for the events it asked for gets an `overflow` frame
// with the count it lost before the events that follow, and keeps its stream; a reader that reads
// nothing at all is sent `event: end` saying why, then closed. Both over the unix socket, on the
// daemon's own service, with a small kernel queue and a small stream queue so a few creates
// overflow them.
#include <doctest/doctest.h>

#include <atomic>
#include <string>
#include <thread>

#include "api_fixture.hpp"
#include "hostile_support.hpp"

namespace hostagent::testing {
namespace {

using std::chrono::milliseconds;

constexpr std::size_t kQueueFrames = 4;

api::ServerLimits small_streams() {
  api::ServerLimits limits;
  limits.event_send_buffer = 4096;  // the kernel doubles it, and keeps at least ~4.5 KiB (socket(7))
  limits.request_timeout = std::chrono::seconds(1);
  return limits;
}

void create_and_delete(ApiFixture& api, const std::string& name) {
  const auto created = api.request("POST", "/v1/vms", api.create_body(name), "application/json");
  REQUIRE(created.status == 202);
  CHECK(text(api.wait_operation(text(created.json().at("id"))).at("state")) == "succeeded");
  const auto deleted = api.request("DELETE", "/v1/vms/" + name);
  REQUIRE(deleted.status == 202);
  CHECK(text(api.wait_operation(text(deleted.json().at("id"))).at("state")) == "succeeded");
}

RawConnection open_stream(ApiFixture& api) {
  RawConnection stream = RawConnection::unix_socket(api.socket_path());
  REQUIRE(stream.send("GET /v1/events HTTP/1.1\r\nHost: x\r\n\r\n"));
  REQUIRE(stream.status_line(kDeadline).starts_with("HTTP/1.1 200"));
  return stream;
}

TEST_CASE("a slow event reader gets its overflow first and keeps its stream, and a stuck one a last frame") {
  ApiFixture api;
  api.start(small_streams(), kQueueFrames);
  RawConnection slow = open_stream(api);
  RawConnection stuck = open_stream(api);
  // The slow reader takes 256 bytes every 20 ms (13 KB/s) from the start; the stuck one nothing.
  std::atomic<bool> reading{true};
  std::string got;
  std::thread reader([&] {
    while (reading) {
      got += slow.read_some(256, milliseconds(20));
      std::this_thread::sleep_for(milliseconds(20));
    }
  });
  // Far more than the kernel's queue and the stream's 4 frames hold at that pace.
  for (int i = 0; i < 4; ++i) create_and_delete(api, "slow-" + std::to_string(i));
  create_and_delete(api, "after");
  const auto until = std::chrono::steady_clock::now() + kDeadline;
  while (std::chrono::steady_clock::now() < until) {
    std::this_thread::sleep_for(milliseconds(100));
    if (slow.closed_by_server(milliseconds(0))) break;
    if (api.http_server().connection_stats().event_streams == 1) break;  // the stuck one ended
  }
  std::this_thread::sleep_for(milliseconds(500));  // the slow reader catches up with what is left
  reading = false;
  reader.join();

  // The count of what it lost, before the events that followed: the last change reached it.
  const auto overflow = got.find("event: overflow\ndata: {\"dropped\":");
  REQUIRE_MESSAGE(overflow != std::string::npos, got);
  CHECK(got.find("event: end") == std::string::npos);
  CHECK(got.find("\"vm\":\"after\"", overflow) != std::string::npos);

  // The stuck reader made no room for request_timeout (1 s): its last frame says why.
  const std::string last = stuck.read_all(kDeadline);
  const auto end = last.find("event: end\ndata: {\"reason\":\"slow_reader\"");
  CHECK_MESSAGE(end != std::string::npos, last);
  CHECK(last.find("event:", end + 1) == std::string::npos);  // nothing after it
  CHECK(stuck.closed_by_server(kDeadline));
  CHECK(api.http_server().connection_stats().event_streams == 1);  // the slow one only
}

}  // namespace
}  // namespace hostagent::testing
