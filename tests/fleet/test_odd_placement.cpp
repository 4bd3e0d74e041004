// Issue 43, defect 2: whatever answers at placement.url says 200 with a body Placement never sends.
// Each call of the client is a parse_error naming the request and the member; a pass of the sync is
// a failed pass; the sync's thread goes on with its passes and the host with its creates. Before,
// an unchecked read threw out of the sync thread: std::terminate right after READY, at every start.
#include <doctest/doctest.h>

#include <atomic>
#include <chrono>
#include <thread>

#include "assembly.hpp"
#include "daemon_fixture.hpp"
#include "hostagent/daemon/placement_sync.hpp"
#include "hostagent/fleet/placement_client.hpp"
#include "test_http_server.hpp"
#include "test_support.hpp"

namespace hostagent::fleet {
namespace {

using testing::contains;
using testing::TestReply;
using testing::TestRequest;

struct OddPlacement {
  explicit OddPlacement(std::string body)
      : server(testing::TestServer::tcp([this, body = std::move(body)](const TestRequest&) {
          ++requests;
          return TestReply{200, "application/json", body, {}, {}, false};
        })) {
    fixture.placement.url = server->url();
    fixture.placement.host_name = "odd-host";
    fixture.placement.token_file = fixture.scratch() / "placement-token";
    testing::write_text_file(fixture.placement.token_file, "admin\n");
  }
  std::atomic<int> requests{0};
  std::unique_ptr<testing::TestServer> server;
  testing::DaemonFixture fixture;
};

TEST_CASE("a Placement answering 200 {} to everything: each read is a parse_error naming the request and member") {
  OddPlacement odd("{}");
  auto client = PlacementClient::make({odd.server->url(), "admin", ""});
  REQUIRE(client.ok());
  const auto tree = (*client)->tree("r1");
  REQUIRE_FALSE(tree.ok());
  CHECK(tree.error().code == ErrorCode::parse_error);
  CHECK(tree.error().message ==
        "Placement's answer to /resource_providers?in_tree=r1 is not what Placement 1.39 sends: field "
        "'resource_providers' is missing");
  const auto provider = (*client)->provider("a1");
  REQUIRE_FALSE(provider.ok());
  CHECK(contains(provider.error().message, "/resource_providers/a1"));
  const auto consumer = (*client)->consumer("c1");
  REQUIRE_FALSE(consumer.ok());
  CHECK(contains(consumer.error().message, "field 'allocations' is missing"));
  const auto generation = (*client)->set_traits("a1", 1, {"CUSTOM_X"});
  REQUIRE_FALSE(generation.ok());
  CHECK(contains(generation.error().message, "resource_provider_generation"));
}

TEST_CASE(
    "a Placement answering 200 {} to everything: the sync's passes fail and go on, and so do the host's creates") {
  for (const char* body : {"{}", R"({"resource_providers": [{"uuid": 1}]})", R"({"resource_providers": {}})"}) {
    CAPTURE(body);
    OddPlacement odd(body);
    auto clock = std::make_shared<testing::ManualClock>();
    auto service = testing::started(odd.fixture, nullptr, clock);
    auto client = PlacementClient::make({odd.server->url(), "admin", ""});
    REQUIRE(client.ok());
    daemon::PlacementConverger converger(*service, **client, odd.fixture.placement, clock);
    Result<daemon::SyncReport> report = Error{ErrorCode::internal, ""};
    CHECK_NOTHROW(report = converger.run_once(true));
    CHECK((!report.ok() || !report->problems.empty()));

    auto sync_client = cli::placement_client(odd.fixture.placement);
    REQUIRE_MESSAGE(sync_client.ok(), sync_client.error().message);
    auto sync = daemon::PlacementSync::start(*service, std::move(sync_client).value(), odd.fixture.placement, clock);
    // The first pass runs at once; a failed one is followed by another after 1 s of the sync's
    // clock (its back-off): two of them show the thread survived the first. The first pass is
    // HTTP to the odd server, waited for (bounded: 30 s); the back-off is the clock's, advanced.
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
    while (sync->passes() < 1 && std::chrono::steady_clock::now() < deadline) {
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    REQUIRE(sync->passes() == 1);
    REQUIRE(clock->advance_and_settle(std::chrono::milliseconds(999)));
    CHECK(sync->passes() == 1);  // the back-off is not over
    REQUIRE(clock->advance_and_settle(std::chrono::milliseconds(1)));
    CHECK(sync->passes() == 2);
    auto created = service::create_vm(*service, odd.fixture.request("odd-tenant", testing::kOneGpu));
    CHECK_MESSAGE(created.ok(), created.error().message);
  }
}

}  // namespace
}  // namespace hostagent::fleet
