// The host's reboots: which VMs start again (operations.on_host_boot), each with its devices put
// back first; a restart of the daemon alone starts nothing; a running VM's devices are checked and
// repaired at reconcile. The host's reboot is played on test:///: its domains destroyed, the
// preparer told their devices were undone, and a new boot id.
#include <doctest/doctest.h>

#include <chrono>
#include <map>
#include <thread>

#include "daemon_fixture.hpp"
#include "hostagent/state/power_record.hpp"

namespace hostagent::testing {
namespace {

// Two VMs made, "kept" running and "parked" stopped through the API.
void make_two(DaemonFixture& fixture) {
  auto service = started(fixture);
  REQUIRE(create_vm(*service, fixture.request("kept", kOneGpu)).ok());
  REQUIRE(create_vm(*service, fixture.request("parked", kOneGpu)).ok());
  REQUIRE(stop_vm(*service, vm_name("parked"), true).ok());
}

// The host goes down and comes back: every domain off, every prepared device undone, a new boot.
void reboot_host(DaemonFixture& fixture) {
  for (const auto& name : test_driver_domains("")) {
    if (name != "test") REQUIRE(fixture.libvirt().destroy(name).ok());
  }
  std::lock_guard lock(fixture.devices()->mutex);
  fixture.devices()->undone = {"kept", "parked"};
  fixture.boot_id = "2b5e0c1a-0000-4000-8000-000000000002";
}

std::vector<std::string> reapplied(DaemonFixture& fixture) {
  std::lock_guard lock(fixture.devices()->mutex);
  return fixture.devices()->reapplied;
}

TEST_CASE("after a host reboot, restore starts the VMs that were running, devices first, and leaves the rest off") {
  DaemonFixture fixture;
  make_two(fixture);
  reboot_host(fixture);

  auto service = started(fixture);
  const auto report = service->status().last_reconcile;
  CHECK(report.host_rebooted);
  CHECK(report.boot_starts == std::vector<std::string>{"kept"});
  CHECK(settled(*service) == std::map<std::string, std::string>{{"kept", "running"}, {"parked", "shut_off"}});
  CHECK(reapplied(fixture) == std::vector<std::string>{"kept"});
  // This run's: the creates and the stop from before the reboot are listed too.
  std::vector<service::OperationView> starts;
  for (const auto& operation : service->operations()) {
    if (operation.kind == "start") starts.push_back(operation);
  }
  REQUIRE(starts.size() == 1);
  CHECK(starts.front().kind == "start");
  CHECK(starts.front().state == "succeeded");
  CHECK(starts.front().step_count == 2);  // prepare_devices, then start

  // The parked VM's devices are put back when it is started, before libvirt starts it.
  REQUIRE(start_vm(*service, vm_name("parked")).ok());
  CHECK(reapplied(fixture) == std::vector<std::string>{"kept", "parked"});
  std::lock_guard lock(fixture.devices()->mutex);
  CHECK(fixture.devices()->undone.empty());
}

TEST_CASE("on_host_boot start starts every VM after a reboot, and stay_off none") {
  for (const std::string policy : {"start", "stay_off"}) {
    CAPTURE(policy);
    DaemonFixture fixture;
    fixture.on_host_boot = policy;
    make_two(fixture);
    reboot_host(fixture);
    auto service = started(fixture);
    const bool all = policy == "start";
    CHECK(service->status().last_reconcile.host_rebooted);
    CHECK(service->status().last_reconcile.boot_starts.size() == (all ? 2U : 0U));
    const std::string state = all ? "running" : "shut_off";
    CHECK(settled(*service) == std::map<std::string, std::string>{{"kept", state}, {"parked", state}});
  }
}

TEST_CASE("a restart of the daemon alone starts nothing, even a VM found off") {
  DaemonFixture fixture;
  make_two(fixture);
  REQUIRE(fixture.libvirt().destroy("kept").ok());  // stopped outside hostagent while it was down
  auto service = started(fixture);
  CHECK_FALSE(service->status().last_reconcile.host_rebooted);
  CHECK(service->status().last_reconcile.boot_starts.empty());
  CHECK(settled(*service) == std::map<std::string, std::string>{{"kept", "shut_off"}, {"parked", "shut_off"}});
}

TEST_CASE("the power record follows what runs: a VM stopped, or powered off by its guest, is not restored") {
  DaemonFixture fixture;
  {
    auto service = started(fixture);
    REQUIRE(create_vm(*service, fixture.request("a", kOneGpu)).ok());
    REQUIRE(create_vm(*service, fixture.request("b", kOneGpu)).ok());
    const auto file = fixture.config().state_directory / "power.json";
    const auto record = state::read_power_record(file).value();
    REQUIRE(record.has_value());
    CHECK(record->boot_id == fixture.boot_id);
    CHECK(record->running.size() == 2);
    // The guest powers itself off: libvirt's event reaches the record.
    REQUIRE(fixture.libvirt().destroy("b").ok());
    for (int i = 0; i < 200 && state::read_power_record(file).value()->running.size() != 1; ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    CHECK(state::read_power_record(file).value()->running ==
          std::vector<state::RunningVm>{{"a", service->get_vm(vm_name("a"))->uuid}});
  }
  fixture.boot_id = "2b5e0c1a-0000-4000-8000-000000000003";
  REQUIRE(fixture.libvirt().destroy("a").ok());
  auto service = started(fixture);
  CHECK(service->status().last_reconcile.boot_starts == std::vector<std::string>{"a"});
  CHECK(settled(*service) == std::map<std::string, std::string>{{"a", "running"}, {"b", "shut_off"}});
}

TEST_CASE("a start whose devices cannot be put back fails before libvirt starts the domain") {
  DaemonFixture fixture;
  make_two(fixture);
  fixture.devices()->fail_reapply = true;
  FaultyHypervisor* faulty = nullptr;
  auto service = started(fixture, &faulty);
  const auto refused = start_vm(*service, vm_name("parked"));
  REQUIRE_FALSE(refused.ok());
  CHECK(contains(refused.error().message, "injected failure of reapply"));
  CHECK(faulty->calls("start_paused") == 0);
  CHECK(service->get_vm(vm_name("parked"))->state == "shut_off");
}

TEST_CASE("a running VM's devices found not as prepared are put back at reconcile, and reported") {
  DaemonFixture fixture;
  make_two(fixture);
  {
    std::lock_guard lock(fixture.devices()->mutex);
    fixture.devices()->undone = {"kept"};  // a PF driver reloaded while the daemon was down
  }
  auto service = started(fixture);
  const auto report = service->status().last_reconcile;
  CHECK(report.repaired == std::vector<std::string>{"kept: devices of kept prepared again"});
  CHECK(report.problems.empty());
  CHECK(reapplied(fixture) == std::vector<std::string>{"kept"});  // the stopped VM is left for its start
}

}  // namespace
}  // namespace hostagent::testing
