// ApiClient against a real server over real sockets: a unix socket and TCP with a bearer token;
// problems into Errors, the operator's message when nothing listens, keep-alive reuse and its
// recovery from a connection the server closed, and the event stream.
#include <doctest/doctest.h>

#include <boost/json.hpp>

#include "hostagent/api/api_client.hpp"
#include "test_http_server.hpp"
#include "test_support.hpp"

namespace hostagent {
namespace {

using api::ApiClient;
using api::ClientOptions;
using testing::TestReply;
using testing::TestRequest;

std::unique_ptr<ApiClient> client_for(const std::string& url, const std::string& token = "") {
  ClientOptions options;
  options.url = url;
  options.token = token;
  options.connect_timeout = std::chrono::seconds(5);
  options.read_timeout = std::chrono::seconds(10);
  auto client = ApiClient::make(options);
  REQUIRE_MESSAGE(client.ok(), client.error().message);
  return std::move(client).value();
}

TestReply reply(unsigned status, const std::string& content_type, const std::string& body) {
  TestReply out;
  out.status = status;
  out.content_type = content_type;
  out.body = body;
  return out;
}

// Echoes what it was sent, as JSON, so the test sees the request as the server read it.
TestReply echo(const TestRequest& request) {
  boost::json::object echoed{{"method", std::string(request.method_string())},
                             {"target", std::string(request.target())},
                             {"body", request.body()},
                             {"content_type", std::string(request[boost::beast::http::field::content_type])},
                             {"authorization", std::string(request[boost::beast::http::field::authorization])}};
  auto out = reply(200, "application/json; charset=utf-8", boost::json::serialize(echoed));
  out.headers = {{"X-Test", "yes"}};
  return out;
}

TEST_CASE("a unix socket round trip keeps one connection for several requests") {
  testing::TempDir dir;
  auto server = testing::TestServer::unix_socket(dir.path() / "api.sock", echo);
  auto client = client_for(server->url());

  auto response = client->request("POST", "/v1/vms", R"({"name":"train-0"})", "application/json");
  REQUIRE_MESSAGE(response.ok(), response.error().message);
  CHECK(response->status == 200);
  CHECK(response->content_type == "application/json");
  CHECK(response->headers.at("x-test") == "yes");
  const auto echoed = boost::json::parse(response->body).as_object();
  CHECK(echoed.at("method").as_string() == "POST");
  CHECK(echoed.at("target").as_string() == "/v1/vms");
  CHECK(echoed.at("body").as_string() == R"({"name":"train-0"})");
  CHECK(echoed.at("content_type").as_string() == "application/json");
  CHECK(echoed.at("authorization").as_string() == "");

  for (int i = 0; i < 3; ++i) {
    auto json = client->get_json("/v1/vms?role=gpu");
    REQUIRE_MESSAGE(json.ok(), json.error().message);
    CHECK(json->at("target").as_string() == "/v1/vms?role=gpu");
  }
  CHECK(server->connections() == 1);
}

TEST_CASE("over TCP the bearer token is sent, and a 401 problem becomes an error") {
  auto server = testing::TestServer::tcp([](const TestRequest& request) {
    if (request[boost::beast::http::field::authorization] != "Bearer s3cret") {
      return reply(401, "application/problem+json",
                   R"({"type":"https://hostagent.dev/problems/unauthenticated","title":"Unauthenticated",)"
                   R"("status":401,"detail":"no valid bearer token","instance":"/v1/host","code":"unauthenticated"})");
    }
    return echo(request);
  });
  auto with_token = client_for(server->url(), "s3cret");
  auto json = with_token->get_json("/v1/host");
  REQUIRE_MESSAGE(json.ok(), json.error().message);
  CHECK(json->at("authorization").as_string() == "Bearer s3cret");

  auto without = client_for(server->url());
  auto refused = without->get_json("/v1/host");
  REQUIRE_FALSE(refused.ok());
  CHECK(refused.error().code == ErrorCode::invalid_argument);
  CHECK(refused.error().message == "no valid bearer token");
  auto raw = without->request("GET", "/v1/host");  // request() itself answers whatever the status
  REQUIRE(raw.ok());
  CHECK(raw->status == 401);
  CHECK(raw->content_type == "application/problem+json");
}

TEST_CASE("problems map to the error code and carry the detail and the field") {
  testing::TempDir dir;
  auto server = testing::TestServer::unix_socket(dir.path() / "api.sock", [](const TestRequest& request) {
    if (request.target() == "/v1/vms/nope") {
      return reply(404, "application/problem+json",
                   R"({"type":"https://hostagent.dev/problems/not-found","title":"Not found","status":404,)"
                   R"("detail":"VM 'nope' does not exist","instance":"/v1/vms/nope","code":"not_found"})");
    }
    if (request.target() == "/v1/vms") {
      return reply(400, "application/problem+json",
                   R"({"type":"https://hostagent.dev/problems/invalid-argument","title":"Invalid argument",)"
                   R"("status":400,"detail":"unknown field; the fields are name, template","instance":"/v1/vms",)"
                   R"("code":"invalid_argument","field":"memory"})");
    }
    if (request.target() == "/v1/busy") {
      return reply(409, "application/problem+json",
                   R"({"title":"Conflict","status":409,"detail":"request id r-1 names train-0","code":"conflict"})");
    }
    return reply(502, "text/html", "<html>bad gateway</html>");
  });
  auto client = client_for(server->url());

  auto missing = client->get_json("/v1/vms/nope");
  REQUIRE_FALSE(missing.ok());
  CHECK(missing.error().code == ErrorCode::not_found);
  CHECK(missing.error().message == "VM 'nope' does not exist");

  auto bad = client->send_json("POST", "/v1/vms", boost::json::object{{"memory", 1}});
  REQUIRE_FALSE(bad.ok());
  CHECK(bad.error().code == ErrorCode::invalid_argument);
  CHECK(bad.error().message == "unknown field; the fields are name, template (field: memory)");

  auto conflict = client->call("POST", "/v1/busy");
  REQUIRE_FALSE(conflict.ok());
  CHECK(conflict.error().code == ErrorCode::conflict);

  auto not_a_problem = client->call("GET", "/v1/other");
  REQUIRE_FALSE(not_a_problem.ok());
  CHECK(not_a_problem.error().code == ErrorCode::internal);
  CHECK(not_a_problem.error().message.find("HTTP 502") != std::string::npos);

  const auto parsed = api::parse_problem(R"({"status":422,"detail":"2 errors","code":"invalid_template",)"
                                         R"("errors":[{"line":2,"message":"vcpus"}]})");
  REQUIRE(parsed.has_value());
  CHECK(parsed->status == 422);
  CHECK(parsed->json.at("errors").as_array().size() == 1);
  CHECK_FALSE(api::parse_problem("[1,2]").has_value());
  CHECK_FALSE(api::parse_problem("not json").has_value());
}

TEST_CASE("nothing listening: the message names the address, the reason and what to check") {
  testing::TempDir dir;
  const auto path = dir.path() / "hostagent.sock";
  auto client = client_for("unix:" + path.string());
  auto result = client->request("GET", "/v1/status");
  REQUIRE_FALSE(result.ok());
  CHECK(result.error().code == ErrorCode::unavailable);
  CHECK(result.error().message ==
        "cannot connect to unix:" + path.string() + ": No such file or directory; is hostagentd running?");

  // A port that was bound a moment ago and is closed now: refused.
  std::string closed_url;
  {
    auto server = testing::TestServer::tcp(echo);
    closed_url = server->url();
  }
  auto tcp = client_for(closed_url, "t");
  auto refused = tcp->request("GET", "/v1/status");
  REQUIRE_FALSE(refused.ok());
  CHECK(refused.error().code == ErrorCode::unavailable);
  CHECK(refused.error().message.find("cannot connect to " + closed_url + ": Connection refused") == 0);
}

TEST_CASE("a keep-alive connection the server closed while idle is reopened once") {
  testing::TempDir dir;
  auto server = testing::TestServer::unix_socket(dir.path() / "api.sock", [](const TestRequest& request) {
    auto echoed = echo(request);
    echoed.close_after = true;  // as when the server's idle timeout ends a connection between requests
    return echoed;
  });
  auto client = client_for(server->url());
  for (int i = 0; i < 3; ++i) {
    auto response = client->get_json("/v1/vms");
    REQUIRE_MESSAGE(response.ok(), response.error().message);
  }
  CHECK(server->connections() == 3);
}

TEST_CASE("the event stream is read frame by frame until the callback stops it") {
  testing::TempDir dir;
  const std::vector<std::string> frames = {
      ": keepalive\n\n", "id: 41\nevent: operation\ndata: {\"id\":\"op-12\",\"state\":\"running\"}\n\n",
      "id: 42\nevent: vm\ndata: {\"vm\":\"train-0\",",  // a frame split across chunks
      "\"state\":\"running\"}\n\nid: 43\nevent: device\ndata: {}\n\n", "id: 44\nevent: vm\ndata: {}\n\n"};
  auto server = testing::TestServer::unix_socket(dir.path() / "api.sock", [&frames](const TestRequest& request) {
    TestReply stream;
    if (request.target() == "/v1/events") stream.event_frames = frames;
    return stream;
  });
  auto client = client_for(server->url());
  std::vector<api::ServerEvent> seen;
  auto status = client->read_events("/v1/events", [&seen](const api::ServerEvent& event) {
    seen.push_back(event);
    return seen.size() < 3;
  });
  REQUIRE_MESSAGE(status.ok(), status.error().message);
  REQUIRE(seen.size() == 3);
  CHECK(seen[0].id == "41");
  CHECK(seen[0].event == "operation");
  CHECK(boost::json::parse(seen[0].data).at("id").as_string() == "op-12");
  CHECK(seen[1].event == "vm");
  CHECK(boost::json::parse(seen[1].data).at("vm").as_string() == "train-0");
  CHECK(seen[2].event == "device");

  std::size_t all = 0;
  auto ended = client->read_events("/v1/events", [&all](const api::ServerEvent&) {
    ++all;
    return true;
  });
  CHECK(all == 4);
  REQUIRE_FALSE(ended.ok());  // the stream ended before the callback said so
  CHECK(ended.error().code == ErrorCode::unavailable);
}

TEST_CASE("server-sent event frames: CRLF, multi-line data, comments and a partial tail") {
  std::string buffer = ": hello\r\n\r\nevent: vm\r\ndata: a\r\ndata: b\r\n\r\ndata: plain\n\nid: 7\ndata: par";
  const auto events = api::take_server_events(buffer);
  REQUIRE(events.size() == 2);
  CHECK(events[0].event == "vm");
  CHECK(events[0].data == "a\nb");
  CHECK(events[1].event == "message");
  CHECK(events[1].data == "plain");
  CHECK(buffer == "id: 7\ndata: par");
  buffer += "tial\n\n";
  const auto rest = api::take_server_events(buffer);
  REQUIRE(rest.size() == 1);
  CHECK(rest[0].id == "7");
  CHECK(rest[0].data == "partial");
  CHECK(buffer.empty());
}

TEST_CASE("bad URLs and options are refused before connecting, and so are clear-text tokens off-host") {
  for (const char* url :
       {"unix:relative.sock", "ftp://host:1", "https://", "http://h:99999", "http://h:1/v1", "hostagent.sock"}) {
    CAPTURE(url);
    ClientOptions options;
    options.url = url;
    auto client = ApiClient::make(options);
    REQUIRE_FALSE(client.ok());
    CHECK(client.error().code == ErrorCode::invalid_argument);
    CHECK(client.error().message.find(url) != std::string::npos);
  }
  ClientOptions tls_on_unix;
  tls_on_unix.ca_file = "/etc/ssl/certs/ca-certificates.crt";
  CHECK_FALSE(ApiClient::make(tls_on_unix).ok());

  // Issue 43, defect 17: the token went in clear to any host after a warning; it goes nowhere now.
  ClientOptions remote;
  remote.url = "http://192.0.2.10:8080";
  remote.token = "t";
  const auto refused = ApiClient::make(remote);
  REQUIRE_FALSE(refused.ok());
  CHECK(refused.error().code == ErrorCode::invalid_argument);
  CHECK(refused.error().message.find("the bearer token would go to 192.0.2.10 in clear text") != std::string::npos);
  remote.token.clear();
  CHECK(ApiClient::make(remote).ok());  // no token, nothing to keep

  ClientOptions local = remote;
  local.token = "t";
  for (const char* url : {"http://127.0.0.1:8080", "http://[::1]:8080", "http://localhost:8080"}) {
    local.url = url;
    CHECK(ApiClient::make(local).ok());
  }
}

}  // namespace
}  // namespace hostagent
