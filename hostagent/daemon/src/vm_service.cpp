// daemon/vm_service: the service: queues operations per VM, follows libvirt's events, reconciles at
// start and after libvirt comes back.
#include "hostagent/daemon/vm_service.hpp"

#include <future>

#include "log.hpp"
#include "operations.hpp"
#include "reconcile.hpp"
#include "vm_queues.hpp"

namespace hostagent::daemon {
namespace {

// The queue of work that spans VMs (syncing with libvirt). No VM can be named "" .
const std::string kHostQueue;

class VmServiceImpl final : public VmService {
 public:
  VmServiceImpl(ServiceParts parts, state::Journal journal, numa::HostPolicy policy)
      : context_(std::move(parts), std::move(journal), std::move(policy)), queues_(context_.config.operation_workers) {}

  ~VmServiceImpl() override {
    // Events stop first: the sinks point into the ledger, which goes before the hypervisor does.
    context_.hypervisor->subscribe(nullptr, nullptr);
    queues_.join();
  }
  VmServiceImpl(const VmServiceImpl&) = delete;
  VmServiceImpl& operator=(const VmServiceImpl&) = delete;

  Status begin() {
    // Subscribed before reconcile lists the domains, so no change between the two goes unseen.
    context_.hypervisor->subscribe([this](const virt::DomainEvent& event) { on_domain_event(event); },
                                   [this](virt::ConnectionEvent event) { on_connection_event(event); });
    HA_TRY(auto report, reconcile(context_));
    for (const auto& problem : report.problems) log(LogLevel::warning, "reconcile: " + problem);
    log(LogLevel::info, "reconciled: " + std::to_string(report.adopted.size()) + " VMs adopted, " +
                            std::to_string(report.foreign.size()) + " foreign domains, " +
                            std::to_string(report.finished.size() + report.rolled_back.size()) +
                            " interrupted operations recovered");
    set_report(std::move(report));
    return ok_status();
  }

  Result<VmView> create_vm(const CreateVmRequest& request) override {
    return wait([&](auto done) { submit_create(request, std::move(done)); });
  }
  Result<VmView> start_vm(const std::string& name) override {
    return wait([&](auto done) { submit_start(name, std::move(done)); });
  }
  Result<VmView> stop_vm(const std::string& name, bool force) override {
    return wait([&](auto done) { submit_stop(name, force, std::move(done)); });
  }
  Result<VmView> reboot_vm(const std::string& name) override {
    return wait([&](auto done) { submit_reboot(name, std::move(done)); });
  }
  Status delete_vm(const std::string& name) override {
    return wait_status([&](auto done) { submit_delete(name, std::move(done)); });
  }

  Result<VmView> get_vm(const std::string& name) override { return current_view(context_, name); }

  std::vector<VmView> list_vms() override {
    std::vector<VmView> views;
    for (const auto& entry : context_.ledger.entries()) views.push_back(view_of(entry));
    return views;
  }

  ServiceStatus status() override {
    ServiceStatus status;
    status.libvirt_connected = context_.hypervisor->connected();
    status.libvirt_connection_losses = connection_losses_.load();
    for (const auto& entry : context_.ledger.entries()) (entry.managed ? status.managed_vms : status.foreign_domains)++;
    status.operations_in_flight = queues_.pending();
    std::lock_guard lock(context_.report_mutex);
    status.last_reconcile = context_.last_reconcile;
    return status;
  }

  void submit_create(CreateVmRequest request, std::function<void(Result<VmView>)> done) override {
    const std::string key = request.name;
    queues_.post(key, [this, request = std::move(request), done = std::move(done)] {
      done(daemon::create_vm(context_, request));
    });
  }
  void submit_start(std::string name, std::function<void(Result<VmView>)> done) override {
    queues_.post(name, [this, name, done = std::move(done)] { done(daemon::start_vm(context_, name)); });
  }
  void submit_stop(std::string name, bool force, std::function<void(Result<VmView>)> done) override {
    queues_.post(name, [this, name, force, done = std::move(done)] { done(daemon::stop_vm(context_, name, force)); });
  }
  void submit_reboot(std::string name, std::function<void(Result<VmView>)> done) override {
    queues_.post(name, [this, name, done = std::move(done)] { done(daemon::reboot_vm(context_, name)); });
  }
  void submit_delete(std::string name, std::function<void(Status)> done) override {
    queues_.post(name, [this, name, done = std::move(done)] { done(daemon::delete_vm(context_, name)); });
  }

 private:
  template <typename Submit>
  Result<VmView> wait(Submit submit) {
    std::promise<Result<VmView>> promise;
    auto future = promise.get_future();
    submit([&promise](Result<VmView> result) { promise.set_value(std::move(result)); });
    return future.get();
  }

  template <typename Submit>
  Status wait_status(Submit submit) {
    std::promise<Status> promise;
    auto future = promise.get_future();
    submit([&promise](Status result) { promise.set_value(std::move(result)); });
    return future.get();
  }

  void set_report(ReconcileReport report) {
    std::lock_guard lock(context_.report_mutex);
    context_.last_reconcile = std::move(report);
  }

  // On libvirt's event thread: only the ledger's lock, never a libvirt call.
  void on_domain_event(const virt::DomainEvent& event) {
    if (context_.ledger.on_event(event)) queues_.post(kHostQueue, [this] { resync(); });
  }

  void on_connection_event(virt::ConnectionEvent event) {
    if (event == virt::ConnectionEvent::lost) {
      ++connection_losses_;
      log(LogLevel::warning, "libvirt connection lost; reconnecting");
      return;
    }
    log(LogLevel::info, "libvirt connection back: syncing");
    queues_.post(kHostQueue, [this] { resync(); });
    queues_.post(kHostQueue, [this] { recover_journal(); });
  }

  // Events may have been missed while libvirt was away, or a domain changed outside hostagent.
  void resync() {
    ReconcileReport report;
    if (auto synced = sync_domains(context_, report, false); !synced.ok()) {
      log(LogLevel::warning, "sync with libvirt failed: " + synced.error().message);
    }
  }

  // Operations left in the journal (a rollback or delete cut short by libvirt going away) are
  // recovered on their VM's queue, so they never race a newer operation on the same VM.
  void recover_journal() {
    auto entries = context_.journal.entries();
    if (!entries.ok()) {
      log(LogLevel::error, "journal unreadable: " + entries.error().message);
      return;
    }
    for (const auto& entry : *entries) {
      queues_.post(entry.vm, [this, entry] {
        ReconcileReport report;
        recover(context_, entry, report);
        for (const auto& problem : report.problems) log(LogLevel::warning, problem);
      });
    }
  }

  Context context_;
  std::atomic<int> connection_losses_{0};
  VmQueues queues_;  // after context_: destroyed (joined) before it
};

}  // namespace

VmView view_of(const LedgerEntry& entry) {
  VmView view;
  view.name = entry.name;
  view.uuid = entry.uuid;
  view.managed = entry.managed;
  view.state = entry.defined ? std::string(virt::to_string(entry.state)) : "absent";
  view.operation = entry.operation;
  view.step = entry.step;
  view.last_event = entry.last_event;
  view.record = entry.record;
  return view;
}

Result<std::unique_ptr<VmService>> VmService::start(ServiceParts parts) {
  HA_ASSERT(parts.hypervisor && parts.devices && parts.clock);
  HA_TRY(auto journal, state::Journal::open(parts.config.state_directory / "journal"));
  numa::HostPolicy policy;
  policy.housekeeping_cpus = parts.config.housekeeping_cpus;
  auto service = std::make_unique<VmServiceImpl>(std::move(parts), std::move(journal), std::move(policy));
  HA_TRY_STATUS(service->begin());
  return std::unique_ptr<VmService>(std::move(service));
}

}  // namespace hostagent::daemon
