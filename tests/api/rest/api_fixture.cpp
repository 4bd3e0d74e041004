// Test fixture: the REST API over real sockets on the daemon's service.
#include "api_fixture.hpp"

#include <doctest/doctest.h>

#include <thread>

namespace hostagent::testing {

ApiFixture::ApiFixture(const std::string& simulated_host) : daemon_(simulated_host) {}

ApiFixture::~ApiFixture() {
  stop();
}

void ApiFixture::start(const api::ServerLimits& limits, std::size_t event_queue_frames) {
  auto service = daemon_.start(&hypervisor_);
  REQUIRE_MESSAGE(service.ok(), service.error().message);
  service_ = std::move(service).value();
  api::RestApiOptions options;
  options.template_directories = daemon_.config().template_directories;
  options.event_queue_frames = event_queue_frames;
  serve(*service_, options, limits);
}

void ApiFixture::stop() {
  stop_serving();
  service_.reset();
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
