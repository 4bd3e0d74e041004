// Test helper: the REST API over real sockets, on the test's service.
#include "api_server.hpp"

#include <doctest/doctest.h>

#include <poll.h>
#include <unistd.h>

#include <array>
#include <boost/json/parse.hpp>

namespace hostagent::testing {

boost::json::value ApiResponse::json() const {
  boost::system::error_code ec;
  auto value = boost::json::parse(body, ec);
  REQUIRE_MESSAGE(!ec, ("not JSON (" + ec.message() + "): " + body));
  return value;
}

boost::json::object check_problem(const ApiResponse& response, unsigned status, const std::string& code) {
  CHECK_MESSAGE(response.status == status, response.body);
  CHECK(response.content_type == "application/problem+json");
  auto json = response.json().as_object();
  CHECK(json.at("status").as_int64() == status);
  CHECK(text(json.at("code")) == code);
  CHECK(!text(json.at("detail")).empty());
  CHECK(text(json.at("type")).find("https://hostagent.dev/problems/") == 0);
  return json;
}

std::string field_of(const boost::json::object& problem) {
  const auto* field = problem.if_contains("field");
  return field == nullptr || !field->is_string() ? "" : text(*field);
}

ApiServer::ApiServer() : socket_path_(scratch_.path() / "api.sock"), audit_log_(scratch_.path() / "audit.log") {}

ApiServer::~ApiServer() {
  stop_serving();
}

void ApiServer::serve(service::VmService& service, api::RestApiOptions options, api::ServerLimits limits) {
  options.audit_log = audit_log_;
  auto api = api::RestApi::make(service, std::move(options));
  REQUIRE_MESSAGE(api.ok(), api.error().message);
  api_ = std::move(api).value();

  api::ServerOptions server;
  server.limits = limits;
  ListenAddress unix_socket;
  unix_socket.socket_path = socket_path_;
  ListenAddress tcp;
  tcp.kind = ListenAddress::Kind::tcp;
  tcp.host = "127.0.0.1";
  server.listen = {unix_socket, tcp};
  server.operator_token = kOperatorToken;
  server.reader_token = kReaderToken;
  server.probe_paths = api::RestApi::probe_paths();
  api::RestApi* routes = api_.get();
  auto started = api::HttpServer::start(
      server, [routes](const api::HttpRequest& request) { return routes->handle(request); },
      [routes](const api::RequestRecord& record) { routes->observe(record); });
  REQUIRE_MESSAGE(started.ok(), started.error().message);
  server_ = std::move(started).value();
  api_->watch_server(*server_);
  for (const auto& endpoint : server_->endpoints()) {
    if (endpoint.kind == ListenAddress::Kind::tcp) tcp_port_ = endpoint.port;
  }
  REQUIRE(tcp_port_ != 0);
}

void ApiServer::stop_serving() {
  if (server_) server_->stop();
  server_.reset();
  api_.reset();
}

ApiResponse ApiServer::send(const ClientEndpoint& endpoint, const ClientRequest& request) {
  auto response = send_request(endpoint, request);
  REQUIRE_MESSAGE(response.ok(), (request.method + " " + request.target + ": " + response.error().message));
  // RFC 9110 5.3: a field a server repeats must be a list; none of this API's are.
  CHECK_MESSAGE(response->repeated_headers.empty(), (request.method + " " + request.target + " repeats a header"));
  return ApiResponse{response->status, response->content_type, response->headers, response->body};
}

ApiResponse ApiServer::request(const std::string& method, const std::string& target, const std::string& body,
                               const std::string& content_type, const std::string& token) {
  ClientRequest request{method, target, body, content_type, {}};
  if (token.empty()) return unix_request(request);
  request.headers.emplace_back("Authorization", "Bearer " + token);
  return tcp_request(request);
}

ApiResponse ApiServer::tcp_request(const ClientRequest& request) {
  ClientEndpoint endpoint;
  endpoint.host = "127.0.0.1";
  endpoint.port = tcp_port_;
  return send(endpoint, request);
}

ApiResponse ApiServer::unix_request(const ClientRequest& request) {
  ClientEndpoint endpoint;
  endpoint.socket_path = socket_path_;
  return send(endpoint, request);
}

PipedConsole::PipedConsole(const ApiServer& server, const std::string& target) {
  REQUIRE(::pipe(input_) == 0);
  REQUIRE(::pipe(output_) == 0);
  api::ClientOptions options;
  options.url = "unix:" + server.socket_path().string();
  auto client = api::ApiClient::make(options);
  REQUIRE_MESSAGE(client.ok(), client.error().message);
  client_ = std::move(client).value();
  thread_ = std::thread([this, target] {
    auto result = client_->attach(target, api::ConsoleIo{input_[0], output_[1], 0x1d});
    ::close(output_[1]);  // the reader sees the end
    result_.set_value(std::move(result));
  });
}

PipedConsole::~PipedConsole() {
  if (input_[1] >= 0) ::close(input_[1]);
  if (thread_.joinable()) thread_.join();
  for (const int fd : {input_[0], output_[0]}) ::close(fd);
}

void PipedConsole::type(const std::string& bytes) {
  REQUIRE(::write(input_[1], bytes.data(), bytes.size()) == static_cast<ssize_t>(bytes.size()));
}

std::string PipedConsole::read_until(const std::string& expected) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  std::array<char, 4096> chunk{};
  while (seen_.find(expected) == std::string::npos) {
    const auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    pollfd ready{output_[0], POLLIN, 0};
    if (left.count() <= 0 || ::poll(&ready, 1, static_cast<int>(left.count())) != 1) break;
    const ssize_t got = ::read(output_[0], chunk.data(), chunk.size());
    if (got <= 0) break;
    seen_.append(chunk.data(), static_cast<std::size_t>(got));
  }
  return seen_;
}

Result<std::string> PipedConsole::result() {
  auto future = result_.get_future();
  REQUIRE(future.wait_for(std::chrono::seconds(30)) == std::future_status::ready);
  return future.get();
}

}  // namespace hostagent::testing
