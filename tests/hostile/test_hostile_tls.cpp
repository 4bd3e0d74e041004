// hostile, over mutual TLS: a thousand connections that stall before or inside the TLS handshake,
// from forty addresses, while an operator (by its client certificate) and a reader's probe keep
// being answered. The HTTP server alone (tests/api/http's harness): what TLS adds is the handshake,
// which runs under the same header deadline and the same budget as a request's headers.
#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "hostile_support.hpp"
#include "test_fixture.hpp"
#include "test_pki.hpp"

namespace hostagent::testing {
namespace {

TEST_CASE("a thousand stalled TLS handshakes never keep a certified operator or the probe waiting") {
  raise_open_files();
  TempDir dir;
  const auto pki = api::testing::make_pki(dir.path());
  if (!pki) return;
  api::ServerOptions options;
  ListenAddress tcp;
  tcp.kind = ListenAddress::Kind::tcp;
  tcp.host = "127.0.0.1";
  options.listen = {tcp};
  options.tls_certificate_file = pki->server_certificate.string();
  options.tls_key_file = pki->server_key.string();
  options.tls_client_ca_file = pki->ca.string();
  options.operator_common_names = {"control-plane"};
  options.limits = patient_limits();
  options.probe_paths = {"/v1/health/live"};
  api::testing::Harness harness;
  auto server = harness.start(options);
  REQUIRE_MESSAGE(server.ok(), (server.ok() ? "" : server.error().message));
  const uint16_t port = (*server)->endpoints().front().port;

  // Half send nothing; half send the first bytes of a ClientHello (a TLS record header, handshake
  // type, and no more) and wait.
  const std::string partial_hello("\x16\x03\x01\x02\x00\x01\x00\x01\xfc", 9);
  std::vector<RawConnection> stalled;
  for (int i = 0; i < kStalled; ++i) {
    stalled.push_back(RawConnection::tcp("127.0.3." + std::to_string(1 + i % 40), port));
    REQUIRE(stalled.back().connected());
    if (i % 2 == 1) REQUIRE(stalled.back().send(partial_hello));
  }

  Latencies answers;
  for (int i = 0; i < 10; ++i) {
    const auto start = std::chrono::steady_clock::now();
    auto as_operator = api::testing::connect_tls(port, pki->ca, pki->operator_certificate, pki->operator_key);
    REQUIRE(as_operator.handshake_ok);
    const auto created = as_operator.client->request(api::testing::http::verb::post, "/v1/vms", "{}");
    REQUIRE(created);
    CHECK(created->body() == "cert:CN=control-plane operator POST /v1/vms");
    auto as_reader = api::testing::connect_tls(port, pki->ca, pki->reader_certificate, pki->reader_key);
    REQUIRE(as_reader.handshake_ok);
    const auto probe = as_reader.client->request(api::testing::http::verb::get, "/v1/health/live");
    REQUIRE(probe);
    CHECK(probe->result_int() == 200);
    answers.add(start);
  }
  // Stalled handshakes are closed to make room (no 408: there is no TLS session to carry it).
  const auto stats = (*server)->connection_stats();
  const api::ServerLimits limits;
  CHECK(stats.evicted >= static_cast<std::uint64_t>(kStalled - (limits.max_connections - limits.health_reserve)));
  CHECK(stalled.front().closed_by_server(kDeadline));
  std::printf("stalled tls: evicted %llu, open %d\n", static_cast<unsigned long long>(stats.evicted), stats.open);
  answers.print("operator create + reader probe, each on new TLS connections, under stall");
}

}  // namespace
}  // namespace hostagent::testing
