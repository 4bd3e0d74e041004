// Health that gates placement (devices.health): a device whose AER errors rise, or whose link
// trains below its capability, is quarantined at the health poller's next reading, with the reason:
// free, it leaves placement; held, it is named against its VM, which runs on. An operator's clear
// puts it back, judged from then on against what it showed then.
#include <doctest/doctest.h>

#include <map>
#include <mutex>

#include "daemon_fixture.hpp"

namespace hostagent::testing {
namespace {

// The health reader the composition root made, with what the test says each device shows now
// written over its reading (the simulated host's devices have no AER counters of their own).
class HealthOverrides {
 public:
  void install(DaemonFixture& fixture) {
    fixture.change_readers = [this](daemon::HostReaders& readers) {
      readers.device_health = [this, sysfs = readers.device_health](const numa::HostModel& host) {
        auto health = sysfs(host);
        if (!health.ok()) return health;
        const std::lock_guard lock(mutex_);
        for (auto& device : *health) {
          if (const auto it = shows_.find(device.address); it != shows_.end()) it->second(device);
        }
        return health;
      };
    };
  }
  void show(const PciAddress& address, std::function<void(numa::DeviceHealth&)> change) {
    const std::lock_guard lock(mutex_);
    shows_[address] = std::move(change);
  }

 private:
  std::mutex mutex_;
  std::map<PciAddress, std::function<void(numa::DeviceHealth&)>> shows_;
};

std::function<void(numa::DeviceHealth&)> aer(uint64_t fatal, uint64_t nonfatal) {
  return [=](numa::DeviceHealth& device) {
    device.aer_fatal = {{"Undefined", 0}, {"TOTAL_ERR_FATAL", fatal}};
    device.aer_nonfatal = {{"CmpltTO", nonfatal}, {"TOTAL_ERR_NONFATAL", nonfatal}};
  };
}

// A link that trained at Gen3 x8 where Gen5 x16 was possible.
void downtrained(numa::DeviceHealth& device) {
  device.link_speed_gts = 8.0;
  device.link_max_speed_gts = 32.0;
  device.link_width = 8;
  device.link_max_width = 16;
  device.link_degraded = true;
}

std::vector<PciAddress> gpus(service::VmService& service) {
  std::vector<PciAddress> out;
  for (const auto& function : service.usage().host->pci_devices) {
    if (function.role == numa::PciRole::gpu) out.push_back(function.address);
  }
  REQUIRE(out.size() == 8);
  return out;
}

std::optional<service::QuarantineView> quarantine_of(service::VmService& service, const PciAddress& address) {
  for (auto& entry : service.quarantined()) {
    if (entry.address == address) return entry;
  }
  return std::nullopt;
}

struct GatedHost {
  DaemonFixture fixture;
  HealthOverrides overrides;
  std::shared_ptr<ManualClock> clock = std::make_shared<ManualClock>();
  std::unique_ptr<service::VmService> service;

  explicit GatedHost(numa::HealthThresholds thresholds = {}) {
    fixture.health = thresholds;
    overrides.install(fixture);
    service = started(fixture, nullptr, clock);
  }
  // The health poller's next reading.
  void read() { REQUIRE(clock->advance_and_settle(fixture.device_health_interval)); }
};

TEST_CASE("AER errors rising on a free GPU take it out of placement with the reason, until an operator clears it") {
  GatedHost host;
  const auto gpu = gpus(*host.service).front();
  CHECK(host.service->quarantined().empty());  // the first reading is the baseline, and healthy
  host.overrides.show(gpu, aer(1, 0));
  host.read();
  const auto quarantined = quarantine_of(*host.service, gpu);
  REQUIRE(quarantined.has_value());
  CHECK(quarantined->step == "health");
  CHECK(quarantined->vm.empty());
  CHECK_MESSAGE(quarantined->reason.find("AER fatal errors rose from 0 to 1 (devices.health.aer_fatal_rise is 1)") !=
                    std::string::npos,
                quarantined->reason);
  // Out of placement: eight GPUs are no longer there to give.
  const auto eight = create_vm(*host.service, host.fixture.request("eight", kEightGpus));
  CHECK_FALSE(eight.ok());

  // Cleared, the errors it showed are its baseline: the same counters again are no fault.
  REQUIRE(host.service->clear_quarantine(gpu, "uid:0").ok());
  host.read();
  CHECK_FALSE(quarantine_of(*host.service, gpu).has_value());
  REQUIRE(create_vm(*host.service, host.fixture.request("eight", kEightGpus)).ok());
  REQUIRE(delete_vm(*host.service, vm_name("eight")).ok());
  // One more fatal error is.
  host.overrides.show(gpu, aer(2, 0));
  host.read();
  CHECK(quarantine_of(*host.service, gpu).has_value());
}

TEST_CASE("a held GPU's fault is named against its VM, which runs on, and its next tenant never gets it") {
  GatedHost host;
  auto holder = create_vm(*host.service, host.fixture.request("holder", kOneGpu));
  REQUIRE_MESSAGE(holder.ok(), holder.error().message);
  const PciAddress gpu = holder->record->allocation.devices.front();
  host.overrides.show(gpu, aer(0, 3));
  host.read();
  const auto quarantined = quarantine_of(*host.service, gpu);
  REQUIRE(quarantined.has_value());
  CHECK(quarantined->vm == "holder");
  CHECK_MESSAGE(quarantined->reason.find("AER nonfatal errors rose from 0 to 3") != std::string::npos,
                quarantined->reason);
  CHECK(settled(*host.service) == std::map<std::string, std::string>{{"holder", "running"}});
  // The VM goes: its GPU stays out rather than going back through cleaning to the next VM.
  REQUIRE(delete_vm(*host.service, vm_name("holder")).ok());
  CHECK(quarantine_of(*host.service, gpu).has_value());
  CHECK_FALSE(create_vm(*host.service, host.fixture.request("eight", kEightGpus)).ok());
}

TEST_CASE("a link trained below its capability is a fault, and once cleared only a worse one is") {
  GatedHost host;
  const auto gpu = gpus(*host.service).back();
  host.overrides.show(gpu, downtrained);
  host.read();
  const auto quarantined = quarantine_of(*host.service, gpu);
  REQUIRE(quarantined.has_value());
  CHECK_MESSAGE(quarantined->reason.find("its PCIe link trained at 8 GT/s x8, below its capability 32 GT/s x16") !=
                    std::string::npos,
                quarantined->reason);
  // The operator accepts it as it is: it is placed again.
  REQUIRE(host.service->clear_quarantine(gpu, "uid:0").ok());
  host.read();
  host.read();
  CHECK_FALSE(quarantine_of(*host.service, gpu).has_value());
  // Narrower still: out again.
  host.overrides.show(gpu, [](numa::DeviceHealth& device) {
    downtrained(device);
    device.link_width = 4;
  });
  host.read();
  const auto again = quarantine_of(*host.service, gpu);
  REQUIRE(again.has_value());
  CHECK_MESSAGE(again->reason.find("below the link accepted when its quarantine was cleared") != std::string::npos,
                again->reason);
}

TEST_CASE("devices.health sets what gates: a rise below its threshold, or a link it does not judge, is no fault") {
  numa::HealthThresholds thresholds;
  thresholds.aer_nonfatal_rise = 5;
  thresholds.link_degraded = false;
  GatedHost host(thresholds);
  const auto all = gpus(*host.service);
  host.overrides.show(all[0], aer(0, 4));
  host.overrides.show(all[1], downtrained);
  host.read();
  CHECK(host.service->quarantined().empty());
  host.overrides.show(all[0], aer(0, 5));
  host.read();
  const auto quarantined = host.service->quarantined();
  REQUIRE(quarantined.size() == 1);
  CHECK(quarantined.front().address == all[0]);
  CHECK_MESSAGE(quarantined.front().reason.find("devices.health.aer_nonfatal_rise is 5") != std::string::npos,
                quarantined.front().reason);
}

}  // namespace
}  // namespace hostagent::testing
