// Test fixtures for the daemon: a service on libvirt's in-process test:/// driver and a simulated
// host, plus hypervisor, preparer and clock doubles that fail or stall on request. The doubles wrap
// the real test:/// hypervisor: everything they do not fail reaches real libvirt.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "assembly.hpp"
#include "hostagent/daemon/host_readers.hpp"
#include "hostagent/daemon/step_hook.hpp"
#include "hostagent/service/vm_service.hpp"
#include "simulated_hosts.hpp"
#include "test_support.hpp"

namespace hostagent::testing {

// Forwards to a real hypervisor, except the calls told to fail.
class FaultyHypervisor final : public virt::Hypervisor {
 public:
  explicit FaultyHypervisor(std::unique_ptr<virt::Hypervisor> real) : real_(std::move(real)) {}

  // The next calls of `method` ("define", "start_paused", "resume", "undefine", ...) fail with this error; `times`
  // < 0 fails every call.
  void fail(const std::string& method, ErrorCode code, int times = -1);
  // shutdown() asks nothing of the guest: a guest that ignores the ACPI button.
  void ignore_shutdown() { ignore_shutdown_ = true; }
  // connected() answers false while set, as it does while libvirtd is away.
  void report_disconnected(bool disconnected) { disconnected_ = disconnected; }
  int calls(const std::string& method) const;
  // Serves each running domain a serial console, as libvirt's QEMU driver does and its test driver
  // does not: one stream per domain (a second open is conflict unless forced, which ends the first
  // stream: its `ended` sink hears why), the domain running, `released` once the Console goes.
  void serve_consoles() { serve_consoles_ = true; }
  // The guest writes on its console (nothing when none is open).
  void console_output(const std::string& vm, std::string_view bytes);
  // Everything typed into the VM's console so far, and the opens that were forced.
  std::string console_input(const std::string& vm) const;
  int forced_console_opens() const;
  // Until what was typed into the VM's console ends with `suffix`, or every Console it handed out is
  // gone (the daemon let go of each stream); false after `bound` without it. Each is told by the
  // event itself (a send, a Console's destruction).
  bool wait_console_input(const std::string& vm, const std::string& suffix, std::chrono::seconds bound) const;
  bool wait_consoles_closed(std::chrono::seconds bound) const;

  void subscribe(virt::DomainEventSink on_domain, virt::ConnectionEventSink on_connection) override {
    real_->subscribe(std::move(on_domain), std::move(on_connection));
  }
  bool connected() const override { return !disconnected_ && real_->connected(); }
  Result<std::string> define(const std::string& xml) override;
  Status start(const std::string& name) override;
  Status start_paused(const std::string& name) override;
  Status resume(const std::string& name) override;
  Status agent_ping(const std::string& name) override;
  Result<std::string> create_transient(const std::string& xml) override { return real_->create_transient(xml); }
  Status shutdown(const std::string& name) override;
  Status destroy(const std::string& name) override;
  Status reboot(const std::string& name) override;
  Status undefine(const std::string& name) override;
  Result<virt::DomainSummary> lookup(const std::string& name) override { return real_->lookup(name); }
  Result<std::vector<virt::DomainSummary>> list() override { return real_->list(); }
  Result<std::vector<virt::DomainStats>> all_stats() override;
  Result<std::string> domain_xml(const std::string& name) override { return real_->domain_xml(name); }
  Result<virt::StackVersions> versions() override { return real_->versions(); }
  Result<std::unique_ptr<virt::Console>> open_console(const std::string& name, bool force,
                                                      virt::ConsoleSinks sinks) override;
  Result<std::string> volume_path(const std::string& pool, const std::string& volume) override {
    return real_->volume_path(pool, volume);
  }
  Result<std::string> create_overlay(const std::string& pool, const std::string& volume,
                                     const std::string& backing) override;
  Status delete_volume(const std::string& pool, const std::string& volume) override;
  Result<std::vector<std::string>> list_volumes(const std::string& pool) override { return real_->list_volumes(pool); }

 private:
  std::optional<Error> injected(const std::string& method);

  std::unique_ptr<virt::Hypervisor> real_;
  mutable std::mutex mutex_;
  std::map<std::string, std::pair<ErrorCode, int>> failures_;
  std::map<std::string, int> calls_;
  bool ignore_shutdown_ = false;
  std::atomic<bool> disconnected_{false};
  // Consoles: the open stream of each domain (guarded by mutex_).
  class FakeConsole;
  struct ConsoleLine {
    std::uint64_t stream = 0;  // the open stream's id; 0: none
    virt::ConsoleSinks sinks;
    std::string input;
  };
  bool serve_consoles_ = false;
  std::map<std::string, ConsoleLine> consoles_;
  std::map<std::uint64_t, std::function<void()>> released_;  // each stream's, until its Console goes
  int open_consoles_ = 0;                                    // Consoles handed out and not yet gone
  mutable std::condition_variable consoles_changed_;         // input typed, or a Console gone
  std::uint64_t next_stream_ = 1;
  int forced_ = 0;
};

// Records what it prepared; fails prepare or release on request.
class RecordingPreparer final : public devices::DevicePreparer {
 public:
  struct Shared {
    std::mutex mutex;
    std::set<std::string> prepared;  // VMs with devices prepared
    bool fail_prepare = false;
    bool fail_release = false;
    int failed_releases = 0;  // releases refused by fail_release
    // VMs whose prepared devices a host reboot (or a PF driver reload) undid: reapply puts them back.
    std::set<std::string> undone;
    std::vector<std::string> reapplied;  // every reapply, in order, by VM
    bool fail_reapply = false;
    // The next prepare fails as a bind the kernel refused would: the placement's first GPU (else its
    // first device) is reported to the fault sink, then the prepare fails.
    bool fault_first_device = false;
    devices::DeviceFaultSink sink;
    // false: the daemon cleans on its cleaning thread, as on a host whose devices it prepares itself
    bool libvirt_manages = true;
    std::vector<PciAddress> cleaned;                 // every cleaning's device, in order
    std::map<PciAddress, std::string> failing_step;  // a device's cleaning fails at this step
    std::map<PciAddress, std::string> skipped_step;  // ... or skips it, saying so
    // While true, a cleaning's first step waits (on `released`) before it runs: a cleaning under way.
    bool hold_cleaning = false;
    // ... and a device listed here waits there until it is taken off: a reset that does not return.
    std::set<PciAddress> stuck;
    int resets_waiting = 0;  // resets begun and held by the two above, now; `released` tells each change
    std::condition_variable released;
  };
  explicit RecordingPreparer(std::shared_ptr<Shared> shared) : shared_(std::move(shared)) {}
  bool libvirt_manages_hostdevs() const override;
  void report_faults_to(devices::DeviceFaultSink sink) override;
  Status prepare(const std::string& vm, const numa::Placement& placement,
                 const devices::DeviceRequest& request) override;
  Result<std::vector<std::string>> reapply(const std::string& vm, const numa::Allocation& held) override;
  Status release(const std::string& vm, const numa::Allocation& held) override;
  Result<std::vector<std::string>> release_unheld(const std::vector<numa::Allocation>& held) override;
  // reset, then firmware: each passes unless Shared says otherwise.
  std::vector<devices::CleaningStep> cleaning_steps(const numa::PciFunction& function) override;

 private:
  std::shared_ptr<Shared> shared_;
};

// Real wall clock, moved on by advance_wall(); a steady clock that only moves when slept on, so
// timeouts pass instantly, or when advance_steady() moves it, which wakes whoever waits for a
// deadline (wait_until): a deadline passes when the test says so, never by the test's own speed.
class ManualClock final : public daemon::Clock {
 public:
  std::chrono::system_clock::time_point now() override;
  void advance_wall(std::chrono::seconds by);
  std::chrono::steady_clock::time_point steady_now() override;
  void sleep_for(std::chrono::milliseconds duration) override;
  std::chrono::milliseconds slept() const;
  void wait_until(std::condition_variable& changed, std::unique_lock<std::mutex>& lock,
                  std::chrono::steady_clock::time_point deadline, const std::function<bool()>& done) override;
  void advance_steady(std::chrono::milliseconds by);
  // advance_steady, then waits until each thread that was waiting on this clock waits again with a
  // deadline still ahead (or has stopped waiting for good): what a deadline woke has run and is
  // idle again, so the test reads its effect without sleeping. False after 60 s of real time.
  bool advance_and_settle(std::chrono::milliseconds by);

 private:
  struct Waiter {
    std::condition_variable* changed;
    std::mutex* mutex;
    std::chrono::steady_clock::time_point deadline;
  };
  bool settled_locked() const;

  mutable std::mutex mutex_;
  std::condition_variable waiting_changed_;  // a waiter came or went
  std::chrono::steady_clock::time_point now_{};
  std::chrono::milliseconds slept_{0};
  std::chrono::seconds wall_offset_{0};
  std::vector<Waiter> waiters_;
};

// Shipped templates the suites create from: one, two and eight H100s.
inline constexpr const char* kOneGpu = "gx3-16x128x1h100";
inline constexpr char kTwoGpus[] = "gx3-32x256x2h100";
inline constexpr const char* kEightGpus = "gx3d-160x1792x8h100";

// A daemon on test:///default and a simulated host, its state in a scratch directory that outlives
// restarts (so a second service started on it reconciles what the first left).
class DaemonFixture {
 public:
  explicit DaemonFixture(const std::string& simulated_host = "vela2");
  ~DaemonFixture();

  // Extra template directories searched after the shipped ones.
  void add_template_dir(const std::filesystem::path& dir) { template_dirs_.push_back(dir); }
  config::DaemonConfig config() const;
  // A create request with a boot image of the fixture's (a sparse raw file: the simulated host has
  // no OS images, and the templates ask for one).
  service::CreateVmRequest request(const std::string& name, const std::string& template_name) const;

  // Starts a service; `faulty` and `preparer` (when non-null) receive the doubles it runs with.
  // The service's step hook (daemon/step_hook): null, none.
  std::shared_ptr<daemon::StepHook> hook;
  Result<std::unique_ptr<service::VmService>> start(FaultyHypervisor** faulty = nullptr,
                                                    const std::shared_ptr<ManualClock>& clock = nullptr);
  std::shared_ptr<RecordingPreparer::Shared> devices() const { return devices_; }
  // libvirt itself, as another of its clients: what is done here is done outside hostagent.
  virt::Hypervisor& libvirt() const;
  // The host's boot the services run in (ServiceParts::boot_id): a test reboots the host by changing it.
  std::string boot_id = "2b5e0c1a-0000-4000-8000-000000000001";
  std::string on_host_boot = "restore";               // operations.on_host_boot
  int parallel_cleanings = 0;                         // hygiene.parallel
  std::vector<config::HugepagePoolConfig> hugepages;  // host.hugepages
  config::PlacementConfig placement;                  // the placement section
  numa::HealthThresholds health;                      // devices.health
  // How often the service reads device health again (ServiceParts::device_health_interval).
  std::chrono::milliseconds device_health_interval{10000};
  // Changes the readers the composition root made (ServiceParts::readers) before the service
  // starts: a test varies what the daemon reads of the host without writing its sysfs tree.
  std::function<void(daemon::HostReaders&)> change_readers;
  const std::filesystem::path& scratch() const { return scratch_.path(); }
  // The simulated host's sysfs tree the services read, at the state directory's simulated-host:
  // shared with other tests and read only (SharedHostTree checks it when the fixture ends) unless
  // the test calls this before its first start, and it must when it writes the tree. A fixture
  // with `hugepages` gets a tree of its own too: the daemon raises the pools in it. Returns its path.
  std::filesystem::path own_host_tree();
  // The journal's entries on disk.
  std::vector<std::filesystem::path> journal_files() const;

 private:
  std::filesystem::path host_tree() const;
  void link_shared_tree();

  std::string simulated_host_;
  TempDir scratch_;
  bool own_tree_ = false;
  std::optional<SharedHostTree> shared_tree_;  // the tree the services read, when shared
  std::vector<std::filesystem::path> template_dirs_;
  std::shared_ptr<RecordingPreparer::Shared> devices_ = std::make_shared<RecordingPreparer::Shared>();
};

// The service's events of one kind, published while it lives, in order.
class EventsOfKind {
 public:
  EventsOfKind(service::VmService& service, service::ServiceEvent::Kind kind);
  ~EventsOfKind();
  EventsOfKind(const EventsOfKind&) = delete;
  EventsOfKind& operator=(const EventsOfKind&) = delete;
  std::vector<service::ServiceEvent> events() const;
  // Until `done` holds of the events so far, told by each event; false after 60 s without it (a
  // bound for a failing test, never a wait the passing one relies on).
  bool wait_for(const std::function<bool(const std::vector<service::ServiceEvent>&)>& done) const;

 private:
  service::VmService& service_;
  uint64_t id_ = 0;
  mutable std::mutex mutex_;
  mutable std::condition_variable arrived_;
  std::vector<service::ServiceEvent> events_;
};

// fixture.start(...) that fails the test case, with the service's message, when the service does not start.
std::unique_ptr<service::VmService> started(DaemonFixture& fixture, FaultyHypervisor** faulty = nullptr,
                                            const std::shared_ptr<ManualClock>& clock = nullptr);

// The operation once it has ended (and its events are published); fails the test case on an
// unknown id.
service::OperationView wait_for(service::VmService& service, const std::string& id);

// Waits for every operation the service holds; then the managed VMs' states by name.
std::map<std::string, std::string> settled(service::VmService& service);

// Domains named `prefix`* that libvirt's test:///default holds right now (it is shared by every
// connection in the process).
std::vector<std::string> test_driver_domains(const std::string& prefix);
// A domain's XML as libvirt's test:///default holds it.
std::string test_driver_xml(const std::string& name);

}  // namespace hostagent::testing
