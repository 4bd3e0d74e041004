// The device lifecycle (issue 19): a device a VM held is marked before the VM gets it, cleaned once
// it is let go, and placed again only when its cleaning passed; a cleaning that fails quarantines
// it with the step; every cleaning is a record in the hash-chained evidence, which the history
// reads and whose break it reports; a cleaning a restart cut short runs again.
#include <doctest/doctest.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <thread>

#include "daemon_fixture.hpp"
#include "hostagent/state/device_states.hpp"

namespace hostagent::testing {
namespace {

std::vector<PciAddress> cleaned(DaemonFixture& fixture) {
  std::lock_guard lock(fixture.devices()->mutex);
  return fixture.devices()->cleaned;
}

void hold_cleaning(DaemonFixture& fixture, bool hold) {
  {
    std::lock_guard lock(fixture.devices()->mutex);
    fixture.devices()->hold_cleaning = hold;
  }
  fixture.devices()->released.notify_all();
}

// Cleanings wait before their first step while it lives, or until release(): a failed check in
// between never leaves the cleaning thread blocked (the service's end would wait for it).
class HeldCleaning {
 public:
  explicit HeldCleaning(DaemonFixture& fixture) : fixture_(fixture) { hold_cleaning(fixture_, true); }
  ~HeldCleaning() { release(); }
  HeldCleaning(const HeldCleaning&) = delete;
  HeldCleaning& operator=(const HeldCleaning&) = delete;
  void release() const { hold_cleaning(fixture_, false); }

 private:
  DaemonFixture& fixture_;
};

// Until the cleaning thread has nothing left (bounded: a failure here names what still waits).
void wait_until_cleaned(service::VmService& service) {
  for (int i = 0; i < 1000 && !service.cleaning().empty(); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  REQUIRE(service.cleaning().empty());
}

// Until `count` cleanings are in their reset at once, held there (HeldCleaning, stuck); false after
// 60 s without (a one-at-a-time cleaning never gets past one).
bool resets_waiting_reach(DaemonFixture& fixture, std::size_t count) {
  auto& shared = *fixture.devices();
  std::unique_lock lock(shared.mutex);
  return shared.released.wait_for(lock, std::chrono::seconds(60),
                                  [&] { return shared.resets_waiting == static_cast<int>(count); });
}

void set_stuck(DaemonFixture& fixture, const std::set<PciAddress>& stuck) {
  {
    std::lock_guard lock(fixture.devices()->mutex);
    fixture.devices()->stuck = stuck;
  }
  fixture.devices()->released.notify_all();
}

// Tells when the daemon's stop begins to wait for the cleanings under way (the "clean" operation's
// "stop" step); every other step goes on.
class StopSeen final : public daemon::StepHook {
 public:
  void before_step(const std::string& operation, const std::string& /*vm*/, const std::string& step) override {
    if (operation != "clean" || step != "stop") return;
    {
      std::lock_guard lock(mutex_);
      seen_ = true;
    }
    seen_changed_.notify_all();
  }
  // False after 60 s without it (a bound for a failing test).
  bool wait() {
    std::unique_lock lock(mutex_);
    return seen_changed_.wait_for(lock, std::chrono::seconds(60), [this] { return seen_; });
  }

 private:
  std::mutex mutex_;
  std::condition_variable seen_changed_;
  bool seen_ = false;
};

// A one-GPU VM made: its GPU.
PciAddress one_gpu_vm(DaemonFixture& fixture, service::VmService& service, const std::string& name) {
  auto vm = create_vm(service, fixture.request(name, kOneGpu));
  REQUIRE_MESSAGE(vm.ok(), vm.error().message);
  return vm->record->allocation.devices.front();
}

// Whether `device`'s cleaning has begun its reset, among the cleaning events seen.
bool reset_begun(const std::vector<service::ServiceEvent>& events, const PciAddress& device) {
  return std::any_of(events.begin(), events.end(), [&](const service::ServiceEvent& event) {
    return event.cleaning && event.cleaning->address == device && event.cleaning->step == "reset";
  });
}

bool allocation_holds(const numa::Allocation& allocation, const PciAddress& device) {
  return std::find(allocation.devices.begin(), allocation.devices.end(), device) != allocation.devices.end();
}

TEST_CASE("a deleted VM's devices are cleaned before they are placed again, each cleaning on the evidence chain") {
  DaemonFixture fixture;
  auto service = started(fixture);
  auto vm = create_vm(*service, fixture.request("tenant-a", kOneGpu));
  REQUIRE_MESSAGE(vm.ok(), vm.error().message);
  const auto devices = vm->record->allocation.devices;
  REQUIRE_FALSE(devices.empty());
  // Marked while held: shown as held by the VM, out of nobody's reach yet.
  const auto marked = service->cleaning();
  REQUIRE(marked.size() == devices.size());
  for (const auto& entry : marked) {
    CHECK(entry.vm == "tenant-a");
    CHECK(entry.held_by == "tenant-a");
    CHECK(entry.step.empty());
  }
  CHECK(cleaned(fixture).empty());

  const EventsOfKind events(*service, service::ServiceEvent::Kind::cleaning);
  REQUIRE(delete_vm(*service, vm_name("tenant-a")).ok());
  // The libvirt-managed host skips nothing it could do, so the cleaning ends with the delete.
  CHECK(service->cleaning().empty());
  auto done = cleaned(fixture);
  std::sort(done.begin(), done.end());
  auto expected = devices;
  std::sort(expected.begin(), expected.end());
  CHECK(done == expected);

  const auto gpu = devices.front();
  const auto history = service->device_history(gpu);
  REQUIRE_MESSAGE(history.ok(), history.error().message);
  CHECK(history->chain_broken.empty());
  REQUIRE(history->cleanings.size() == 1);
  const auto& record = history->cleanings.front();
  CHECK(record.vm == "tenant-a");
  CHECK(record.outcome == "clean");
  CHECK(record.role == "gpu");
  REQUIRE(record.steps.size() == 2);
  CHECK(record.steps[0].name == "reset");
  CHECK(record.steps[0].result == "passed");
  CHECK(record.steps[1].name == "firmware");
  CHECK(record.sha256.size() == 64);
  CHECK(service->last_cleanings().at(gpu).sequence == record.sequence);
  // Each device: its cleaning begun (a step named), then ended with its record.
  const auto published = events.events();
  const auto ended = std::count_if(published.begin(), published.end(),
                                   [](const service::ServiceEvent& event) { return event.cleaned.has_value(); });
  CHECK(ended == static_cast<long>(devices.size()));
  CHECK(std::any_of(published.begin(), published.end(), [](const service::ServiceEvent& event) {
    return event.cleaning && event.cleaning->step == "reset";
  }));
  // Free again: eight GPUs fit, the cleaned one among them.
  auto all = create_vm(*service, fixture.request("tenant-b", kEightGpus));
  REQUIRE_MESSAGE(all.ok(), all.error().message);
  CHECK(allocation_holds(all->record->allocation, gpu));
}

TEST_CASE("a device whose cleaning fails is quarantined with the step, and placed no more") {
  DaemonFixture fixture;
  auto service = started(fixture);
  const auto gpu = one_gpu_vm(fixture, *service, "tenant-a");
  {
    std::lock_guard lock(fixture.devices()->mutex);
    fixture.devices()->failing_step[gpu] = "firmware";
  }
  REQUIRE(delete_vm(*service, vm_name("tenant-a")).ok());
  const auto quarantined = service->quarantined();
  REQUIRE(quarantined.size() == 1);
  CHECK(quarantined.front().address == gpu);
  CHECK(quarantined.front().step == "firmware");
  CHECK(quarantined.front().reason == "injected: firmware");
  CHECK(quarantined.front().vm == "tenant-a");
  const auto history = service->device_history(gpu);
  REQUIRE(history.ok());
  REQUIRE(history->cleanings.size() == 1);
  CHECK(history->cleanings.front().outcome == "quarantined");
  CHECK(history->cleanings.front().steps.back().result == "failed");

  const auto eight = create_vm(*service, fixture.request("tenant-b", kEightGpus));
  REQUIRE_FALSE(eight.ok());
  CHECK(eight.error().code == ErrorCode::does_not_fit);
  CHECK_MESSAGE(eight.error().message.find(gpu.to_string() + " quarantined (firmware failed for vm tenant-a") !=
                    std::string::npos,
                eight.error().message);
}

TEST_CASE("on a host that cleans on its own thread, a released device stays out of placement until it is clean") {
  DaemonFixture fixture;
  fixture.devices()->libvirt_manages = false;
  auto service = started(fixture);
  auto vm = create_vm(*service, fixture.request("tenant-a", kEightGpus));
  REQUIRE_MESSAGE(vm.ok(), vm.error().message);
  const HeldCleaning held(fixture);
  REQUIRE(delete_vm(*service, vm_name("tenant-a")).ok());
  // Every GPU is the last tenant's until cleaned: a create finds none, and says why.
  const auto refused = create_vm(*service, fixture.request("tenant-b", kOneGpu));
  REQUIRE_FALSE(refused.ok());
  CHECK(refused.error().code == ErrorCode::does_not_fit);
  CHECK_MESSAGE(refused.error().message.find("being cleaned (after vm tenant-a") != std::string::npos,
                refused.error().message);
  const auto devices = vm->record->allocation.devices.size();
  REQUIRE(resets_waiting_reach(fixture, devices));
  const auto under_way = service->cleaning();
  CHECK(under_way.size() == devices);
  CHECK(std::all_of(under_way.begin(), under_way.end(),
                    [](const service::CleaningView& view) { return view.held_by.empty(); }));
  const auto usage = service->usage();
  CHECK(usage.policy.withheld.size() == under_way.size());

  held.release();
  wait_until_cleaned(*service);
  auto next = create_vm(*service, fixture.request("tenant-b", kOneGpu));
  REQUIRE_MESSAGE(next.ok(), next.error().message);
}

TEST_CASE("a cleaning a killed daemon left unfinished runs again at the next start") {
  DaemonFixture fixture;
  PciAddress gpu;
  {
    auto service = started(fixture);
    gpu = one_gpu_vm(fixture, *service, "tenant-a");
    REQUIRE(delete_vm(*service, vm_name("tenant-a")).ok());
  }
  // What a daemon killed between marking and its cleaning's end leaves on disk: the mark.
  const auto states_file = fixture.scratch() / "state" / "device_states.json";
  REQUIRE(state::write_device_states(
              states_file, {{gpu, state::DeviceState::cleaning, "", "", "tenant-killed", "2026-12-04T17:20:00Z"}})
              .ok());
  const auto before = cleaned(fixture).size();
  auto service = started(fixture);
  wait_until_cleaned(*service);
  CHECK(cleaned(fixture).size() == before + 1);
  CHECK(cleaned(fixture).back() == gpu);
  const auto history = service->device_history(gpu);
  REQUIRE(history.ok());
  REQUIRE(history->cleanings.size() == 2);
  CHECK(history->cleanings.back().vm == "tenant-killed");
  CHECK(history->cleanings.back().sequence > history->cleanings.front().sequence);
  CHECK(state::read_device_states(states_file)->empty());
}

// Issue 44: the devices one VM lets go are cleaned together, each on a thread of its own; and a
// step that never returns is given up at its deadline, holding no other device back.
TEST_CASE("the devices a VM lets go are cleaned all at once, as many at a time as hygiene.parallel allows") {
  for (const int parallel : {0, 3}) {
    CAPTURE(parallel);
    DaemonFixture fixture;
    fixture.devices()->libvirt_manages = false;
    fixture.parallel_cleanings = parallel;
    auto service = started(fixture);
    auto vm = create_vm(*service, fixture.request("tenant-a", kEightGpus));
    REQUIRE_MESSAGE(vm.ok(), vm.error().message);
    const auto devices = vm->record->allocation.devices.size();
    REQUIRE(devices >= 8);
    const HeldCleaning held(fixture);
    const EventsOfKind cleanings(*service, service::ServiceEvent::Kind::cleaning);
    REQUIRE(delete_vm(*service, vm_name("tenant-a")).ok());
    const auto at_once = parallel == 0 ? devices : static_cast<std::size_t>(parallel);
    REQUIRE(resets_waiting_reach(fixture, at_once));
    // Each reset under way is published as it begins (the supervisor tells it, after the thread).
    REQUIRE(cleanings.wait_for([&](const std::vector<service::ServiceEvent>& events) {
      return std::count_if(events.begin(), events.end(), [](const service::ServiceEvent& event) {
               return event.cleaning && event.cleaning->step == "reset";
             }) == static_cast<std::ptrdiff_t>(at_once);
    }));
    const auto under_way = service->cleaning();
    CHECK(std::count_if(under_way.begin(), under_way.end(), [](const service::CleaningView& view) {
            return view.step == "reset";
          }) == static_cast<std::ptrdiff_t>(at_once));
    held.release();
    wait_until_cleaned(*service);
    CHECK(cleaned(fixture).size() == devices);
    // One chain however the cleanings interleaved: every record follows the one before it.
    const auto history = service->device_history(vm->record->allocation.devices.front());
    REQUIRE(history.ok());
    CHECK(history->chain_broken.empty());
  }
}

TEST_CASE("a reset that never returns is quarantined at its deadline while the others are freed, and placed no more") {
  DaemonFixture fixture;
  fixture.devices()->libvirt_manages = false;
  const auto clock = std::make_shared<ManualClock>();
  auto service = started(fixture, nullptr, clock);
  auto vm = create_vm(*service, fixture.request("tenant-a", kEightGpus));
  REQUIRE_MESSAGE(vm.ok(), vm.error().message);
  const auto devices = vm->record->allocation.devices;
  const auto wedged = devices.front();
  set_stuck(fixture, {wedged});
  const EventsOfKind cleanings(*service, service::ServiceEvent::Kind::cleaning);
  const EventsOfKind quarantines(*service, service::ServiceEvent::Kind::quarantine);
  REQUIRE(delete_vm(*service, vm_name("tenant-a")).ok());
  // Every other device is cleaned while the wedged one's reset waits: no clock moved for that.
  const auto freed = [&](const std::vector<service::ServiceEvent>& events) {
    return std::count_if(events.begin(), events.end(), [](const service::ServiceEvent& e) { return e.cleaned; }) ==
           static_cast<std::ptrdiff_t>(devices.size() - 1);
  };
  REQUIRE(cleanings.wait_for(freed));
  REQUIRE(cleanings.wait_for(
      [&](const std::vector<service::ServiceEvent>& events) { return reset_begun(events, wedged); }));
  const auto still = service->cleaning();
  REQUIRE(still.size() == 1);
  CHECK(still.front().address == wedged);
  CHECK(still.front().step == "reset");
  CHECK(service->quarantined().empty());

  clock->advance_steady(std::chrono::minutes(2) - std::chrono::milliseconds(1));
  CHECK(service->quarantined().empty());  // not a moment before its deadline
  clock->advance_steady(std::chrono::milliseconds(1));
  REQUIRE(quarantines.wait_for([](const auto& events) { return !events.empty(); }));
  const auto quarantined = service->quarantined();
  REQUIRE(quarantined.size() == 1);
  CHECK(quarantined.front().address == wedged);
  CHECK(quarantined.front().step == "reset");
  CHECK_MESSAGE(quarantined.front().reason.find("did not finish within its deadline of 2m (hygiene.deadlines)") !=
                    std::string::npos,
                quarantined.front().reason);
  CHECK(service->cleaning().empty());
  const auto history = service->device_history(wedged);
  REQUIRE(history.ok());
  REQUIRE_FALSE(history->cleanings.empty());
  CHECK(history->cleanings.back().outcome == "quarantined");
  // The release ended with its last device: all of them, from the delete to the deadline's 2 minutes
  // (the steady clock moved for nothing else), told once.
  REQUIRE(cleanings.wait_for([](const auto& events) {
    return std::any_of(events.begin(), events.end(), [](const service::ServiceEvent& e) { return e.release; });
  }));
  std::vector<service::ReleaseCleaningView> releases;
  for (const auto& events : {cleanings.events(), quarantines.events()}) {
    for (const auto& event : events)
      if (event.release) releases.push_back(*event.release);
  }
  REQUIRE(releases.size() == 1);
  CHECK(releases.front().devices == devices.size());
  CHECK(releases.front().seconds == doctest::Approx(120.0));

  // The next tenant gets the freed GPUs, never the wedged one.
  auto next = create_vm(*service, fixture.request("tenant-b", kOneGpu));
  REQUIRE_MESSAGE(next.ok(), next.error().message);
  for (const auto& device : next->record->allocation.devices) CHECK(device != wedged);
  // The reset returns at last: what it would have said is dropped, the quarantine stands.
  set_stuck(fixture, {});
  CHECK(service->quarantined().size() == 1);
}

// A step hook (the kernel harness's --pause-at clean:reset:ADDRESS) that holds one device's reset
// until its gate opens.
class HeldReset final : public daemon::StepHook {
 public:
  void before_step(const std::string& operation, const std::string& vm, const std::string& step) override {
    if (operation != "clean" || step != "reset") return;
    {
      const std::lock_guard lock(mutex_);
      if (vm != device_) return;
    }
    gate.wait();
  }
  void hold(const PciAddress& device) {
    const std::lock_guard lock(mutex_);
    device_ = device.to_string();
  }
  Gate gate;

 private:
  std::mutex mutex_;
  std::string device_;
};

// The hook runs inside the step's time, so a hook that never returns is a step that never returns:
// its deadline ends it, which is what lets the real-kernel harness wedge one reset (hygiene:9).
TEST_CASE("a cleaning step's hook runs within the step's deadline: one that never returns quarantines its device") {
  DaemonFixture fixture;
  fixture.devices()->libvirt_manages = false;
  const auto held = std::make_shared<HeldReset>();
  fixture.hook = held;
  const auto clock = std::make_shared<ManualClock>();
  auto service = started(fixture, nullptr, clock);
  auto vm = create_vm(*service, fixture.request("tenant-a", kOneGpu));
  REQUIRE_MESSAGE(vm.ok(), vm.error().message);
  const auto devices = vm->record->allocation.devices;
  const auto gpu = devices.front();
  held->hold(gpu);
  const EventsOfKind cleanings(*service, service::ServiceEvent::Kind::cleaning);
  const EventsOfKind quarantines(*service, service::ServiceEvent::Kind::quarantine);
  REQUIRE(delete_vm(*service, vm_name("tenant-a")).ok());
  // The others cleaned, and the held one in its reset: only its deadline is then to pass.
  REQUIRE(cleanings.wait_for([&](const std::vector<service::ServiceEvent>& events) {
    const auto cleaned = std::count_if(events.begin(), events.end(), [](const auto& e) { return e.cleaned; });
    return reset_begun(events, gpu) && cleaned == static_cast<std::ptrdiff_t>(devices.size() - 1);
  }));
  CHECK(service->quarantined().empty());
  clock->advance_steady(std::chrono::minutes(2));
  REQUIRE(quarantines.wait_for([](const auto& events) { return !events.empty(); }));
  const auto quarantined = service->quarantined();
  REQUIRE(quarantined.size() == 1);
  CHECK(quarantined.front().address == gpu);
  CHECK(quarantined.front().step == "reset");
  held->gate.open();  // the hook returns at last, to a run the lifecycle has let go
  CHECK(service->quarantined().size() == 1);
}

// A stop while a reset never returns: the daemon waits for it until its deadline, no longer, leaves
// it to the kernel, and the device, still marked, is cleaned again at the next start.
TEST_CASE("a stop during a reset that never returns waits only until its deadline, and the next start cleans it") {
  DaemonFixture fixture;
  fixture.devices()->libvirt_manages = false;
  const auto stop_seen = std::make_shared<StopSeen>();
  fixture.hook = stop_seen;
  const auto clock = std::make_shared<ManualClock>();
  auto service = started(fixture, nullptr, clock);
  const auto gpu = one_gpu_vm(fixture, *service, "tenant-a");
  set_stuck(fixture, {gpu});
  {
    const EventsOfKind cleanings(*service, service::ServiceEvent::Kind::cleaning);
    REQUIRE(delete_vm(*service, vm_name("tenant-a")).ok());
    REQUIRE(
        cleanings.wait_for([&](const std::vector<service::ServiceEvent>& events) { return reset_begun(events, gpu); }));
  }
  // The stop, on a thread of its own: it waits for the reset; once it does, the deadline passes.
  std::thread stopping([&service] { service.reset(); });
  REQUIRE(stop_seen->wait());
  clock->advance_steady(std::chrono::minutes(2));
  stopping.join();
  set_stuck(fixture, {});  // the reset returns at last, to a lifecycle that is gone: it touches nothing

  fixture.hook = nullptr;
  auto again = started(fixture, nullptr, clock);
  wait_until_cleaned(*again);
  const auto history = again->device_history(gpu);
  REQUIRE(history.ok());
  REQUIRE_FALSE(history->cleanings.empty());
  CHECK(history->cleanings.back().outcome == "clean");
  CHECK(history->cleanings.back().vm == "tenant-a");
  CHECK(again->quarantined().empty());
}

// Issue 43, defect 1: vela2's boot NVMe is mounted at /; a request to clean it must not reach a step.
TEST_CASE("an operator's cleaning of a device the host uses is refused, naming the use, and nothing runs") {
  DaemonFixture fixture;
  auto service = started(fixture);
  const auto host = service->host_now();
  const auto boot = std::find_if(host.pci_devices.begin(), host.pci_devices.end(), [](const numa::PciFunction& f) {
    return f.role == numa::PciRole::nvme && f.host_use.has_value();
  });
  REQUIRE(boot != host.pci_devices.end());
  const auto before = cleaned(fixture).size();
  const auto refused = service->clean_device(boot->address, "uid:0");
  REQUIRE_FALSE(refused.ok());
  CHECK(refused.error().code == ErrorCode::conflict);
  CHECK_MESSAGE(refused.error().message == "device " + boot->address.to_string() + " is the host's (" +
                                               *boot->host_use +
                                               "): hostagent never resets, erases or scrubs a device the host uses",
                refused.error().message);
  CHECK(service->cleaning().empty());
  CHECK(cleaned(fixture).size() == before);
}

TEST_CASE("an operator cleans a quarantined device again: it is free only once a cleaning passes") {
  DaemonFixture fixture;
  auto service = started(fixture);
  const auto gpu = one_gpu_vm(fixture, *service, "tenant-a");

  const auto held = service->clean_device(gpu, "uid:0");
  REQUIRE_FALSE(held.ok());
  CHECK(held.error().code == ErrorCode::conflict);
  CHECK(held.error().message.find("held by vm tenant-a") != std::string::npos);
  const auto unknown = service->clean_device(*PciAddress::parse("0000:ee:00.0"), "uid:0");
  REQUIRE_FALSE(unknown.ok());
  CHECK(unknown.error().code == ErrorCode::not_found);

  {
    std::lock_guard lock(fixture.devices()->mutex);
    fixture.devices()->failing_step[gpu] = "reset";
  }
  REQUIRE(delete_vm(*service, vm_name("tenant-a")).ok());
  REQUIRE(service->quarantined().size() == 1);
  CHECK(service->quarantined().front().step == "reset");
  // Still broken: cleaned again, quarantined again.
  REQUIRE(service->clean_device(gpu, "uid:0").ok());
  REQUIRE(service->quarantined().size() == 1);
  {
    std::lock_guard lock(fixture.devices()->mutex);
    fixture.devices()->failing_step.clear();
    fixture.devices()->skipped_step[gpu] = "firmware";
  }
  const auto again = service->clean_device(gpu, "uid:0");
  REQUIRE_MESSAGE(again.ok(), again.error().message);
  CHECK(again->vm.empty());
  CHECK(service->quarantined().empty());
  CHECK(service->cleaning().empty());
  const auto history = service->device_history(gpu);
  REQUIRE(history.ok());
  REQUIRE(history->cleanings.size() == 3);
  CHECK(history->cleanings[1].outcome == "quarantined");
  CHECK(history->cleanings[2].outcome == "clean");
  // A step skipped is kept, with why: the device view shows it as its last cleaning's mark.
  CHECK(history->cleanings[2].steps[1].result == "skipped");
  CHECK(service->last_cleanings().at(gpu).steps[1].detail == "not firmwareed");
}

TEST_CASE("a history whose evidence chain was changed says where it breaks") {
  DaemonFixture fixture;
  auto service = started(fixture);
  const auto gpu = one_gpu_vm(fixture, *service, "tenant-a");
  REQUIRE(delete_vm(*service, vm_name("tenant-a")).ok());
  const auto log = fixture.scratch() / "state" / "cleaning_evidence.jsonl";
  std::string text;
  {
    std::ifstream in(log);
    text.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  }
  // Someone rewrites the first cleaning's VM: its digest no longer matches what the next line carries.
  const auto at = text.find("tenant-a");
  REQUIRE(at != std::string::npos);
  text.replace(at, 8, "tenant-z");
  std::ofstream(log, std::ios::trunc) << text;
  const auto history = service->device_history(gpu);
  REQUIRE(history.ok());
  CHECK_MESSAGE(history->chain_broken.find("line 2") != std::string::npos, history->chain_broken);
}

TEST_CASE("a quarantine cleared on a device a tenant held sends it through cleaning, not straight to the next VM") {
  DaemonFixture fixture;
  fixture.devices()->libvirt_manages = false;
  auto service = started(fixture);
  const auto gpu = one_gpu_vm(fixture, *service, "tenant-a");
  // Found broken while the tenant held it (the health poller's account, as its sink reports it).
  {
    std::lock_guard lock(fixture.devices()->mutex);
    REQUIRE(fixture.devices()->sink);
    fixture.devices()->sink(devices::DeviceFault{gpu, "tenant-a", "health", "gone from the bus"});
  }
  REQUIRE(delete_vm(*service, vm_name("tenant-a")).ok());
  wait_until_cleaned(*service);  // its VF; the GPU, quarantined, is not cleaned
  REQUIRE(service->quarantined().size() == 1);
  const HeldCleaning held(fixture);
  REQUIRE(service->clear_quarantine(gpu, "uid:0").ok());
  CHECK(service->quarantined().empty());
  const auto waiting = service->cleaning();
  REQUIRE(waiting.size() == 1);
  CHECK(waiting.front().address == gpu);
  CHECK(waiting.front().vm == "tenant-a");
  CHECK(service->usage().policy.withheld.count(gpu) == 1);
  held.release();
  wait_until_cleaned(*service);
  CHECK(service->usage().policy.withheld.count(gpu) == 0);
  CHECK(service->device_history(gpu)->cleanings.back().vm == "tenant-a");
}

}  // namespace
}  // namespace hostagent::testing
