// Test fixture for the REST API over real sockets on the daemon's own service: a VmService on
// libvirt's test:///default and a simulated host (tests/hostagent/daemon's DaemonFixture), served
// by ApiServer. Used by api_rest_tests and by the OpenAPI conformance suite.
#pragma once

#include <memory>
#include <string>

#include "api_server.hpp"
#include "daemon_fixture.hpp"

namespace hostagent::testing {

class ApiFixture : public ApiServer {
 public:
  explicit ApiFixture(const std::string& simulated_host = "vela2");
  ~ApiFixture();
  ApiFixture(const ApiFixture&) = delete;
  ApiFixture& operator=(const ApiFixture&) = delete;

  // Starts the service, the routes and the server (with these limits); fails the calling test case on
  // an error.
  void start(const api::ServerLimits& limits = {}, std::size_t event_queue_frames = 1024);
  // Stops the server, then the routes, then the service. Idempotent.
  void stop();

  // A create body for NAME from TEMPLATE with the fixture's boot image, plus `extra` JSON members
  // (",\"request_id\":\"r1\"").
  std::string create_body(const std::string& name, const std::string& template_name = "gx3-16x128x1h100",
                          const std::string& extra = "") const;
  // Polls GET /v1/operations/{id} until it has ended (or a minute passes); returns the last answer.
  boost::json::value wait_operation(const std::string& id);

  service::VmService& service() { return *service_; }
  // The hypervisor double the service runs with (valid after start()).
  FaultyHypervisor& hypervisor() { return *hypervisor_; }
  DaemonFixture& daemon() { return daemon_; }

 private:
  DaemonFixture daemon_;
  FaultyHypervisor* hypervisor_ = nullptr;
  std::unique_ptr<service::VmService> service_;
};

}  // namespace hostagent::testing
