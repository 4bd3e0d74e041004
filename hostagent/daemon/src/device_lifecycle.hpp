// daemon/device_lifecycle (private): where each passthrough device is in its life between tenants
// (issue 19), the one owner of that state: free, held by a VM (the ledger's), cleaning, or
// quarantined. A device is marked `cleaning` on disk before a VM is given it, so however the VM
// lets it go (a delete, a rollback, a crash, a domain undefined behind hostagent's back) it is not
// placed again until its cleaning has passed: its steps (devices/device_cleaning) run on a thread
// of this class's once no VM holds it, their evidence goes to the hash-chained log
// (state/cleaning_evidence), and it is then free, or quarantined with the step that failed. A
// device the kernel would not bind, or one gone from the bus, is quarantined too. Each change is
// written to disk first (state/device_states), then told to the ledger, which placement reads,
// then logged and published: a crash between the two errs on keeping the device out.
#pragma once

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
#include "hostagent/common/result.hpp"
#include "hostagent/daemon/clock.hpp"
#include "hostagent/daemon/step_hook.hpp"
#include "hostagent/devices/device_preparer.hpp"
#include "hostagent/numa/device_health.hpp"
#include "hostagent/service/vm_service.hpp"
#include "hostagent/state/cleaning_evidence.hpp"
#include "hostagent/state/device_states.hpp"
#include "ledger.hpp"

namespace hostagent::daemon {

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
    // tests' seam (daemon/step_hook); null in production.
    StepHook* hook = nullptr;
    // Whether the device is on the bus now (its sysfs directory exists): a device still gone is
    // neither cleared nor cleaned, which would put it back in placement until the health poller
    // saw it gone again. Null: not asked (a host not read from sysfs).
    std::function<bool(const PciAddress&)> on_bus = {};
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
  // Each device of `health` that is gone from the bus, of a role a VM takes (GPU, NVSwitch, NIC,
  // NVMe), with the VM holding it named where one does.
  void note_health(const std::vector<numa::DeviceHealth>& health);
  // not_found when the device is not quarantined; a file that cannot be written changes nothing. A
  // device a VM held, or was being given, goes back through cleaning; any other is free at once.
  Result<QuarantineView> clear(const PciAddress& address, const std::string& principal);
  std::vector<QuarantineView> quarantined() const;

  std::vector<CleaningView> cleaning() const;
  // An operator's: clean a free or quarantined device again (VmService::clean_device).
  Result<CleaningView> request_cleaning(const PciAddress& address, const std::string& principal);
  Result<DeviceHistoryView> history(const PciAddress& address) const;
  std::map<PciAddress, CleaningRecordView> last_cleanings() const;

 private:
  struct Running {
    PciAddress address;
    std::string step;
  };
  // One device's cleaning run, its evidence not yet written.
  struct Cleaned {
    state::DeviceStateEntry entry;
    state::CleaningEvidence evidence;
  };
  void clean_waiting();
  std::optional<state::DeviceStateEntry> next_waiting(const std::set<PciAddress>& tried);
  std::optional<Cleaned> clean_one(const state::DeviceStateEntry& entry);
  state::CleaningEvidence run_steps(const state::DeviceStateEntry& entry, const numa::PciFunction& function);
  void conclude(const std::vector<Cleaned>& cleaned);
  void log_clean(const Cleaned& cleaned, const CleaningRecordView& view);
  void set_running(const std::optional<Running>& running);
  Status write_locked(std::vector<state::DeviceStateEntry> next);
  void tell_ledger_locked();
  CleaningView cleaning_view_locked(const state::DeviceStateEntry& entry, const std::set<PciAddress>& held) const;
  void publish_quarantine(const PciAddress& address, const std::optional<QuarantineView>& entry);
  void publish_cleaning(const PciAddress& address, const std::string& vm, std::optional<CleaningView> cleaning,
                        std::optional<CleaningRecordView> cleaned);
  void run_thread();
  Status check_on_bus(const PciAddress& address, const std::string& what) const;

  Parts parts_;
  std::unique_ptr<state::EvidenceLog> evidence_;
  mutable std::mutex mutex_;  // taken before the ledger's, never after
  std::vector<state::DeviceStateEntry> devices_;
  std::optional<Running> running_;
  std::map<PciAddress, CleaningRecordView> last_;
  std::mutex clean_mutex_;  // one cleaning at a time, whichever thread runs it
  std::condition_variable wake_;
  bool woken_ = false;
  bool stopping_ = false;
  std::thread thread_;
};

}  // namespace hostagent::daemon
