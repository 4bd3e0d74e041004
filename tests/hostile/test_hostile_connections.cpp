// hostile: the connection attacks of issue 17 against the REST API on the daemon's own service
// (test:///default, a simulated vela2 host), over real sockets: a thousand stalled or idle
// connections, renewed while an operator works, from one address and from many, and a flood of
// event streams. What must hold: the operator's requests and the health probe are answered, every
// time, within the client's deadline; no timing is asserted beyond that deadline, and the latencies
// are printed for the reader.
#include <doctest/doctest.h>

#include <atomic>
#include <cstdio>
#include <string>
#include <thread>
#include <vector>

#include "api_fixture.hpp"
#include "hostile_support.hpp"

namespace hostagent::testing {
namespace {

ApiResponse timed(ApiFixture& api, Latencies& latencies, const std::string& method, const std::string& target,
                  const std::string& body = "", const std::string& token = "") {
  const auto start = Clock::now();
  ApiResponse response = api.request(method, target, body, body.empty() ? "" : "application/json", token);
  latencies.add(start);
  return response;
}

TEST_CASE("a thousand stalled unix connections, renewed, never keep an operator or the probe waiting") {
  raise_open_files();
  ApiFixture api;
  api.start(patient_limits());
  std::vector<RawConnection> stalled;
  for (int i = 0; i < kStalled; ++i) {
    stalled.push_back(RawConnection::unix_socket(api.socket_path()));
    REQUIRE(stalled.back().send("POST /v1/vms HTTP/1.1\r\nHost: x\r\nContent-Le"));
  }
  // The attacker renews: another thousand while the operator works.
  std::atomic<bool> attacking{true};
  std::atomic<int> renewed{0};
  std::thread attacker([&] {
    std::vector<RawConnection> more;
    while (attacking && renewed < kStalled) {
      more.push_back(RawConnection::unix_socket(api.socket_path()));
      (void)more.back().send("GET /v1/vms HTTP/1.1\r\n");
      ++renewed;
    }
    while (attacking) std::this_thread::sleep_for(milliseconds(10));
  });

  Latencies probes;
  Latencies operations;
  for (int i = 0; i < 20; ++i) {
    CHECK(timed(api, probes, "GET", "/v1/health/live").status == 200);
    CHECK(timed(api, operations, "GET", "/v1/vms").status == 200);
  }
  const auto created = timed(api, operations, "POST", "/v1/vms", api.create_body("held-0"));
  REQUIRE(created.status == 202);
  const auto operation = api.wait_operation(text(created.json().at("id")));
  CHECK(text(operation.at("state")) == "succeeded");
  attacking = false;
  attacker.join();

  // The oldest stalled connections made room: each was told why (408) and closed.
  const std::string first = stalled.front().read_all(kDeadline);
  CHECK_MESSAGE(first.starts_with("HTTP/1.1 408"), first);
  const auto stats = api.http_server().connection_stats();
  // Every connection beyond the general slots took the place of a stalled one.
  const api::ServerLimits limits;
  const int general = limits.max_connections - limits.health_reserve;
  CHECK(stats.evicted >= static_cast<std::uint64_t>(kStalled + renewed - general));
  CHECK(stats.open <= api::ServerLimits{}.max_connections);
  std::printf("stalled unix: %d stalled, %d renewed; evicted %llu, open %d\n", kStalled, renewed.load(),
              static_cast<unsigned long long>(stats.evicted), stats.open);
  probes.print("probe under stall");
  operations.print("operator under stall");
}

TEST_CASE("over TCP, a thousand stalled and idle connections from many addresses, and one address's flood") {
  raise_open_files();
  ApiFixture api;
  api.start(patient_limits());
  const uint16_t port = api.tcp_port();
  // One address alone, while slots are free: past max_connections_per_peer it is refused at once,
  // unread. (Once the slots are taken, eviction already keeps any one client's stalls from piling
  // up: each new one takes the place of the oldest.)
  const int per_peer = api::ServerLimits{}.max_connections_per_peer;
  std::vector<RawConnection> flood;
  for (int i = 0; i < per_peer + 36; ++i) {
    flood.push_back(RawConnection::tcp("127.0.2.1", port));
    REQUIRE(flood.back().send("GET /v1/vms HTTP/1.1\r\n"));
  }
  const std::string refused = flood.back().read_all(kDeadline);
  CHECK_MESSAGE(refused.starts_with("HTTP/1.1 503"), refused);
  CHECK(refused.find("max_connections_per_peer") != std::string::npos);
  CHECK(api.http_server().connection_stats().refused_peer == 36U);

  // 40 addresses x 25: under the per-peer limit, so the budget itself must make room. Half stall in
  // their headers; half send a whole (unauthenticated) request and then idle on keep-alive.
  std::vector<RawConnection> held;
  for (int i = 0; i < kStalled; ++i) {
    held.push_back(RawConnection::tcp("127.0.1." + std::to_string(1 + i % 40), port));
    REQUIRE(held.back().connected());
    REQUIRE(held.back().send(i % 2 == 0 ? "GET /v1/vms HTTP/1.1\r\nHost: x\r\nAuthor"
                                        : "GET /v1/health/live HTTP/1.1\r\nHost: x\r\n\r\n"));
  }

  Latencies probes;
  Latencies operations;
  for (int i = 0; i < 20; ++i) {
    CHECK(timed(api, probes, "GET", "/v1/health/ready", "", ApiServer::kReaderToken).status == 200);
    CHECK(timed(api, operations, "GET", "/v1/vms", "", ApiServer::kOperatorToken).status == 200);
  }
  const auto created = timed(api, operations, "POST", "/v1/vms", api.create_body("held-1"), ApiServer::kOperatorToken);
  CHECK(created.status == 202);
  const auto stats = api.http_server().connection_stats();
  CHECK(stats.evicted >= static_cast<std::uint64_t>(kStalled + per_peer - api::ServerLimits{}.max_connections));
  std::printf("stalled tcp: evicted %llu, refused by peer %llu, open %d\n",
              static_cast<unsigned long long>(stats.evicted), static_cast<unsigned long long>(stats.refused_peer),
              stats.open);
  probes.print("probe under tcp stall");
  operations.print("operator under tcp stall");
}

TEST_CASE("a flood of event streams takes only max_event_streams, and the operator and probe are answered") {
  raise_open_files();
  ApiFixture api;
  api.start(patient_limits());
  const int cap = api::ServerLimits{}.max_event_streams;
  std::vector<RawConnection> streams;
  for (int i = 0; i < 4 * cap; ++i) {
    streams.push_back(RawConnection::unix_socket(api.socket_path()));
    REQUIRE(streams.back().send("GET /v1/events HTTP/1.1\r\nHost: x\r\n\r\n"));
  }
  // Which ones got a stream is the handlers' race; how many is not.
  int served = 0;
  int refused = 0;
  for (const auto& stream : streams) {
    const std::string status = stream.status_line(kDeadline);
    served += status.starts_with("HTTP/1.1 200") ? 1 : 0;
    refused += status.starts_with("HTTP/1.1 503") ? 1 : 0;
  }
  CHECK(served == cap);
  CHECK(refused == 3 * cap);
  CHECK(api.http_server().connection_stats().event_streams == cap);
  CHECK(api.request("GET", "/v1/health/live").status == 200);
  CHECK(api.request("GET", "/v1/vms").status == 200);
}

}  // namespace
}  // namespace hostagent::testing
