// Test double: a VmService in memory, for the API's own tests. It keeps what the API asked for
// (every command, typed) and answers what the test scripted: a refusal before any operation exists,
// an operation that ends when the test ends it, VMs, status, events. It models the interface's
// contract (ids, states, not_found for what it does not hold, wait blocking until the end) and
// nothing of libvirt: the suites that link it run with no daemon and no libvirt at all.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "hostagent/service/vm_service.hpp"

namespace hostagent::testing {

// A console session whose guest echoes what it is sent, as a terminal in canonical mode does, and
// keeps the session's contract: output bounded (the oldest dropped), wake when output waits or the
// session ended, nothing taken once ended.
class EchoConsole final : public service::ConsoleSession {
 public:
  std::string take() override;
  std::size_t put(std::string_view bytes) override;
  void wait(std::function<void()> wake) override;
  std::optional<std::string> ended() override;
  void end(std::string reason);  // the guest stopped, say
  std::string typed() const;     // all it was sent

 private:
  void wake_locked(std::unique_lock<std::mutex>& lock);
  mutable std::mutex mutex_;
  std::string output_;
  std::string typed_;
  std::optional<std::string> ended_;
  std::function<void()> wake_;
};

class FakeVmService final : public service::VmService {
 public:
  FakeVmService(numa::HostModel host, std::map<std::string, vmtemplates::VmTemplate> templates);

  // --- what the test scripts
  // The next command fails with `error` before an operation exists, as the service's own checks do.
  void refuse_next(Error error);
  // Ends a queued operation: succeeded, or failed with `error`; wakes wait() and publishes it.
  void end(const std::string& id, std::optional<Error> error = std::nullopt);
  // What get_vm, list_vms, domain_xml and nccl_topology answer for vm.name.
  void put_vm(service::VmView vm, std::string domain_xml = "");
  void set_status(service::ServiceStatus status);
  void set_held(std::vector<numa::Allocation> held);
  void set_policy(numa::HostPolicy policy);  // what usage() says placement is told
  void set_device_health(std::vector<numa::DeviceHealth> health);
  void quarantine(service::QuarantineView entry);   // what quarantined() lists, and clear_quarantine clears
  void mark_cleaning(service::CleaningView entry);  // what cleaning() lists; clean_device refuses it (conflict)
  // What device_history answers for history.address, and what last_cleanings() holds for it: the
  // last of its cleanings, when it has any.
  void set_history(service::DeviceHistoryView history);
  // Called at the start of every status(), outside the fake's lock (a test's probe into a read).
  void on_status(std::function<void()> hook);
  // To every subscriber, on the calling thread, as the service's threads do.
  void publish(const service::ServiceEvent& event);

  // --- what the API asked for
  std::vector<service::CreateVmRequest> creates() const;
  // Every other command, worded: "start vm1", "stop vm1 force", "reboot vm1", "delete vm1".
  std::vector<std::string> commands() const;

  // --- service::VmService
  Result<service::OperationView> begin_create(const service::CreateVmRequest& request) override;
  Result<service::OperationView> begin_start(const VmName& name) override;
  Result<service::OperationView> begin_stop(const VmName& name, bool force) override;
  Result<service::OperationView> begin_reboot(const VmName& name) override;
  Result<service::OperationView> begin_delete(const VmName& name) override;
  Result<service::OperationView> wait(const std::string& id) override;
  Result<service::OperationView> operation(const std::string& id) override;
  std::vector<service::OperationView> operations() override;
  Result<service::VmView> get_vm(const VmName& name) override;
  // The VM's creates and starts among this fake's operations, ended ones, newest first.
  Result<std::vector<service::OperationView>> vm_starts(const VmName& name) override;
  service::VmList list_vms() override;
  service::ServiceStatus status() override;
  uint64_t subscribe(service::ServiceEventSink sink) override;
  void unsubscribe(uint64_t id) override;
  service::HostUsage usage() override;  // held_ and policy_, at usage_version_
  std::vector<service::QuarantineView> quarantined() override;
  // Clears an entry quarantine() made; "clear-quarantine ADDRESS by PRINCIPAL" is in commands().
  Result<service::QuarantineView> clear_quarantine(const PciAddress& address, const std::string& principal) override;
  std::vector<service::CleaningView> cleaning() override;
  // As the service's contract says: not_found for a device the host does not have, conflict for
  // one a VM holds (set_held) or one already cleaning; else marked (a quarantined one stays
  // quarantined). "clean-device ADDRESS by PRINCIPAL" is in commands().
  Result<service::CleaningView> clean_device(const PciAddress& address, const std::string& principal) override;
  // set_history's; an empty history for a device of the host that has none; else not_found.
  Result<service::DeviceHistoryView> device_history(const PciAddress& address) override;
  std::map<PciAddress, service::CleaningRecordView> last_cleanings() override;
  const std::map<std::string, vmtemplates::VmTemplate>& templates() const override;
  Result<std::string> domain_xml(const VmName& name) override;
  Result<std::string> nccl_topology(const VmName& name) override;
  // The last `lines` lines of what set_console_log gave the VM; not_found for a VM it does not hold.
  Result<service::ConsoleLogView> console_log(const VmName& name, std::size_t lines) override;
  void set_console_log(const std::string& vm, std::string text);
  // What the opener set_console gave answers (not_found for a VM the fake does not hold, first);
  // "console VM by PRINCIPAL[ take_over]" is in commands().
  Result<std::shared_ptr<service::ConsoleSession>> open_console(const VmName& name, bool take_over,
                                                                const std::string& principal) override;
  using ConsoleOpener = std::function<Result<std::shared_ptr<service::ConsoleSession>>(const VmName&, bool)>;
  void set_console(ConsoleOpener opener);
  Result<service::DeviceHealthReading> device_health() override;  // the last set_device_health's, one object
  numa::HostModel host_now() override;
  // The service's rules without its queues: cordon and drain set the mode (a drain lists no VMs;
  // conflict for a cordon while draining or drained), uncordon puts it back; each is in commands():
  // "cordon REASON by PRINCIPAL", "drain REASON 300s by PRINCIPAL", "uncordon by PRINCIPAL".
  // What set_vm_stats gave, as it gave it.
  Result<std::vector<service::VmStatsView>> vm_stats() override;
  void set_vm_stats(std::vector<service::VmStatsView> stats);
  service::MaintenanceView maintenance() override;
  Result<service::MaintenanceView> cordon(const std::string& reason, const std::string& principal) override;
  Result<service::MaintenanceView> drain(const std::string& reason, std::chrono::seconds grace,
                                         const std::string& principal) override;
  Result<service::MaintenanceView> uncordon(const std::string& principal) override;

 private:
  struct Vm {
    service::VmView view;
    std::string domain_xml;
    std::string console_log;
  };
  // Under mutex_: the scripted refusal, once; a new queued operation of `kind` on `vm`.
  std::optional<Error> take_refusal();
  service::OperationView& queue(const std::string& kind, const std::string& vm);
  Result<service::OperationView> known_vm_command(const std::string& kind, const std::string& name,
                                                  const std::string& worded);

  const numa::HostModel host_;
  const std::map<std::string, vmtemplates::VmTemplate> templates_;

  mutable std::mutex mutex_;
  std::condition_variable ended_;
  std::optional<Error> refusal_;
  std::map<std::string, service::OperationView> operations_;
  std::vector<std::string> operation_order_;  // oldest first
  std::map<std::string, Vm> vms_;
  uint64_t vms_version_ = 0;  // moves with every change to vms_, as the service's list version does
  service::ServiceStatus status_;
  std::vector<numa::Allocation> held_;
  numa::HostPolicy policy_;
  uint64_t usage_version_ = 0;  // bumped by set_held and set_policy, as the ledger's is
  service::DeviceHealthReading health_ = std::make_shared<const std::vector<numa::DeviceHealth>>();
  std::vector<service::CreateVmRequest> creates_;
  std::vector<std::string> commands_;
  std::vector<service::QuarantineView> quarantined_;
  std::vector<service::CleaningView> cleaning_;
  std::map<PciAddress, service::DeviceHistoryView> histories_;
  service::MaintenanceView maintenance_;
  std::vector<service::VmStatsView> vm_stats_;

  std::mutex sinks_mutex_;  // apart from mutex_: a sink runs under it
  std::map<uint64_t, service::ServiceEventSink> sinks_;
  uint64_t next_sink_ = 1;
  std::function<void()> status_hook_;
  ConsoleOpener console_opener_;
};

}  // namespace hostagent::testing
