// hostile, requests: what a client sends inside well-formed connections. Smuggled requests (a body
// framed so that a lenient parser reads a second request in it) over the unix socket and over TCP
// with a token: refused, closed, and nothing run. The audit log under a flood of tokenless and
// wrong-token changes, refused connections and bytes that are not UTF-8: one valid JSON line per
// authenticated change, nothing else. Replays of a create's request id after its VM was deleted
// and after a restart: answered from the create's record, and no VM made.
#include <doctest/doctest.h>

#include <boost/json.hpp>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "api_fixture.hpp"
#include "hostile_support.hpp"

namespace hostagent::testing {
namespace {

using std::chrono::milliseconds;

// A stop whose framing hides a DELETE of the same VM in its body.
struct Smuggle {
  std::string framing;  // the header lines that frame the body
  std::string body;     // before the smuggled request
  int status;           // what the server must answer
};

const std::vector<Smuggle>& smuggles() {
  static const std::vector<Smuggle> forms = {
      {"Transfer-Encoding: chunked, identity\r\n", "", 400},
      {"Transfer-Encoding: xchunked\r\n", "", 400},
      {"Transfer-Encoding: gzip\r\n", "", 400},
      {"Transfer-Encoding: identity\r\n", "", 400},
      {"Transfer-Encoding: chunked\r\nTransfer-Encoding: gzip\r\n", "", 400},
      {"Transfer-Encoding: gzip, chunked\r\n", "0\r\n\r\n", 501},
      {"Transfer-Encoding: chunked, chunked\r\n", "0\r\n\r\n", 501},
      {"Content-Length: 0\r\nContent-Length: 44\r\n", "", 400},
      {"Content-Length: 4\r\nTransfer-Encoding: chunked\r\n", "0\r\n\r\n", 400},
      {"Transfer-Encoding: chunked\r\nContent-Length: 4\r\n", "0\r\n\r\n", 400},
      {"Content-Length: +0\r\n", "", 400},
      {"Transfer-Encoding:\r\n chunked\r\n", "0\r\n\r\n", 400},  // obs-fold
  };
  return forms;
}

std::string smuggling_request(const Smuggle& form, const std::string& vm, const std::string& authorization) {
  return "POST /v1/vms/" + vm + "/stop HTTP/1.1\r\nHost: x\r\n" + authorization + form.framing + "\r\n" + form.body +
         "DELETE /v1/vms/" + vm + " HTTP/1.1\r\nHost: x\r\n" + authorization + "\r\n";
}

TEST_CASE("smuggled requests over unix and TCP with a token are refused, closed, and run nothing") {
  ApiFixture api;
  api.start();
  const auto created = api.request("POST", "/v1/vms", api.create_body("smuggle-0"), "application/json");
  REQUIRE(created.status == 202);
  REQUIRE(text(api.wait_operation(text(created.json().at("id"))).at("state")) == "succeeded");
  const auto operations_before = api.service().operations().size();

  const std::string bearer = std::string("Authorization: Bearer ") + ApiFixture::kOperatorToken + "\r\n";
  for (const auto& form : smuggles()) {
    for (const bool tcp : {false, true}) {
      CAPTURE(form.framing);
      CAPTURE(tcp);
      auto client =
          tcp ? RawConnection::tcp("127.0.0.1", api.tcp_port()) : RawConnection::unix_socket(api.socket_path());
      REQUIRE(client.send(smuggling_request(form, "smuggle-0", tcp ? bearer : "")));
      const std::string answer = client.read_all(kDeadline);  // to the close: one answer, then nothing
      CHECK_MESSAGE(answer.starts_with("HTTP/1.1 " + std::to_string(form.status)), answer);
      CHECK(answer.find("HTTP/1.1", 1) == std::string::npos);
      CHECK(answer.find("Connection: close") != std::string::npos);
    }
  }
  // Neither the stop nor the smuggled delete ran: no operation, the VM as it was.
  CHECK(api.service().operations().size() == operations_before);
  const auto vm = api.request("GET", "/v1/vms/smuggle-0");
  REQUIRE(vm.status == 200);
  CHECK(text(vm.json().at("state")) == "running");
}

std::vector<boost::json::object> audit_lines(const ApiFixture& api) {
  std::istringstream lines(read_text_file(api.audit_log()));
  std::vector<boost::json::object> entries;
  std::string line;
  while (std::getline(lines, line)) {
    boost::system::error_code ec;
    const auto value = boost::json::parse(line, ec);  // rejects invalid UTF-8 too
    REQUIRE_MESSAGE(!ec, "audit line is not JSON: ", ec.message(), ": ", line);
    REQUIRE(value.is_object());
    entries.push_back(value.as_object());
  }
  return entries;
}

TEST_CASE("the audit log under a flood holds one valid JSON line per authenticated change, and only those") {
  raise_open_files();
  ApiFixture api;
  api.start(patient_limits());
  constexpr int kNoise = 1000;
  for (int i = 0; i < kNoise; ++i) {
    CHECK(api.tcp_request({.method = "POST", .target = "/v1/vms", .body = "{}"}).status == 401);
    CHECK(api.tcp_request({.method = "DELETE", .target = "/v1/vms/x%FF", .headers = {{"Authorization", "Bearer no"}}})
              .status == 401);
  }
  // Connections past one address's limit: refused before any request, counted, never written.
  std::vector<RawConnection> held;
  for (int i = 0; i < api::ServerLimits{}.max_connections_per_peer + 100; ++i) {
    held.push_back(RawConnection::tcp("127.0.0.9", api.tcp_port()));
  }
  // Authenticated changes whose targets and bodies carry bytes that are not UTF-8 (raw ones in a
  // target are refused by the parser, before anyone is authenticated: percent-encoded here).
  const std::vector<std::string> targets = {"/v1/vms/%FF%FE/stop", "/v1/vms/a%FFb/start", "/v1/vms/%C0%AF"};
  for (const auto& target : targets) {
    CHECK(api.request("POST", target, "{\"force\":\"\xff\"}", "application/json", ApiFixture::kOperatorToken).status >=
          400);
  }
  CHECK(api.request("POST", "/v1/vms", "{\"name\":\"\xc3\x28\"}", "application/json").status == 400);
  // The server accepts (and refuses) on its own time: the count is polled for, within the deadline.
  const std::string refused = "hostagent_http_connections_shed_total{reason=\"peer_limit\"} 100\n";
  std::string metrics;
  for (const auto end = Clock::now() + kDeadline; Clock::now() < end; std::this_thread::sleep_for(milliseconds(10))) {
    metrics = api.request("GET", "/v1/metrics").body;
    if (metrics.find(refused) != std::string::npos) break;
  }
  CHECK_MESSAGE(metrics.find(refused) != std::string::npos, metrics);
  CHECK(metrics.find("hostagent_http_requests_total{method=\"POST\",code=\"401\"} " + std::to_string(kNoise) + "\n") !=
        std::string::npos);
  held.clear();
  api.stop();

  const auto entries = audit_lines(api);
  CHECK(entries.size() == targets.size() + 1);
  for (const auto& entry : entries) {
    CHECK(entry.at("status").as_int64() >= 400);
    CHECK(text(entry.at("role")) == "operator");
  }
  const auto size = std::filesystem::file_size(api.audit_log());
  std::printf("audit flood: %d tokenless and %d wrong-token changes, %d refused connections: %zu lines, %ju bytes\n",
              kNoise, kNoise, 100, entries.size(), static_cast<std::uintmax_t>(size));
  CHECK(size < 4096);
}

// POST /v1/vms with a request id, over TCP with the operator's token.
ApiResponse create_with_id(ApiFixture& api, const std::string& name, const std::string& request_id) {
  return api.request("POST", "/v1/vms",
                     api.create_body(name, "gx3-16x128x1h100", R"(,"request_id":")" + request_id + "\""),
                     "application/json", ApiFixture::kOperatorToken);
}

TEST_CASE("a create's request id replayed after a delete and after a restart makes no VM") {
  ApiFixture api;
  api.start();
  const auto kept = create_with_id(api, "replay-kept", "rid-kept");
  REQUIRE(kept.status == 202);
  const auto kept_id = text(kept.json().at("id"));
  REQUIRE(text(api.wait_operation(kept_id).at("state")) == "succeeded");
  const auto gone = create_with_id(api, "replay-gone", "rid-gone");
  REQUIRE(gone.status == 202);
  REQUIRE(text(api.wait_operation(text(gone.json().at("id"))).at("state")) == "succeeded");
  const auto deleted = api.request("DELETE", "/v1/vms/replay-gone", "", "", ApiFixture::kOperatorToken);
  REQUIRE(deleted.status == 202);
  REQUIRE(text(api.wait_operation(text(deleted.json().at("id"))).at("state")) == "succeeded");

  for (int run = 0; run < 2; ++run) {
    CAPTURE(run);
    const auto operations_before = api.service().operations().size();
    for (int replay = 0; replay < 20; ++replay) {
      const auto again = create_with_id(api, "replay-kept", "rid-kept");
      REQUIRE(again.status == 202);
      CHECK(text(again.json().at("id")) == kept_id);
      CHECK(text(again.json().at("state")) == "succeeded");
      const auto refused = create_with_id(api, "replay-gone", "rid-gone");
      const auto problem = check_problem(refused, 409, "conflict");
      CHECK(text(problem.at("detail")).starts_with("request_id: "));
      CHECK(text(problem.at("detail")).find("is gone") != std::string::npos);
    }
    CHECK(api.service().operations().size() == operations_before);
    CHECK(test_driver_domains("replay-gone").empty());
    CHECK(test_driver_domains("replay-kept").size() == 1);
    api.stop();  // the daemon restarts on the same state directory
    api.start();
  }
  const auto polled = api.request("GET", "/v1/operations/" + kept_id);
  REQUIRE(polled.status == 200);
  CHECK(text(polled.json().at("state")) == "succeeded");
  CHECK(api.request("DELETE", "/v1/vms/replay-kept", "", "", ApiFixture::kOperatorToken).status == 202);
}

}  // namespace
}  // namespace hostagent::testing
