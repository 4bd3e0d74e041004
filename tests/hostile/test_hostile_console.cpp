// tests/hostile: a VM's console (GET /v1/vms/{name}/console) against clients that would hold the
// guest or the daemon: one that stops reading while the guest floods its console, one that
// vanishes without a close, a run of take-overs. The daemon's own service on test:///, whose
// hypervisor double serves the consoles libvirt's test driver lacks, behind the real server.
#include <doctest/doctest.h>

#include <boost/asio/io_context.hpp>
#include <boost/asio/local/stream_protocol.hpp>
#include <boost/beast/websocket.hpp>

#include "api_fixture.hpp"
#include "hostile_support.hpp"

namespace hostagent::testing {
namespace {

namespace asio = boost::asio;
namespace websocket = boost::beast::websocket;

// Beast's WebSocket client on the API's unix socket, handshaken: it sends and reads only as told.
struct RawClient {
  asio::io_context io;
  websocket::stream<asio::local::stream_protocol::socket> ws{io};
  boost::system::error_code handshake;

  RawClient(const ApiServer& server, const std::string& target) {
    ws.next_layer().connect(asio::local::stream_protocol::endpoint(server.socket_path().string()));
    ws.handshake("localhost", target, handshake);
  }
};

constexpr std::chrono::seconds kBound{30};  // for a failing test; a passing one is told sooner

TEST_CASE("console clients that stop reading, vanish or keep taking over leave the guest and the daemon as they were") {
  ApiFixture api;
  api::ServerLimits limits;
  limits.request_timeout = milliseconds(500);
  limits.event_send_buffer = 4096;
  api.start(limits);
  api.hypervisor().serve_consoles();
  const auto created = api.request("POST", "/v1/vms", api.create_body("vm1"), "application/json");
  REQUIRE_MESSAGE(created.status == 202, created.body);
  REQUIRE(text(api.wait_operation(text(created.json().at("id"))).at("state")) == "succeeded");
  const std::string target = "/v1/vms/vm1/console";

  {
    RawClient slow(api, target);
    REQUIRE_MESSAGE(!slow.handshake, slow.handshake.message());
    // 8 MiB from the guest, none of it read: each write returns (the daemon drops the oldest), and
    // the server gives up on the client.
    const std::string chunk(16 << 10, 'x');
    for (int i = 0; i < 512; ++i) api.hypervisor().console_output("vm1", chunk);
    CHECK(api.hypervisor().wait_consoles_closed(kBound));  // the daemon let go of its stream
  }
  for (int i = 0; i < 20; ++i) {
    RawClient taker(api, target + "?take_over=true");
    REQUIRE_MESSAGE(!taker.handshake, taker.handshake.message());
    if (i % 2 == 0) taker.ws.next_layer().close();  // vanished: no close frame
  }
  CHECK(api.hypervisor().wait_consoles_closed(kBound));
  CHECK(api.http_server().connection_stats().event_streams == 0);

  // The next operator needs no take-over, types into the guest and reads what it writes.
  PipedConsole console(api, target);
  console.type("uptime\r");
  // Typed once its session is open: the guest answers only then (a console's output before a
  // session reaches no one).
  CHECK(api.hypervisor().wait_console_input("vm1", "uptime\r", kBound));
  api.hypervisor().console_output("vm1", "up 3 days\r\n");
  CHECK(console.read_until("up 3 days").find("up 3 days") != std::string::npos);
  CHECK(api.request("GET", "/v1/health/ready").status == 200);
  CHECK(text(api.request("GET", "/v1/vms/vm1").json().at("state")) == "running");
}

}  // namespace
}  // namespace hostagent::testing
