// ApiClient against the API's own server (api/http's HttpServer): the bearer token and the role it
// gives, the server's own problems (401, 403) and a handler's, and a real event stream.
#include <doctest/doctest.h>

#include <boost/json.hpp>

#include "hostagent/api/api_client.hpp"
#include "hostagent/api/http_server.hpp"
#include "hostagent/api/problem.hpp"
#include "test_support.hpp"

namespace hostagent {
namespace {

// Frames handed over once; the stream then stays open (the server sends its heartbeats).
class FixedEvents final : public api::EventStream {
 public:
  explicit FixedEvents(std::vector<std::string> frames) : frames_(std::move(frames)) {}
  std::vector<std::string> take() override { return std::exchange(frames_, {}); }
  void wait(std::function<void()> /*wake*/) override {}

 private:
  std::vector<std::string> frames_;
};

api::HttpResponse handle(const api::HttpRequest& request) {
  if (request.path == "/v1/events") {
    api::HttpResponse response;
    response.content_type = "text/event-stream";
    response.events = std::make_shared<FixedEvents>(std::vector<std::string>{
        "id: 1\nevent: vm\ndata: {\"vm\":\"a\"}\n\n", "id: 2\nevent: vm\ndata: {\"vm\":\"b\"}\n\n"});
    return response;
  }
  if (request.path == "/v1/vms/ghost") {
    return api::problem(404, "not_found", "VM 'ghost' does not exist", request.target);
  }
  api::HttpResponse response;
  response.body = boost::json::serialize(boost::json::object{
      {"principal", request.identity.principal}, {"method", request.method}, {"body", request.body}});
  return response;
}

std::unique_ptr<api::ApiClient> client_with_token(const std::string& url, const std::string& token) {
  api::ClientOptions options;
  options.url = url;
  options.token = token;
  auto client = api::ApiClient::make(options);
  REQUIRE_MESSAGE(client.ok(), client.error().message);
  return std::move(client).value();
}

TEST_CASE("against HttpServer: tokens and roles over TCP, problems, events, and the unix socket") {
  testing::TempDir dir;
  api::ServerOptions options;
  ListenAddress tcp;
  tcp.kind = ListenAddress::Kind::tcp;
  tcp.host = "127.0.0.1";
  ListenAddress unix_socket;
  unix_socket.socket_path = dir.path() / "api.sock";
  options.listen = {tcp, unix_socket};
  options.operator_token = "operator-token";
  options.reader_token = "reader-token";
  auto server = api::HttpServer::start(options, handle);
  REQUIRE_MESSAGE(server.ok(), server.error().message);
  std::string url;
  for (const auto& endpoint : (*server)->endpoints()) {
    if (endpoint.kind == ListenAddress::Kind::tcp) url = "http://127.0.0.1:" + std::to_string(endpoint.port);
  }
  REQUIRE_FALSE(url.empty());

  auto operator_client = client_with_token(url, "operator-token");
  auto created = operator_client->send_json("POST", "/v1/vms", boost::json::object{{"name", "a"}});
  REQUIRE_MESSAGE(created.ok(), created.error().message);
  CHECK(created->at("principal").as_string() == "token:operator");
  CHECK(created->at("body").as_string() == R"({"name":"a"})");

  auto reader = client_with_token(url, "reader-token");
  CHECK(reader->get_json("/v1/vms").ok());
  auto refused = reader->call("POST", "/v1/vms", "{}");
  REQUIRE_FALSE(refused.ok());
  CHECK(refused.error().code == ErrorCode::invalid_argument);
  CHECK_FALSE(refused.error().message.empty());
  auto raw = reader->request("POST", "/v1/vms", "{}");
  REQUIRE(raw.ok());
  CHECK(raw->status == 403);

  auto anonymous = client_with_token(url, "");
  auto unauthenticated = anonymous->request("GET", "/v1/vms");
  REQUIRE(unauthenticated.ok());
  CHECK(unauthenticated->status == 401);
  CHECK(unauthenticated->content_type == "application/problem+json");
  REQUIRE(api::parse_problem(unauthenticated->body).has_value());

  auto missing = operator_client->get_json("/v1/vms/ghost");
  REQUIRE_FALSE(missing.ok());
  CHECK(missing.error().code == ErrorCode::not_found);
  CHECK(missing.error().message == "VM 'ghost' does not exist");

  std::vector<std::string> vms;
  auto status = operator_client->read_events("/v1/events", [&vms](const api::ServerEvent& event) {
    vms.push_back(std::string(boost::json::parse(event.data).at("vm").as_string()));
    return vms.size() < 2;
  });
  REQUIRE_MESSAGE(status.ok(), status.error().message);
  CHECK(vms == std::vector<std::string>{"a", "b"});

  auto local = client_with_token("unix:" + unix_socket.socket_path.string(), "");
  auto over_socket = local->get_json("/v1/host");
  REQUIRE_MESSAGE(over_socket.ok(), over_socket.error().message);
  CHECK(over_socket->at("principal").as_string().rfind("uid:", 0) == 0);
}

}  // namespace
}  // namespace hostagent
