// Maintenance on test:///: a cordon keeps creates out and VMs running, a drain stops every VM
// (gracefully, or powered off at its deadline), the mode outlives restarts and reboots, and an
// uncordon takes VMs again. The record on disk is the one the daemon reads at start.
#include <doctest/doctest.h>

#include <algorithm>
#include <map>

#include "daemon_fixture.hpp"
#include "hostagent/common/durable_file.hpp"
#include "hostagent/state/maintenance_record.hpp"

namespace hostagent::testing {
namespace {

using service::MaintenanceMode;

std::filesystem::path record_file(const DaemonFixture& fixture) {
  return fixture.config().state_directory / "maintenance.json";
}

std::map<std::string, std::string> drain_states(const service::MaintenanceView& view) {
  std::map<std::string, std::string> out;
  for (const auto& vm : view.vms) out[vm.vm] = vm.state;
  return out;
}

std::vector<MaintenanceMode> modes(const std::vector<service::ServiceEvent>& events) {
  std::vector<MaintenanceMode> out;
  for (const auto& event : events) {
    REQUIRE(event.maintenance);
    if (out.empty() || out.back() != event.maintenance->mode) out.push_back(event.maintenance->mode);
  }
  return out;
}

TEST_CASE(
    "a cordoned host refuses creates with its reason, keeps its VMs running, and after the uncordon creates again") {
  DaemonFixture fixture;
  {
    auto service = started(fixture);
    REQUIRE(create_vm(*service, fixture.request("before", kOneGpu)).ok());
    const auto cordoned = service->cordon("PSU swap, INC-4411", "uid:0");
    REQUIRE_MESSAGE(cordoned.ok(), cordoned.error().message);
    CHECK(cordoned->mode == MaintenanceMode::cordoned);
    CHECK(cordoned->principal == "uid:0");
    const auto refused = service->begin_create(fixture.request("after", kOneGpu));
    REQUIRE_FALSE(refused.ok());
    CHECK(refused.error().code == ErrorCode::conflict);
    CHECK(refused.error().message.find("cordoned") != std::string::npos);
    CHECK(refused.error().message.find("PSU swap, INC-4411") != std::string::npos);
    CHECK(refused.error().message.find("uncordon") != std::string::npos);
    // The VMs it has are untouched, and may be stopped and started again.
    REQUIRE(stop_vm(*service, vm_name("before"), true).ok());
    REQUIRE(start_vm(*service, vm_name("before")).ok());
    CHECK(settled(*service) == std::map<std::string, std::string>{{"before", "running"}});
  }
  // A restart keeps it: the record is read at start.
  auto record = state::read_maintenance_record(record_file(fixture));
  REQUIRE(record.ok());
  REQUIRE(record->has_value());
  CHECK((*record)->mode == MaintenanceMode::cordoned);
  auto service = started(fixture);
  CHECK(service->maintenance().mode == MaintenanceMode::cordoned);
  CHECK(service->maintenance().reason == "PSU swap, INC-4411");
  CHECK_FALSE(service->begin_create(fixture.request("after", kOneGpu)).ok());
  // A cordon again changes the reason; the uncordon takes VMs again.
  REQUIRE(service->cordon("PSU swap, INC-4412", "uid:0").ok());
  CHECK(service->maintenance().reason == "PSU swap, INC-4412");
  const auto back = service->uncordon("uid:1000");
  REQUIRE(back.ok());
  CHECK(back->mode == MaintenanceMode::in_service);
  CHECK(back->principal == "uid:1000");
  const auto created = create_vm(*service, fixture.request("after", kOneGpu));
  CHECK_MESSAGE(created.ok(), created.error().message);
}

TEST_CASE("a create accepted before the cordon is answered when replayed with its request id") {
  DaemonFixture fixture;
  auto service = started(fixture);
  auto request = fixture.request("replayed", kOneGpu);
  request.request_id = "req-maintenance-1";
  const auto first = service->begin_create(request);
  REQUIRE(first.ok());
  REQUIRE(service->cordon("rack move", "uid:0").ok());
  const auto replay = service->begin_create(request);
  REQUIRE_MESSAGE(replay.ok(), replay.error().message);
  CHECK(replay->id == first->id);
  CHECK_FALSE(wait_for(*service, first->id).error);
}

TEST_CASE("a drain stops every VM: shut down where the guest obeys, powered off at the deadline where it does not") {
  for (const bool obeys : {true, false}) {
    CAPTURE(obeys);
    DaemonFixture fixture;
    FaultyHypervisor* faulty = nullptr;
    auto clock = std::make_shared<ManualClock>();
    auto service = started(fixture, &faulty, clock);
    REQUIRE(create_vm(*service, fixture.request("a", kOneGpu)).ok());
    REQUIRE(create_vm(*service, fixture.request("b", kOneGpu)).ok());
    REQUIRE(create_vm(*service, fixture.request("off", kOneGpu)).ok());
    REQUIRE(stop_vm(*service, vm_name("off"), true).ok());
    if (!obeys) faulty->ignore_shutdown();
    EventsOfKind events(*service, service::ServiceEvent::Kind::maintenance);
    const auto slept_before = clock->slept();

    const auto begun = service->drain("firmware upgrade", std::chrono::seconds(120), "uid:0");
    REQUIRE_MESSAGE(begun.ok(), begun.error().message);
    CHECK(begun->deadline == rfc3339(clock->now() + std::chrono::seconds(120)));
    CHECK(settled(*service) ==
          std::map<std::string, std::string>{{"a", "shut_off"}, {"b", "shut_off"}, {"off", "shut_off"}});
    REQUIRE(events.wait_for(
        [](const auto& seen) { return !seen.empty() && seen.back().maintenance->mode == MaintenanceMode::drained; }));
    const auto drained = service->maintenance();
    CHECK(drained.mode == MaintenanceMode::drained);
    CHECK(drained.reason == "firmware upgrade");
    const std::string forced = obeys ? "stopped" : "powered_off";
    CHECK(drain_states(drained) ==
          std::map<std::string, std::string>{{"a", forced}, {"b", forced}, {"off", "stopped"}});
    CHECK(modes(events.events()) == std::vector<MaintenanceMode>{MaintenanceMode::draining, MaintenanceMode::drained});
    // A guest that ignores the request is waited for until the deadline, not a moment less.
    if (!obeys) CHECK(clock->slept() - slept_before >= std::chrono::seconds(120));
    CHECK(faulty->calls("destroy") == (obeys ? 1 : 3));  // "off"'s forced stop above, then each forced one
  }
}

TEST_CASE(
    "while draining or drained a start and a cordon are refused, a host reboot starts nothing, and the uncordon ends "
    "it") {
  DaemonFixture fixture;
  {
    auto service = started(fixture);
    REQUIRE(create_vm(*service, fixture.request("kept", kOneGpu)).ok());
    REQUIRE(service->drain("chassis swap", std::chrono::seconds(60), "uid:0").ok());
    settled(*service);
    CHECK(service->maintenance().mode == MaintenanceMode::drained);
    const auto start = service->begin_start(vm_name("kept"));
    REQUIRE_FALSE(start.ok());
    CHECK(start.error().code == ErrorCode::conflict);
    CHECK(start.error().message.find("drained") != std::string::npos);
    const auto cordon = service->cordon("other", "uid:0");
    REQUIRE_FALSE(cordon.ok());
    CHECK(cordon.error().code == ErrorCode::conflict);
  }
  // The host reboots; the last boot's record says nothing ran (the drain stopped it), and a
  // restore would start what did: none, whatever on_host_boot says.
  fixture.on_host_boot = "start";
  fixture.boot_id = "2b5e0c1a-0000-4000-8000-000000000002";
  auto service = started(fixture);
  CHECK(service->status().last_reconcile.host_rebooted);
  CHECK(service->status().last_reconcile.boot_starts.empty());
  CHECK(settled(*service) == std::map<std::string, std::string>{{"kept", "shut_off"}});
  CHECK(service->maintenance().mode == MaintenanceMode::drained);
  REQUIRE(service->uncordon("uid:0").ok());
  const auto started_again = start_vm(*service, vm_name("kept"));
  CHECK_MESSAGE(started_again.ok(), started_again.error().message);
}

TEST_CASE("a drain the daemon's stop cut short goes on at the next start, to its recorded deadline") {
  DaemonFixture fixture;
  {
    auto service = started(fixture);
    REQUIRE(create_vm(*service, fixture.request("left", kOneGpu)).ok());
  }
  // The record as a drain writes it before any stop is queued: a daemon killed right after.
  const auto now = std::chrono::system_clock::now();
  REQUIRE(state::write_maintenance_record(record_file(fixture), {MaintenanceMode::draining, "decommission", "uid:0",
                                                                 rfc3339(now), rfc3339(now + std::chrono::seconds(30))})
              .ok());
  auto service = started(fixture);
  CHECK(settled(*service) == std::map<std::string, std::string>{{"left", "shut_off"}});
  const auto view = service->maintenance();
  CHECK(drain_states(view) == std::map<std::string, std::string>{{"left", "stopped"}});
  CHECK(view.mode == MaintenanceMode::drained);
  auto record = state::read_maintenance_record(record_file(fixture));
  REQUIRE(record.ok());
  REQUIRE(record->has_value());
  CHECK((*record)->mode == MaintenanceMode::drained);
  CHECK((*record)->reason == "decommission");
}

TEST_CASE("a drain whose stop fails stays draining, names the VM, and a drain again stops it") {
  DaemonFixture fixture;
  FaultyHypervisor* faulty = nullptr;
  auto service = started(fixture, &faulty);
  REQUIRE(create_vm(*service, fixture.request("stuck", kOneGpu)).ok());
  faulty->fail("shutdown", ErrorCode::unavailable, 1);
  REQUIRE(service->drain("maintenance", std::chrono::seconds(60), "uid:0").ok());
  settled(*service);
  auto view = service->maintenance();
  CHECK(view.mode == MaintenanceMode::draining);
  REQUIRE(view.vms.size() == 1);
  CHECK(view.vms[0].state == "failed");
  CHECK_FALSE(view.vms[0].error.empty());
  REQUIRE(service->drain("maintenance, again", std::chrono::seconds(60), "uid:0").ok());
  CHECK(settled(*service) == std::map<std::string, std::string>{{"stuck", "shut_off"}});
  view = service->maintenance();
  CHECK(view.mode == MaintenanceMode::drained);
  CHECK(drain_states(view) == std::map<std::string, std::string>{{"stuck", "stopped"}});
}

TEST_CASE("a maintenance record of a newer format stops the start, naming the file and the format") {
  DaemonFixture fixture;
  started(fixture);
  REQUIRE(durable::replace_file(record_file(fixture),
                                R"({"format": 2, "mode": "cordoned", "reason": "x", "principal": "", )"
                                R"("since": "2026-12-07T05:00:00Z", "deadline": ""})")
              .ok());
  auto service = fixture.start();
  REQUIRE_FALSE(service.ok());
  CHECK(service.error().message.find(record_file(fixture).string()) != std::string::npos);
  CHECK(service.error().message.find("format 2 is newer") != std::string::npos);
  // Nothing was changed: the file is as it was.
  CHECK(read_text_file(record_file(fixture)).find("\"format\": 2") != std::string::npos);
}

}  // namespace
}  // namespace hostagent::testing
