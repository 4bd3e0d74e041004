// Test fixture: the REST API over real sockets.
#include "api_fixture.hpp"

#include <doctest/doctest.h>

#include <boost/json/parse.hpp>
#include <thread>

namespace hostagent::testing {

namespace fs = std::filesystem;

boost::json::value ApiResponse::json() const {
  boost::system::error_code ec;
  auto value = boost::json::parse(body, ec);
  REQUIRE_MESSAGE(!ec, ("not JSON (" + ec.message() + "): " + body));
  return value;
}

ApiFixture::ApiFixture(const std::string& simulated_host)
    : daemon_(simulated_host), socket_path_(scratch_.path() / "api.sock"), audit_log_(scratch_.path() / "audit.log") {}

ApiFixture::~ApiFixture() {
  stop();
}

void ApiFixture::start() {
  auto service = daemon_.start(&hypervisor_);
  REQUIRE_MESSAGE(service.ok(), service.error().message);
  service_ = std::move(service).value();

  api::RestApiOptions options;
  options.audit_log = audit_log_;
  options.template_directories = daemon_.config().template_directories;
  options.housekeeping_cpus = daemon_.config().housekeeping_cpus;
  auto api = api::RestApi::make(*service_, options);
  REQUIRE_MESSAGE(api.ok(), api.error().message);
  api_ = std::move(api).value();

  api::ServerOptions server;
  ListenAddress unix_socket;
  unix_socket.socket_path = socket_path_;
  ListenAddress tcp;
  tcp.kind = ListenAddress::Kind::tcp;
  tcp.host = "127.0.0.1";
  server.listen = {unix_socket, tcp};
  server.operator_token = kOperatorToken;
  server.reader_token = kReaderToken;
  api::RestApi* routes = api_.get();
  auto started = api::HttpServer::start(
      server, [routes](const api::HttpRequest& request) { return routes->handle(request); },
      [routes](const api::RequestRecord& record) { routes->observe(record); });
  REQUIRE_MESSAGE(started.ok(), started.error().message);
  server_ = std::move(started).value();
  for (const auto& endpoint : server_->endpoints()) {
    if (endpoint.kind == ListenAddress::Kind::tcp) tcp_port_ = endpoint.port;
  }
  REQUIRE(tcp_port_ != 0);
}

void ApiFixture::stop() {
  if (server_) server_->stop();
  server_.reset();
  api_.reset();
  service_.reset();
}

ApiResponse ApiFixture::send(const ClientEndpoint& endpoint, const ClientRequest& request) {
  auto response = send_request(endpoint, request);
  REQUIRE_MESSAGE(response.ok(), (request.method + " " + request.target + ": " + response.error().message));
  // RFC 9110 5.3: a field a server repeats must be a list; none of this API's are.
  CHECK_MESSAGE(response->repeated_headers.empty(), (request.method + " " + request.target + " repeats a header"));
  return ApiResponse{response->status, response->content_type, response->headers, response->body};
}

ApiResponse ApiFixture::request(const std::string& method, const std::string& target, const std::string& body,
                                const std::string& content_type, const std::string& token) {
  ClientRequest request{method, target, body, content_type, {}};
  if (token.empty()) return unix_request(request);
  request.headers.emplace_back("Authorization", "Bearer " + token);
  return tcp_request(request);
}

ApiResponse ApiFixture::tcp_request(const ClientRequest& request) {
  ClientEndpoint endpoint;
  endpoint.host = "127.0.0.1";
  endpoint.port = tcp_port_;
  return send(endpoint, request);
}

ApiResponse ApiFixture::unix_request(const ClientRequest& request) {
  ClientEndpoint endpoint;
  endpoint.socket_path = socket_path_;
  return send(endpoint, request);
}

std::string ApiFixture::create_body(const std::string& name, const std::string& template_name,
                                    const std::string& extra) const {
  const auto image = daemon_.request(name, template_name).boot_image;
  return R"({"name":")" + name + R"(","template":")" + template_name + R"(","boot_image":")" + image + "\"" + extra +
         "}";
}

boost::json::value ApiFixture::wait_operation(const std::string& id) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::minutes(1);
  while (true) {
    const auto response = request("GET", "/v1/operations/" + id);
    REQUIRE_MESSAGE(response.status == 200, response.body);
    auto json = response.json();
    const auto state = std::string(json.at("state").as_string());
    if (state == "succeeded" || state == "failed") return json;
    REQUIRE_MESSAGE(std::chrono::steady_clock::now() < deadline, ("operation " + id + " still " + state));
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}

}  // namespace hostagent::testing
