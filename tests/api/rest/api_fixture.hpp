// Test fixture for the REST API over real sockets: a VmService on libvirt's test:///default and a
// simulated host (tests/hostagent/daemon's DaemonFixture), RestApi over it, and an HttpServer
// listening on a unix socket in a scratch directory and on 127.0.0.1 (any port) with bearer tokens.
// Used by api_rest_tests and by the OpenAPI conformance suite.
#pragma once

#include <boost/json/value.hpp>
#include <filesystem>
#include <map>
#include <memory>
#include <string>

#include "daemon_fixture.hpp"
#include "hostagent/api/http_server.hpp"
#include "hostagent/api/rest_api.hpp"
#include "http_client.hpp"

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

class ApiFixture {
 public:
  static constexpr const char* kOperatorToken = "operator-token-for-tests";
  static constexpr const char* kReaderToken = "reader-token-for-tests";

  explicit ApiFixture(const std::string& simulated_host = "vela2");
  ~ApiFixture();
  ApiFixture(const ApiFixture&) = delete;
  ApiFixture& operator=(const ApiFixture&) = delete;

  // Starts the service, the routes and the server; fails the calling test case on an error.
  void start();
  // Stops the server, then the routes, then the service. Idempotent.
  void stop();

  // Over the unix socket (an operator) when `token` is empty, else over TCP with
  // "Authorization: Bearer TOKEN". Fails the calling test case when no answer comes.
  ApiResponse request(const std::string& method, const std::string& target, const std::string& body = "",
                      const std::string& content_type = "", const std::string& token = "");
  // Over TCP with exactly these extra headers (none: unauthenticated).
  ApiResponse tcp_request(const ClientRequest& request);
  // Over the unix socket with exactly this request (extra headers, odd methods).
  ApiResponse unix_request(const ClientRequest& request);

  // A create body for NAME from TEMPLATE with the fixture's boot image, plus `extra` JSON members
  // (",\"request_id\":\"r1\"").
  std::string create_body(const std::string& name, const std::string& template_name = "gx3-16x128x1h100",
                          const std::string& extra = "") const;
  // Polls GET /v1/operations/{id} until it has ended (or a minute passes); returns the last answer.
  boost::json::value wait_operation(const std::string& id);

  daemon::VmService& service() { return *service_; }
  // The hypervisor double the service runs with (valid after start()).
  FaultyHypervisor& hypervisor() { return *hypervisor_; }
  DaemonFixture& daemon() { return daemon_; }
  const std::filesystem::path& socket_path() const { return socket_path_; }
  uint16_t tcp_port() const { return tcp_port_; }
  const std::filesystem::path& audit_log() const { return audit_log_; }
  const std::filesystem::path& scratch() const { return scratch_.path(); }

 private:
  ApiResponse send(const ClientEndpoint& endpoint, const ClientRequest& request);

  DaemonFixture daemon_;
  TempDir scratch_;  // short path: the socket's must fit sun_path
  std::filesystem::path socket_path_;
  std::filesystem::path audit_log_;
  uint16_t tcp_port_ = 0;
  FaultyHypervisor* hypervisor_ = nullptr;
  std::unique_ptr<daemon::VmService> service_;
  std::unique_ptr<api::RestApi> api_;
  std::unique_ptr<api::HttpServer> server_;
};

}  // namespace hostagent::testing
