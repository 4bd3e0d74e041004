// A create's request id keeps its meaning across deletes and restarts: a replay is answered with the
// create it named (made, failed, or made and gone since), never run again; a create a crash cut
// short is settled by what exists; after the window the id is free. Each replay is checked to have
// made nothing: no new operation, no new domain in libvirt.
#include <doctest/doctest.h>

#include <fstream>

#include "daemon_fixture.hpp"

namespace hostagent::testing {
namespace {

service::CreateVmRequest with_id(const DaemonFixture& fixture, const std::string& name, const std::string& id) {
  auto request = fixture.request(name, kOneGpu);
  request.request_id = id;
  return request;
}

std::filesystem::path requests_dir(const DaemonFixture& fixture) {
  return fixture.config().state_directory / "requests";
}

// A record as a daemon that died at `outcome` left it.
void leave_record(const DaemonFixture& fixture, const std::string& operation, const std::string& vm,
                  const std::string& outcome) {
  std::filesystem::create_directories(requests_dir(fixture));
  const bool ended = outcome != "pending";
  std::ofstream(requests_dir(fixture) / (operation + ".json"))
      << R"({"operation":")" << operation << R"(","request_id":"id-)" << vm << R"(","vm":")" << vm
      << R"(","template":")" << kOneGpu << R"(","submitted_at":"2026-12-01T10:00:00Z","outcome":")" << outcome
      << R"(","ended_at":")" << (ended ? "2026-12-01T10:01:00Z" : "")
      << R"(","error_code":"","error":"","gone_at":""})";
}

TEST_CASE("after a restart, a replay is answered with the create it named: the same operation, no second VM") {
  DaemonFixture fixture;
  auto service = started(fixture);
  const auto request = with_id(fixture, "rid-restart", "rid-1");
  auto first = service->begin_create(request);
  REQUIRE_MESSAGE(first.ok(), first.error().message);
  REQUIRE(wait_for(*service, first->id).state == "succeeded");

  service.reset();
  service = started(fixture);
  const auto replay = service->begin_create(request);
  REQUIRE_MESSAGE(replay.ok(), replay.error().message);
  CHECK(replay->id == first->id);
  CHECK(replay->state == "succeeded");
  CHECK(replay->vm == "rid-restart");
  // Nothing was queued: the one operation listed is the create, kept across the restart.
  REQUIRE(service->operations().size() == 1);
  CHECK(service->operations().front().id == first->id);
  CHECK(test_driver_domains("rid-restart").size() == 1);
  // The restarted daemon still answers for the create's operation id.
  const auto polled = service->operation(first->id);
  REQUIRE_MESSAGE(polled.ok(), polled.error().message);
  CHECK(polled->state == "succeeded");
  auto other = request;
  other.name = "rid-restart-2";
  const auto refused = service->begin_create(other);
  REQUIRE_FALSE(refused.ok());
  CHECK(refused.error().code == ErrorCode::conflict);
  CHECK(refused.error().message.starts_with("request_id: "));
  REQUIRE(delete_vm(*service, "rid-restart").ok());
}

// Issue 43, defect 12: a replay matched on name and template alone, so the same request id with
// another uuid, image, keys or MACs was answered with the old operation as if it had asked for it.
TEST_CASE("a replay must ask for the whole create again: any field that differs is a conflict naming it") {
  DaemonFixture fixture;
  auto service = started(fixture);
  auto request = with_id(fixture, "rid-whole", "rid-whole-1");
  request.uuid = "0b6f3f0e-8a0c-4d4e-9d55-6f1f3f2e1a01";
  request.ssh_authorized_keys = {"ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIFakeKey tenant@a"};
  auto first = service->begin_create(request);
  REQUIRE_MESSAGE(first.ok(), first.error().message);
  REQUIRE(wait_for(*service, first->id).state == "succeeded");

  std::vector<std::pair<std::string, service::CreateVmRequest>> others;
  auto uuid = request;
  uuid.uuid = "0b6f3f0e-8a0c-4d4e-9d55-6f1f3f2e1a02";
  others.emplace_back("uuid", uuid);
  auto keys = request;
  keys.ssh_authorized_keys = {"ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIOther tenant@b"};
  others.emplace_back("ssh_authorized_keys", keys);
  auto macs = request;
  macs.macs = {MacAddress::parse("52:54:00:00:00:99", "macs[0]").value()};
  others.emplace_back("macs", macs);
  auto image = request;
  image.boot_image = request.boot_image + ".other";
  write_text_file(image.boot_image, "another image");
  others.emplace_back("boot_image", image);
  for (int run = 0; run < 2; ++run) {
    for (const auto& each : others) {
      const std::string& field = each.first;  // not a structured binding: CAPTURE's lambda takes it
      const auto& other = each.second;
      CAPTURE(field);
      CAPTURE(run);
      const auto replay = service->begin_create(other);
      REQUIRE_FALSE(replay.ok());
      CHECK(replay.error().code == ErrorCode::conflict);
      CHECK_MESSAGE(
          replay.error().message == "request_id: \"rid-whole-1\" was used to create VM rid-whole from template " +
                                        std::string(kOneGpu) + " with another " + field +
                                        "; a different create needs a new request id",
          replay.error().message);
    }
    // The same request again, field for field: the same operation, nothing run.
    const auto same = service->begin_create(request);
    REQUIRE_MESSAGE(same.ok(), same.error().message);
    CHECK(same->id == first->id);
    service.reset();
    service = started(fixture);  // the fingerprints are on disk: a restart compares the same
  }
  REQUIRE(delete_vm(*service, "rid-whole").ok());
}

TEST_CASE(
    "after a delete, a replay is a conflict saying the VM is gone and how, and creates nothing, across a restart too") {
  DaemonFixture fixture;
  auto service = started(fixture);
  const auto request = with_id(fixture, "rid-deleted", "rid-2");
  REQUIRE(create_vm(*service, request).ok());
  auto removal = service->begin_delete("rid-deleted");
  REQUIRE(removal.ok());
  REQUIRE(wait_for(*service, removal->id).state == "succeeded");

  for (int run = 0; run < 2; ++run) {
    CAPTURE(run);
    const auto operations_before = service->operations().size();
    const auto replay = service->begin_create(request);
    REQUIRE_FALSE(replay.ok());
    CHECK(replay.error().code == ErrorCode::conflict);
    CHECK(replay.error().message.starts_with("request_id: "));
    CHECK(replay.error().message.find("is gone") != std::string::npos);
    CHECK(replay.error().message.find("deleted by operation " + removal->id) != std::string::npos);
    CHECK(service->operations().size() == operations_before);
    CHECK(test_driver_domains("rid-deleted").empty());
    service.reset();
    service = started(fixture);
  }
  // The name itself is free: a new request id makes a new VM.
  REQUIRE(create_vm(*service, with_id(fixture, "rid-deleted", "rid-2b")).ok());
  REQUIRE(delete_vm(*service, "rid-deleted").ok());
}

TEST_CASE("a failed create's replay reports that failure, before and after a restart, and runs nothing") {
  DaemonFixture fixture;
  auto service = started(fixture);
  const auto request = with_id(fixture, "rid-failed", "rid-3");
  fixture.devices()->fail_prepare = true;
  auto first = service->begin_create(request);
  REQUIRE(first.ok());
  const auto ended = wait_for(*service, first->id);
  REQUIRE(ended.state == "failed");
  REQUIRE(ended.error.has_value());
  fixture.devices()->fail_prepare = false;  // a replay that ran again would succeed now

  for (int run = 0; run < 2; ++run) {
    CAPTURE(run);
    const auto replay = service->begin_create(request);
    REQUIRE_MESSAGE(replay.ok(), replay.error().message);
    CHECK(replay->id == first->id);
    CHECK(replay->state == "failed");
    REQUIRE(replay->error.has_value());
    CHECK(replay->error->code == ended.error->code);
    CHECK(replay->error->message == ended.error->message);
    CHECK(test_driver_domains("rid-failed").empty());
    service.reset();
    service = started(fixture);
    // Nothing ran: the one operation listed is the first create, kept across the restart.
    REQUIRE(service->operations().size() == 1);
    CHECK(service->operations().front().id == first->id);
  }
}

TEST_CASE("records a crash left are settled by what exists: pending without a VM failed, made but absent gone") {
  DaemonFixture fixture;
  leave_record(fixture, "op-crashed-1", "rid-never-made", "pending");
  leave_record(fixture, "op-crashed-2", "rid-vanished", "created");
  auto service = started(fixture);

  const auto interrupted = service->begin_create(with_id(fixture, "rid-never-made", "id-rid-never-made"));
  REQUIRE_MESSAGE(interrupted.ok(), interrupted.error().message);
  CHECK(interrupted->id == "op-crashed-1");
  CHECK(interrupted->state == "failed");
  REQUIRE(interrupted->error.has_value());
  CHECK(interrupted->error->message.find("rolled it back") != std::string::npos);

  const auto vanished = service->begin_create(with_id(fixture, "rid-vanished", "id-rid-vanished"));
  REQUIRE_FALSE(vanished.ok());
  CHECK(vanished.error().message.find("is gone") != std::string::npos);
  CHECK(vanished.error().message.find("op-crashed-2") != std::string::npos);
  CHECK(service->operations().empty());
  CHECK(test_driver_domains("rid-never-made").empty());
  CHECK(test_driver_domains("rid-vanished").empty());
}

TEST_CASE("an unreadable record stops the service, naming the file") {
  DaemonFixture fixture;
  std::filesystem::create_directories(requests_dir(fixture));
  std::ofstream(requests_dir(fixture) / "op-x-1.json") << "{\"operation\": \"op-x-1\"";
  const auto refused = fixture.start();
  REQUIRE_FALSE(refused.ok());
  CHECK(refused.error().message.find("op-x-1.json") != std::string::npos);
}

TEST_CASE("the window: a gone VM's request id is free 7 days on, and its record removed") {
  DaemonFixture fixture;
  auto clock = std::make_shared<ManualClock>();
  auto service = started(fixture, nullptr, clock);
  const auto request = with_id(fixture, "rid-window", "rid-4");
  auto first = service->begin_create(request);
  REQUIRE(first.ok());
  REQUIRE(wait_for(*service, first->id).state == "succeeded");
  REQUIRE(delete_vm(*service, "rid-window").ok());
  REQUIRE_FALSE(service->begin_create(request).ok());

  clock->advance_wall(std::chrono::hours(24 * 7 - 1));
  service.reset();
  service = started(fixture, nullptr, clock);
  CHECK_FALSE(service->begin_create(request).ok());  // still inside the window
  clock->advance_wall(std::chrono::hours(2));
  service.reset();
  service = started(fixture, nullptr, clock);
  CHECK_FALSE(std::filesystem::exists(requests_dir(fixture) / (first->id + ".json")));
  auto again = service->begin_create(request);
  REQUIRE_MESSAGE(again.ok(), again.error().message);
  CHECK(again->id != first->id);
  CHECK(wait_for(*service, again->id).state == "succeeded");
  REQUIRE(delete_vm(*service, "rid-window").ok());
}

}  // namespace
}  // namespace hostagent::testing
