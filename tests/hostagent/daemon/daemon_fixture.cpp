// Daemon test fixtures.
#include "daemon_fixture.hpp"

#include <doctest/doctest.h>

#include <algorithm>
#include <fstream>

#include "hostagent/state/vm_record.hpp"

namespace hostagent::testing {

namespace fs = std::filesystem;

std::optional<Error> FaultyHypervisor::injected(const std::string& method) {
  std::lock_guard lock(mutex_);
  ++calls_[method];
  const auto it = failures_.find(method);
  if (it == failures_.end() || it->second.second == 0) return std::nullopt;
  if (it->second.second > 0) --it->second.second;
  return Error{it->second.first, "injected failure of " + method};
}

void FaultyHypervisor::fail(const std::string& method, ErrorCode code, int times) {
  std::lock_guard lock(mutex_);
  failures_[method] = {code, times};
}

int FaultyHypervisor::calls(const std::string& method) const {
  std::lock_guard lock(mutex_);
  const auto it = calls_.find(method);
  return it == calls_.end() ? 0 : it->second;
}

#define HA_FORWARD(method, ...)                      \
  if (auto error = injected(#method)) return *error; \
  return real_->method(__VA_ARGS__)

Result<std::string> FaultyHypervisor::define(const std::string& xml) {
  HA_FORWARD(define, xml);
}
Status FaultyHypervisor::start(const std::string& name) {
  HA_FORWARD(start, name);
}
Status FaultyHypervisor::start_paused(const std::string& name) {
  HA_FORWARD(start_paused, name);
}
Status FaultyHypervisor::resume(const std::string& name) {
  HA_FORWARD(resume, name);
}
Status FaultyHypervisor::agent_ping(const std::string& name) {
  HA_FORWARD(agent_ping, name);
}

class FaultyHypervisor::FakeConsole final : public virt::Console {
 public:
  FakeConsole(FaultyHypervisor& owner, std::string vm, std::uint64_t stream)
      : owner_(owner), vm_(std::move(vm)), stream_(stream) {}
  ~FakeConsole() override {
    std::function<void()> released;
    {
      const std::lock_guard lock(owner_.mutex_);
      auto& line = owner_.consoles_[vm_];
      if (line.stream == stream_) {
        line.stream = 0;
        line.sinks = {};
      }
      released = std::move(owner_.released_[stream_]);
      owner_.released_.erase(stream_);
    }
    if (released) released();
    {
      const std::lock_guard lock(owner_.mutex_);
      --owner_.open_consoles_;  // after `released`: a waiter sees the daemon's registry let go too
    }
    owner_.consoles_changed_.notify_all();
  }
  FakeConsole(const FakeConsole&) = delete;
  FakeConsole& operator=(const FakeConsole&) = delete;

  // The fake guest reads at once: everything is taken.
  std::size_t send(std::string_view bytes) override {
    const std::lock_guard lock(owner_.mutex_);
    auto& line = owner_.consoles_[vm_];
    if (line.stream != stream_) return 0;  // ended: forced away
    line.input.append(bytes);
    owner_.consoles_changed_.notify_all();
    return bytes.size();
  }

 private:
  FaultyHypervisor& owner_;
  const std::string vm_;
  const std::uint64_t stream_;
};

Result<std::unique_ptr<virt::Console>> FaultyHypervisor::open_console(const std::string& name, bool force,
                                                                      virt::ConsoleSinks sinks) {
  if (auto error = injected("open_console")) return *error;
  if (!serve_consoles_) return real_->open_console(name, force, std::move(sinks));
  HA_TRY(const auto domain, real_->lookup(name));
  if (domain.state != virt::DomainState::running) {
    return Error{ErrorCode::conflict, "open the serial console of domain " + name + ": domain is not running"};
  }
  std::function<void(const std::string&)> forced_away;
  std::uint64_t stream = 0;
  {
    const std::lock_guard lock(mutex_);
    auto& line = consoles_[name];
    if (line.stream != 0) {
      if (!force) {
        return Error{ErrorCode::conflict, "open the serial console of domain " + name +
                                              ": another client holds it (Active console session exists)"};
      }
      ++forced_;
      forced_away = std::move(line.sinks.ended);  // libvirt aborts the old stream
    }
    stream = next_stream_++;
    ++open_consoles_;
    line.stream = stream;
    released_[stream] = std::move(sinks.released);
    line.sinks = std::move(sinks);
  }
  if (forced_away) forced_away("the console ended: another client forced it open");
  return std::unique_ptr<virt::Console>(new FakeConsole(*this, name, stream));
}

void FaultyHypervisor::console_output(const std::string& vm, std::string_view bytes) {
  std::function<void(std::string_view)> output;
  {
    const std::lock_guard lock(mutex_);
    const auto it = consoles_.find(vm);
    if (it == consoles_.end() || it->second.stream == 0) return;
    output = it->second.sinks.output;
  }
  if (output) output(bytes);
}

std::string FaultyHypervisor::console_input(const std::string& vm) const {
  const std::lock_guard lock(mutex_);
  const auto it = consoles_.find(vm);
  return it == consoles_.end() ? "" : it->second.input;
}

bool FaultyHypervisor::wait_console_input(const std::string& vm, const std::string& suffix,
                                          std::chrono::seconds bound) const {
  std::unique_lock lock(mutex_);
  return consoles_changed_.wait_for(lock, bound, [&] {
    const auto it = consoles_.find(vm);
    return it != consoles_.end() && it->second.input.ends_with(suffix);
  });
}

bool FaultyHypervisor::wait_consoles_closed(std::chrono::seconds bound) const {
  std::unique_lock lock(mutex_);
  return consoles_changed_.wait_for(lock, bound, [&] { return open_consoles_ == 0; });
}

int FaultyHypervisor::forced_console_opens() const {
  const std::lock_guard lock(mutex_);
  return forced_;
}

Status FaultyHypervisor::shutdown(const std::string& name) {
  if (auto error = injected("shutdown")) return *error;
  if (ignore_shutdown_) return ok_status();
  return real_->shutdown(name);
}
Result<std::vector<virt::DomainStats>> FaultyHypervisor::all_stats() {
  HA_FORWARD(all_stats);
}
Status FaultyHypervisor::destroy(const std::string& name) {
  HA_FORWARD(destroy, name);
}
Status FaultyHypervisor::reboot(const std::string& name) {
  HA_FORWARD(reboot, name);
}
Status FaultyHypervisor::undefine(const std::string& name) {
  HA_FORWARD(undefine, name);
}
Result<std::string> FaultyHypervisor::create_overlay(const std::string& pool, const std::string& volume,
                                                     const std::string& backing) {
  HA_FORWARD(create_overlay, pool, volume, backing);
}
Status FaultyHypervisor::delete_volume(const std::string& pool, const std::string& volume) {
  HA_FORWARD(delete_volume, pool, volume);
}
#undef HA_FORWARD

void RecordingPreparer::report_faults_to(devices::DeviceFaultSink sink) {
  std::lock_guard lock(shared_->mutex);
  shared_->sink = std::move(sink);
}

Status RecordingPreparer::prepare(const std::string& vm, const numa::Placement& placement,
                                  const devices::DeviceRequest& /*request*/) {
  std::unique_lock lock(shared_->mutex);
  if (shared_->fault_first_device) {
    shared_->fault_first_device = false;
    const auto devices = numa::allocation_of(vm, placement, 1ULL << 30U).devices;
    const PciAddress device = placement.gpus.empty() ? devices.at(0) : placement.gpus.front().gpu.address;
    const auto sink = shared_->sink;
    lock.unlock();  // as the real preparer: the sink runs with no lock of the preparer's held
    if (sink) sink(devices::DeviceFault{device, vm, "bind to vfio-pci", "injected: the device did not bind"});
    return Error{ErrorCode::io_error, "injected failure to bind " + device.to_string()};
  }
  if (shared_->fail_prepare) return Error{ErrorCode::io_error, "injected failure of prepare"};
  shared_->prepared.insert(vm);
  return ok_status();
}

Result<std::vector<std::string>> RecordingPreparer::reapply(const std::string& vm, const numa::Allocation& /*held*/) {
  std::lock_guard lock(shared_->mutex);
  shared_->reapplied.push_back(vm);
  if (shared_->fail_reapply) return Error{ErrorCode::conflict, "injected failure of reapply"};
  if (shared_->undone.erase(vm) == 0) return std::vector<std::string>{};
  return std::vector<std::string>{"devices of " + vm + " prepared again"};
}

Status RecordingPreparer::release(const std::string& vm, const numa::Allocation& /*held*/) {
  std::lock_guard lock(shared_->mutex);
  if (shared_->fail_release) {
    ++shared_->failed_releases;
    return Error{ErrorCode::io_error, "injected failure of release"};
  }
  shared_->prepared.erase(vm);
  return ok_status();
}

EventsOfKind::EventsOfKind(service::VmService& service, service::ServiceEvent::Kind kind) : service_(service) {
  id_ = service_.subscribe([this, kind](const service::ServiceEvent& event) {
    if (event.kind != kind) return;
    {
      std::lock_guard lock(mutex_);
      events_.push_back(event);
    }
    arrived_.notify_all();
  });
}

bool EventsOfKind::wait_for(const std::function<bool(const std::vector<service::ServiceEvent>&)>& done) const {
  std::unique_lock lock(mutex_);
  return arrived_.wait_for(lock, std::chrono::seconds(60), [&] { return done(events_); });
}

EventsOfKind::~EventsOfKind() {
  service_.unsubscribe(id_);
}

std::vector<service::ServiceEvent> EventsOfKind::events() const {
  std::lock_guard lock(mutex_);
  return events_;
}

bool RecordingPreparer::libvirt_manages_hostdevs() const {
  std::lock_guard lock(shared_->mutex);
  return shared_->libvirt_manages;
}

std::vector<devices::CleaningStep> RecordingPreparer::cleaning_steps(const numa::PciFunction& function) {
  const auto address = function.address;
  const auto step = [shared = shared_, address](const std::string& name) {
    return devices::CleaningStep{name, [shared, address, name] {
                                   std::lock_guard lock(shared->mutex);
                                   if (name == "reset") shared->cleaned.push_back(address);
                                   const auto fails = shared->failing_step.find(address);
                                   if (fails != shared->failing_step.end() && fails->second == name) {
                                     return devices::StepOutcome{devices::StepResult::failed, "injected: " + name};
                                   }
                                   const auto skips = shared->skipped_step.find(address);
                                   if (skips != shared->skipped_step.end() && skips->second == name) {
                                     return devices::StepOutcome{devices::StepResult::skipped, "not " + name + "ed"};
                                   }
                                   return devices::StepOutcome{devices::StepResult::passed, name + " recorded"};
                                 }};
  };
  auto reset = step("reset");
  reset.run = [shared = shared_, address, run = std::move(reset.run)] {
    {
      std::unique_lock lock(shared->mutex);
      ++shared->resets_waiting;
      shared->released.notify_all();
      shared->released.wait(lock, [&] { return !shared->hold_cleaning && shared->stuck.count(address) == 0; });
      --shared->resets_waiting;
    }
    shared->released.notify_all();
    return run();
  };
  return {std::move(reset), step("firmware")};
}

Result<std::vector<std::string>> RecordingPreparer::release_unheld(const std::vector<numa::Allocation>& held) {
  std::lock_guard lock(shared_->mutex);
  std::set<std::string> holders;
  for (const auto& allocation : held) holders.insert(allocation.vm);
  std::vector<std::string> released;
  for (auto it = shared_->prepared.begin(); it != shared_->prepared.end();) {
    if (holders.count(*it) != 0) {
      ++it;
      continue;
    }
    released.push_back("devices of " + *it);
    it = shared_->prepared.erase(it);
  }
  return released;
}

std::chrono::system_clock::time_point ManualClock::now() {
  std::lock_guard lock(mutex_);
  return std::chrono::system_clock::now() + wall_offset_;
}

void ManualClock::advance_wall(std::chrono::seconds by) {
  std::lock_guard lock(mutex_);
  wall_offset_ += by;
}

std::chrono::steady_clock::time_point ManualClock::steady_now() {
  std::lock_guard lock(mutex_);
  return now_;
}

void ManualClock::sleep_for(std::chrono::milliseconds duration) {
  std::lock_guard lock(mutex_);
  now_ += duration;
  slept_ += duration;
}

std::chrono::milliseconds ManualClock::slept() const {
  std::lock_guard lock(mutex_);
  return slept_;
}

void ManualClock::wait_until(std::condition_variable& changed, std::unique_lock<std::mutex>& lock,
                             std::chrono::steady_clock::time_point deadline, const std::function<bool()>& done) {
  {
    std::lock_guard own(mutex_);
    waiters_.push_back({&changed, lock.mutex(), deadline});
  }
  waiting_changed_.notify_all();
  changed.wait(lock, [&] { return done() || steady_now() >= deadline; });
  {
    std::lock_guard own(mutex_);
    waiters_.erase(
        std::find_if(waiters_.begin(), waiters_.end(), [&](const Waiter& w) { return w.changed == &changed; }));
  }
  waiting_changed_.notify_all();
}

bool ManualClock::settled_locked() const {
  return std::all_of(waiters_.begin(), waiters_.end(), [&](const Waiter& w) { return w.deadline > now_; });
}

bool ManualClock::advance_and_settle(std::chrono::milliseconds by) {
  std::size_t waiting = 0;
  {
    std::lock_guard own(mutex_);
    waiting = waiters_.size();
  }
  advance_steady(by);
  std::unique_lock own(mutex_);
  // Those the advance woke leave the list and come back with their next deadline; one that leaves
  // for good (its thread stopping) makes the count short, and the real-time bound ends the wait.
  return waiting_changed_.wait_for(own, std::chrono::seconds(60),
                                   [&] { return waiters_.size() >= waiting && settled_locked(); });
}

void ManualClock::advance_steady(std::chrono::milliseconds by) {
  std::vector<Waiter> waiters;
  {
    std::lock_guard own(mutex_);
    now_ += by;
    waiters = waiters_;
  }
  // Each waiter's own mutex taken and let go first: a waiter between its check and its wait holds
  // it, so the wake cannot fall in that gap.
  for (const auto& waiter : waiters) {
    { const std::lock_guard between(*waiter.mutex); }
    waiter.changed->notify_all();
  }
}

namespace {

// test:///default frees its domains when its last connection closes: one connection held for the
// fixture's lifetime keeps them across the services a test starts and stops (daemon "restarts").
std::unique_ptr<virt::Hypervisor>& anchor() {
  static std::unique_ptr<virt::Hypervisor> connection;
  return connection;
}

}  // namespace

DaemonFixture::DaemonFixture(const std::string& simulated_host) : simulated_host_(simulated_host) {
  if (!anchor()) {
    virt::LibvirtOptions options;
    options.uri = "test:///default";
    options.metadata_namespace = std::string(state::kMetadataNamespace);
    auto connection = virt::connect_libvirt(options);
    REQUIRE_MESSAGE(connection.ok(), connection.error().message);
    anchor() = std::move(connection).value();
  }
}

virt::Hypervisor& DaemonFixture::libvirt() const {
  return *anchor();
}

// test:///default outlives the fixture (the anchor keeps it): leave it as the driver starts, with
// its own "test" domain only, so the next test in this process starts clean.
DaemonFixture::~DaemonFixture() {
  auto domains = anchor()->list();
  if (domains.ok()) {
    for (const auto& domain : *domains) {
      if (domain.name == "test") continue;
      (void)anchor()->destroy(domain.name);
      (void)anchor()->undefine(domain.name);
    }
  }
  auto volumes = anchor()->list_volumes("default-pool");
  if (volumes.ok()) {
    for (const auto& volume : *volumes) (void)anchor()->delete_volume("default-pool", volume);
  }
}

service::CreateVmRequest DaemonFixture::request(const std::string& name, const std::string& template_name) const {
  // In the embedded default's images.directories: the one place a request's boot_image may lie.
  const auto image = scratch_.path() / "images" / "boot.raw";
  if (!fs::exists(image)) {
    fs::create_directories(image.parent_path());
    std::ofstream(image, std::ios::binary).close();
    fs::resize_file(image, 1ULL << 30);
  }
  return service::CreateVmRequest{.name = testing::vm_name(name),
                                  .template_name = testing::template_name(template_name),
                                  .boot_image = image.string()};
}

config::DaemonConfig DaemonFixture::config() const {
  auto config = config::embedded_default_config(simulated_host_, scratch_.path());
  config.template_directories = {hostagent::testing::shipped_templates_dir()};
  config.template_directories.insert(config.template_directories.end(), template_dirs_.begin(), template_dirs_.end());
  config.operation_workers = 8;
  config.on_host_boot = on_host_boot;
  config.hygiene.parallel = parallel_cleanings;
  config.host_hugepages = hugepages;
  config.placement = placement;
  config.devices.health = health;
  return config;
}

fs::path DaemonFixture::host_tree() const {
  return config().state_directory / "simulated-host";
}

fs::path DaemonFixture::own_host_tree() {
  REQUIRE_MESSAGE(!shared_tree_, "own_host_tree() after the first start: the services already read the shared tree");
  own_tree_ = true;
  return host_tree();
}

// The shared tree at the place the daemon writes its own: it finds simhost's stamp there and keeps
// it (ensure_sysfs_tree).
void DaemonFixture::link_shared_tree() {
  shared_tree_.emplace(simulated_host_);
  std::error_code ec;
  fs::create_directories(host_tree().parent_path(), ec);
  fs::create_directory_symlink(shared_tree_->root(), host_tree(), ec);
  REQUIRE_MESSAGE(!ec, "link " << host_tree().string() << ": " << ec.message());
}

Result<std::unique_ptr<service::VmService>> DaemonFixture::start(FaultyHypervisor** faulty,
                                                                 const std::shared_ptr<ManualClock>& clock) {
  REQUIRE_MESSAGE((hugepages.empty() || !shared_tree_),
                  "host.hugepages raises pools in the host's tree, which an earlier start shared: call "
                  "own_host_tree() before the first start");
  if (!own_tree_ && hugepages.empty() && !shared_tree_) link_shared_tree();
  HA_TRY(auto parts, cli::assemble_parts(config()));
  auto wrapper = std::make_unique<FaultyHypervisor>(std::move(parts.hypervisor));
  if (faulty != nullptr) *faulty = wrapper.get();
  parts.hypervisor = std::move(wrapper);
  parts.devices = std::make_unique<RecordingPreparer>(devices_);
  if (clock) parts.clock = clock;
  parts.hook = hook;
  parts.device_health_interval = device_health_interval;
  parts.boot_id = boot_id;
  if (change_readers) change_readers(parts.readers);
  return daemon::start_service(std::move(parts));
}

std::unique_ptr<service::VmService> started(DaemonFixture& fixture, FaultyHypervisor** faulty,
                                            const std::shared_ptr<ManualClock>& clock) {
  auto service = fixture.start(faulty, clock);
  REQUIRE_MESSAGE(service.ok(), service.error().message);
  return std::move(service).value();
}

std::vector<fs::path> DaemonFixture::journal_files() const {
  return files_in(scratch_.path() / "state" / "journal");
}

service::OperationView wait_for(service::VmService& service, const std::string& id) {
  auto ended = service.wait(id);
  REQUIRE_MESSAGE(ended.ok(), ended.error().message);
  return *ended;
}

std::map<std::string, std::string> settled(service::VmService& service) {
  for (const auto& operation : service.operations()) wait_for(service, operation.id);
  std::map<std::string, std::string> states;
  for (const auto& vm : service.list_vms()) {
    if (vm.managed) states[vm.name] = vm.state;
  }
  return states;
}

std::vector<std::string> test_driver_domains(const std::string& prefix) {
  std::vector<std::string> names;
  auto domains = anchor()->list();
  REQUIRE_MESSAGE(domains.ok(), domains.error().message);
  for (const auto& domain : *domains) {
    if (domain.name.rfind(prefix, 0) == 0) names.push_back(domain.name);
  }
  return names;
}

std::string test_driver_xml(const std::string& name) {
  auto xml = anchor()->domain_xml(name);
  REQUIRE_MESSAGE(xml.ok(), xml.error().message);
  return *xml;
}

}  // namespace hostagent::testing
