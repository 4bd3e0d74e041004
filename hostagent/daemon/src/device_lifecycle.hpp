// daemon/device_lifecycle (private): where each passthrough device is in its life between tenants
// (issue 19), the one owner of that state: free, held by a VM (the ledger's), cleaning, or
// quarantined. A device is marked `cleaning` on disk before a VM is given it, so however the VM
// lets it go (a delete, a rollback, a crash, a domain undefined behind hostagent's back) it is not
// placed again until its cleaning has passed: once no VM holds it, its steps (devices/device_cleaning)
// run on a thread of its own, beside the other devices' (hygiene.parallel at a time), each within
// its deadline (hygiene.deadlines), watched by this class's supervisor thread; their evidence goes
// to the hash-chained log (state/cleaning_evidence), and it is then free, or quarantined with the
// step that failed or ran past its deadline (that step's thread is left to it, holding nothing). A
// device the kernel would not bind, or one gone from the bus, is quarantined too. Each change is
// written to disk first (state/device_states), then told to the ledger, which placement reads,
// then logged and published: a crash between the two errs on keeping the device out.
#pragma once

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
#include <thread>
#include <vector>

#include "event_hub.hpp"
#include "health_gate.hpp"
#include "hostagent/common/result.hpp"
#include "hostagent/config/daemon_config.hpp"
#include "hostagent/daemon/clock.hpp"
#include "hostagent/daemon/step_hook.hpp"
#include "hostagent/devices/device_preparer.hpp"
#include "hostagent/numa/device_health.hpp"
#include "hostagent/service/vm_service.hpp"
#include "hostagent/state/cleaning_evidence.hpp"
#include "hostagent/state/device_states.hpp"
#include "ledger.hpp"

namespace hostagent::daemon {

// A cleaning step's deadline for a device of `role`: hygiene.deadlines where it names one, else the
// default: a reset 2 minutes (the kernel waits up to 60 s for a function to answer after an FLR or
// a bus reset, PCIE_RESET_READY_POLL_MS, and hostagent's own check polls after it), a ROM read or a
// VF read back 1 minute, an erase the NVMe erase's own bound and 5 minutes for its read back, a
// scrub the scrubber's timeout and 1 minute for its kill.
std::chrono::milliseconds cleaning_deadline(const config::HygieneConfig& hygiene, numa::PciRole role,
                                            const std::string& step);

class DeviceLifecycle {
 public:
  struct Parts {
    std::filesystem::path states_file;    // state/device_states
    std::filesystem::path evidence_file;  // state/cleaning_evidence
    const numa::HostModel& host;
    devices::DevicePreparer& devices;  // whose steps clean a device
    Ledger& ledger;
    EventHub& events;
    Clock& clock;
    // Called before each cleaning step as operation "clean" of the device's address: the crash
    // tests' seam (daemon/step_hook); null in production. Shared with each run: a step left to
    // itself past its deadline may still be in the hook when the daemon stops.
    std::shared_ptr<StepHook> hook = nullptr;
    // Whether the device is on the bus now (its sysfs directory exists): a device still gone is
    // neither cleared nor cleaned, which would put it back in placement until the health poller
    // saw it gone again. Null: not asked (a host not read from sysfs).
    std::function<bool(const PciAddress&)> on_bus = {};
    // hygiene.parallel and hygiene.deadlines: how many devices are cleaned at a time, and each
    // step's deadline (cleaning_deadline).
    config::HygieneConfig hygiene = {};
    // devices.health: when a device's AER counters or link take it out of placement (health_gate).
    numa::HealthThresholds health = {};
  };
  explicit DeviceLifecycle(Parts parts);
  ~DeviceLifecycle();  // stops the cleaning thread, if started, and joins it
  DeviceLifecycle(const DeviceLifecycle&) = delete;
  DeviceLifecycle& operator=(const DeviceLifecycle&) = delete;

  // Reads the states earlier runs left and the evidence log (a torn last line cut), and tells the
  // ledger; an unreadable file stops the start.
  Status load();
  // Once reconcile has told the ledger who holds what: cleans what is waiting (a cleaning a crash
  // or a restart cut short is run again), then whatever is released after, on a thread of its own.
  void start();

  // Before `vm` is given `devices`: each not yet listed is marked cleaning, durably. An error when
  // the file cannot be written: the VM must not get a device that could be freed uncleaned.
  Status mark_used(const std::string& vm, const std::vector<PciAddress>& devices);
  // What the ledger holds, marked so (at reconcile: VMs from before the lifecycle existed, and
  // domains hostagent did not make). A file that cannot be written is logged.
  void mark_held(const std::vector<numa::Allocation>& held);
  // A VM let its devices go: cleaned now on a host where every step is skipped (libvirt's managed
  // hostdevs: a create after a delete is not kept waiting), else on the cleaning thread.
  void released();

  // Quarantines a device, unless it already is: the first failure's account is the one kept. A
  // file that cannot be written is logged, and the device is kept out for this run all the same.
  void quarantine(const PciAddress& address, const std::string& step, const std::string& reason, const std::string& vm);
  // Each device of `health` of a role a VM takes (GPU, NVSwitch, NIC, NVMe) that is gone from the
  // bus, or whose AER counters or link break devices.health (health_gate), with the VM holding it
  // named where one does: that VM runs on with it; no other is given it until an operator clears it.
  void note_health(const std::vector<numa::DeviceHealth>& health);
  // not_found when the device is not quarantined; a file that cannot be written changes nothing. A
  // device a VM held, or was being given, goes back through cleaning; any other is free at once.
  Result<service::QuarantineView> clear(const PciAddress& address, const std::string& principal);
  std::vector<service::QuarantineView> quarantined() const;

  std::vector<service::CleaningView> cleaning() const;
  // An operator's: clean a free or quarantined device again (VmService::clean_device).
  Result<service::CleaningView> request_cleaning(const PciAddress& address, const std::string& principal);
  Result<service::DeviceHistoryView> history(const PciAddress& address) const;
  std::map<PciAddress, service::CleaningRecordView> last_cleanings() const;

 private:
  struct Run;     // one device's cleaning, on a thread of its own (device_lifecycle.cpp)
  struct Shared;  // what the cleaning threads and the supervisor share
  // One device's cleaning run, its evidence not yet written.
  struct Cleaned {
    state::DeviceStateEntry entry;
    state::CleaningEvidence evidence;
  };
  using Runs = std::map<PciAddress, std::shared_ptr<Run>>;
  void clean_waiting();
  std::vector<state::DeviceStateEntry> waiting(const std::set<PciAddress>& leave_out);
  std::shared_ptr<Run> make_run(const state::DeviceStateEntry& entry);
  // A device's steps, in order, on the calling thread: each told to the supervisor as it begins
  // and ends, none begun once the daemon stops, nothing touched after a step given up on.
  static void run_cleaning(const std::shared_ptr<Run>& run, const std::shared_ptr<Shared>& shared);
  void start_runs(Runs& runs, const std::set<PciAddress>& tried);
  bool supervise(Runs& runs, std::set<PciAddress>& tried, std::chrono::steady_clock::time_point retry_at);
  void finish_runs(Runs& runs, const std::vector<std::shared_ptr<Run>>& done,
                   const std::vector<std::shared_ptr<Run>>& late);
  void stop_runs(Runs& runs);
  std::chrono::milliseconds step_limit(const Run& run) const;
  std::chrono::steady_clock::time_point next_deadline_locked(const Runs& runs,
                                                             std::chrono::steady_clock::time_point retry_at) const;
  void conclude(const std::vector<Cleaned>& cleaned);
  void log_clean(const Cleaned& cleaned, const service::CleaningRecordView& view);
  void set_running(const PciAddress& address, const std::string& step);
  Status write_locked(std::vector<state::DeviceStateEntry> next);
  void tell_ledger_locked();
  service::CleaningView cleaning_view_locked(const state::DeviceStateEntry& entry,
                                             const std::set<PciAddress>& held) const;
  void publish_quarantine(const PciAddress& address, const std::optional<service::QuarantineView>& entry,
                          std::optional<service::ReleaseCleaningView> release = std::nullopt);
  void publish_cleaning(const PciAddress& address, const std::string& vm, std::optional<service::CleaningView> cleaning,
                        std::optional<service::CleaningRecordView> cleaned,
                        std::optional<service::ReleaseCleaningView> release = std::nullopt);
  // One VM's devices let go together, from the first seen waiting to the last cleaned or quarantined.
  struct Release {
    std::chrono::steady_clock::time_point began;
    std::set<PciAddress> left;  // still cleaning
    std::size_t devices = 0;    // ended
    double steps_seconds = 0;   // the steps of those ended, summed
  };
  void note_waiting_locked(const state::DeviceStateEntry& entry);
  std::optional<service::ReleaseCleaningView> end_in_release_locked(const std::string& vm, const PciAddress& address,
                                                                    double steps_seconds);
  void log_release(const std::string& vm, const service::ReleaseCleaningView& release);
  void run_thread();
  Status check_on_bus(const PciAddress& address, const std::string& what) const;

  Parts parts_;
  HealthGate health_gate_{parts_.health};
  std::unique_ptr<state::EvidenceLog> evidence_;
  mutable std::mutex mutex_;  // taken before the ledger's, never after; never with Shared's
  std::vector<state::DeviceStateEntry> devices_;
  std::map<PciAddress, std::string> running_;  // each device being cleaned: its step now
  std::map<PciAddress, service::CleaningRecordView> last_;
  std::map<std::string, Release> releases_;  // by VM: its release's devices still cleaning
  std::mutex managed_mutex_;                 // libvirt's managed hostdevs: one pass of clean_waiting at a time
  std::shared_ptr<Shared> shared_;
  std::thread thread_;
};

}  // namespace hostagent::daemon
