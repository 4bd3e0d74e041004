// The quarantine: a device the kernel would not bind, or one gone from the bus, is never placed
// again until an operator clears it, and that holds across restarts of the daemon.
#include <doctest/doctest.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <mutex>
#include <thread>

#include "daemon_fixture.hpp"
#include "hostagent/state/device_states.hpp"

namespace hostagent::testing {
namespace {

bool holds(const numa::Allocation& allocation, const PciAddress& device) {
  return std::find(allocation.devices.begin(), allocation.devices.end(), device) != allocation.devices.end();
}

// A one-GPU create whose GPU does not bind: returns that GPU, quarantined.
PciAddress fail_a_bind(DaemonFixture& fixture, service::VmService& service, const std::string& name) {
  {
    std::lock_guard lock(fixture.devices()->mutex);
    fixture.devices()->fault_first_device = true;
  }
  const auto failed = create_vm(service, fixture.request(name, kOneGpu));
  REQUIRE_FALSE(failed.ok());
  CHECK(failed.error().code == ErrorCode::io_error);
  const auto quarantined = service.quarantined();
  REQUIRE(quarantined.size() == 1);
  return quarantined.front().address;
}

TEST_CASE("a GPU the kernel would not bind is quarantined: never placed again, across restarts, until cleared") {
  DaemonFixture fixture;
  PciAddress gpu;
  {
    auto service = started(fixture);
    const EventsOfKind events(*service, service::ServiceEvent::Kind::quarantine);
    gpu = fail_a_bind(fixture, *service, "first");
    const auto entry = service->quarantined().front();
    CHECK(entry.step == "bind to vfio-pci");
    CHECK(entry.vm == "first");
    CHECK(entry.reason == "injected: the device did not bind");
    CHECK_FALSE(entry.since.empty());
    const auto published = events.events();
    REQUIRE(published.size() == 1);
    CHECK(published.front().devices == std::vector<PciAddress>{gpu});
    REQUIRE(published.front().quarantine.has_value());
    CHECK(published.front().quarantine->vm == "first");
    // What placement and capacity read says so.
    const auto usage = service->usage();
    REQUIRE(usage.policy.withheld.count(gpu) == 1);
    CHECK(usage.policy.withheld.at(gpu).why == numa::Withheld::Why::quarantined);
    CHECK_MESSAGE(contains(usage.policy.withheld.at(gpu).reason, "hostagentctl quarantine clear"),
                  usage.policy.withheld.at(gpu).reason);

    auto second = create_vm(*service, fixture.request("second", kOneGpu));
    REQUIRE_MESSAGE(second.ok(), second.error().message);
    CHECK_FALSE(holds(second->record->allocation, gpu));
  }
  // Written down: a restart hands it out no more than this run did.
  const auto states = state::read_device_states(fixture.scratch() / "state" / "device_states.json");
  REQUIRE(states.ok());
  CHECK(std::count_if(states->begin(), states->end(), [](const state::DeviceStateEntry& entry) {
          return entry.state == state::DeviceState::quarantined;
        }) == 1);
  auto service = started(fixture);
  REQUIRE(service->quarantined().size() == 1);
  CHECK(service->quarantined().front().address == gpu);
  REQUIRE(delete_vm(*service, vm_name("second")).ok());
  const auto eight = create_vm(*service, fixture.request("eight", kEightGpus));
  REQUIRE_FALSE(eight.ok());
  CHECK(eight.error().code == ErrorCode::does_not_fit);
  CHECK_MESSAGE(contains(eight.error().message, gpu.to_string() + " quarantined (bind to vfio-pci failed for vm first"),
                eight.error().message);

  // The operator clears it: placed again, and the next start agrees.
  {
    const EventsOfKind events(*service, service::ServiceEvent::Kind::quarantine);
    const auto cleared = service->clear_quarantine(gpu, "uid:0");
    REQUIRE_MESSAGE(cleared.ok(), cleared.error().message);
    CHECK(cleared->vm == "first");
    CHECK(service->quarantined().empty());
    REQUIRE(events.events().size() == 1);
    CHECK_FALSE(events.events().front().quarantine.has_value());
  }
  auto all = create_vm(*service, fixture.request("all", kEightGpus));
  REQUIRE_MESSAGE(all.ok(), all.error().message);
  CHECK(holds(all->record->allocation, gpu));
  const auto again = service->clear_quarantine(gpu, "uid:0");
  REQUIRE_FALSE(again.ok());
  CHECK(again.error().code == ErrorCode::not_found);
  service.reset();
  CHECK(started(fixture)->quarantined().empty());
}

TEST_CASE("a device quarantined twice keeps its first account") {
  DaemonFixture fixture;
  auto service = started(fixture);
  const auto gpu = fail_a_bind(fixture, *service, "first");
  const auto first = service->quarantined().front();
  // The same GPU faulted again, by another VM's preparation (a reapply after a reboot).
  std::lock_guard lock(fixture.devices()->mutex);
  REQUIRE(fixture.devices()->sink);
  fixture.devices()->sink(devices::DeviceFault{gpu, "later", "bind to vfio-pci", "another account"});
  REQUIRE(service->quarantined().size() == 1);
  CHECK(service->quarantined().front().vm == first.vm);
  CHECK(service->quarantined().front().reason == first.reason);
}

TEST_CASE("a GPU gone from the bus is quarantined by the health poller, naming the VM that held it") {
  DaemonFixture fixture;
  const auto tree = fixture.own_host_tree();
  auto clock = std::make_shared<ManualClock>();
  auto service = started(fixture, nullptr, clock);
  auto holder = create_vm(*service, fixture.request("holder", kOneGpu));
  REQUIRE_MESSAGE(holder.ok(), holder.error().message);
  const PciAddress gpu = holder->record->allocation.devices.front();
  // The kernel drops the bus/pci/devices link with the device.
  const auto link = tree / "sys" / "bus" / "pci" / "devices" / gpu.to_string();
  REQUIRE(std::filesystem::exists(std::filesystem::symlink_status(link)));
  std::filesystem::remove(link);
  CHECK(service->quarantined().empty());  // seen at the poller's next reading
  REQUIRE(clock->advance_and_settle(fixture.device_health_interval));
  const auto quarantined = service->quarantined();
  REQUIRE(quarantined.size() == 1);
  CHECK(quarantined.front().address == gpu);
  CHECK(quarantined.front().step == "health");
  CHECK(quarantined.front().vm == "holder");
  CHECK_MESSAGE(contains(quarantined.front().reason, "gone from the bus"), quarantined.front().reason);

  // Issue 43, defect 18: still gone, it is neither cleared nor cleaned (either put it back in
  // placement until the next poll); back on the bus, it is cleared and cleaned as any other.
  REQUIRE(delete_vm(*service, vm_name("holder")).ok());
  for (const auto& refused :
       {service->clear_quarantine(gpu, "uid:0").error(), service->clean_device(gpu, "uid:0").error()}) {
    CHECK(refused.code == ErrorCode::conflict);
    CHECK_MESSAGE(contains(refused.message, "is still gone from the bus"), refused.message);
  }
  CHECK(service->quarantined().size() == 1);
  const auto eight = create_vm(*service, fixture.request("after", kEightGpus));  // one of them is out
  CHECK_FALSE(eight.ok());
}

TEST_CASE("an unreadable quarantine record stops the start: a device must not be handed out because of it") {
  DaemonFixture fixture;
  { started(fixture); }
  write_text_file(fixture.scratch() / "state" / "device_states.json", R"({"devices": [{"address": "nope"}]})");
  const auto service = fixture.start();
  REQUIRE_FALSE(service.ok());
  CHECK(service.error().code == ErrorCode::parse_error);
  CHECK_MESSAGE(contains(service.error().message, "devices[0].address"), service.error().message);
}

}  // namespace
}  // namespace hostagent::testing
