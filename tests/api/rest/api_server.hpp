// Test helper: the REST API over real sockets, on whatever VmService the test gives it: RestApi
// over the service and an HttpServer listening on a unix socket in a scratch directory and on
// 127.0.0.1 (any port) with bearer tokens. ApiFixture gives it the daemon's service on
// test:///default; the API's own tests give it FakeVmService, and run without libvirt.
#pragma once

#include <boost/json/value.hpp>
#include <filesystem>
#include <future>
#include <map>
#include <memory>
#include <string>
#include <thread>

#include "hostagent/api/api_client.hpp"
#include "hostagent/api/http_server.hpp"
#include "hostagent/api/rest_api.hpp"
#include "http_client.hpp"
#include "test_support.hpp"

namespace hostagent::testing {

// A JSON string's text; any other value throws (boost::json's as_string), failing the test case.
inline std::string text(const boost::json::value& value) {
  return std::string(value.as_string());
}

struct ApiResponse {
  unsigned status = 0;
  std::string content_type;                    // as sent, parameters included
  std::map<std::string, std::string> headers;  // lower-case names
  std::string body;
  // The body parsed as JSON; fails the calling test case when it is not JSON.
  boost::json::value json() const;
};

// A problem+json answer with this status and code, a detail and hostagent's type; returns its body.
boost::json::object check_problem(const ApiResponse& response, unsigned status, const std::string& code);
// The problem's field; "" when it names none.
std::string field_of(const boost::json::object& problem);

class ApiServer {
 public:
  static constexpr const char* kOperatorToken = "operator-token-for-tests";
  static constexpr const char* kReaderToken = "reader-token-for-tests";

  ApiServer();
  ~ApiServer();
  ApiServer(const ApiServer&) = delete;
  ApiServer& operator=(const ApiServer&) = delete;

  // Starts the routes over `service` (which outlives the server) and the server; fails the calling
  // test case on an error. The audit log is the server's own.
  void serve(service::VmService& service, api::RestApiOptions options, api::ServerLimits limits = {});
  // Stops the server, then the routes. Idempotent.
  void stop_serving();

  // Over the unix socket (an operator) when `token` is empty, else over TCP with
  // "Authorization: Bearer TOKEN". Fails the calling test case when no answer comes.
  ApiResponse request(const std::string& method, const std::string& target, const std::string& body = "",
                      const std::string& content_type = "", const std::string& token = "");
  // Over TCP with exactly these extra headers (none: unauthenticated).
  ApiResponse tcp_request(const ClientRequest& request);
  // Over the unix socket with exactly this request (extra headers, odd methods).
  ApiResponse unix_request(const ClientRequest& request);

  const std::filesystem::path& socket_path() const { return socket_path_; }
  uint16_t tcp_port() const { return tcp_port_; }
  const std::filesystem::path& audit_log() const { return audit_log_; }
  const std::filesystem::path& scratch() const { return scratch_.path(); }
  // The server, for its connection budget (valid while serving).
  const api::HttpServer& http_server() const { return *server_; }

 private:
  ApiResponse send(const ClientEndpoint& endpoint, const ClientRequest& request);

  TempDir scratch_;  // short path: the socket's must fit sun_path
  std::filesystem::path socket_path_;
  std::filesystem::path audit_log_;
  uint16_t tcp_port_ = 0;
  std::unique_ptr<api::RestApi> api_;
  std::unique_ptr<api::HttpServer> server_;
};

// hostagentctl's client (ApiClient::attach) joined to two pipes on a thread of its own: the test
// types into one and reads the console from the other.
class PipedConsole {
 public:
  PipedConsole(const ApiServer& server, const std::string& target);
  ~PipedConsole();  // closes the input (the client leaves) and joins
  PipedConsole(const PipedConsole&) = delete;
  PipedConsole& operator=(const PipedConsole&) = delete;

  void type(const std::string& bytes);
  // What the console printed so far, read until it holds `expected` or ends (at most 30 s).
  std::string read_until(const std::string& expected);
  // How attach() ended (waits at most 30 s).
  Result<std::string> result();

 private:
  int input_[2] = {-1, -1};
  int output_[2] = {-1, -1};
  std::unique_ptr<api::ApiClient> client_;
  std::string seen_;
  std::promise<Result<std::string>> result_;
  std::thread thread_;
};

}  // namespace hostagent::testing
