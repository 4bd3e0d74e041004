// daemon/vm_service: the service: queues operations per VM, follows libvirt's events, reconciles at
// start and after libvirt comes back.
#include <algorithm>
#include <atomic>
#include <memory>
#include <set>

#include "console_sessions.hpp"
#include "daemon_log.hpp"
#include "event_hub.hpp"
#include "guest_watch.hpp"
#include "host_boot.hpp"
#include "host_watch.hpp"
#include "hostagent/common/text.hpp"
#include "hostagent/common/text_file.hpp"
#include "hostagent/daemon/service_parts.hpp"
#include "hostagent/numa/nvlink.hpp"
#include "hostagent/service/vm_service.hpp"
#include "hostagent/state/create_requests.hpp"
#include "maintenance.hpp"
#include "operations.hpp"
#include "reconcile.hpp"
#include "request_ids.hpp"
#include "vm_queues.hpp"
#include "vm_steps.hpp"

namespace hostagent::daemon {
namespace {

// The queue of work that spans VMs (syncing with libvirt). No VM can be named "" .
const std::string kHostQueue;

// What the service owns for its operations, in the order it must be built: each member refers only
// to those above it. Functions are given parts of it (vm_work.hpp), never the whole.
struct Owners {
  Owners(ServiceParts parts, state::Journal journal_in, state::CreateRequests requests_in,
         state::OperationRecords operation_records_in, numa::HostPolicy policy)
      : facts{std::move(parts.config), std::move(parts.host), std::move(parts.readers), std::move(parts.templates),
              std::move(parts.host_id)},
        hypervisor(std::move(parts.hypervisor)),
        devices(std::move(parts.devices)),
        clock(std::move(parts.clock)),
        hook(std::move(parts.hook)),
        journal(std::move(journal_in)),
        operation_records(std::move(operation_records_in)),
        ledger(facts.host, std::move(policy), events, facts.readers.free_hugepages),
        lifecycle({facts.config.state_directory / "device_states.json",
                   facts.config.state_directory / "cleaning_evidence.jsonl", facts.host, *devices, ledger, events,
                   *clock, hook, facts.readers.on_bus, facts.config.hygiene, facts.config.devices.health}),
        operations(*clock, events, &operation_records),
        requests(std::move(requests_in), *clock),
        maintenance(facts.config.state_directory / "maintenance.json", *clock, events) {}

  // The parts the operations are given.
  VmWork work() {
    return VmWork{facts, Effects{*hypervisor, *devices, ledger, lifecycle},
                  Recording{*clock, hook.get(), journal, operations, operations_started}, guest_watch};
  }

  const Facts facts;
  const std::unique_ptr<virt::Hypervisor> hypervisor;
  const std::unique_ptr<devices::DevicePreparer> devices;
  const std::shared_ptr<Clock> clock;
  const std::shared_ptr<StepHook> hook;
  state::Journal journal;
  state::OperationRecords operation_records;  // before operations, which writes to it
  EventHub events;
  Ledger ledger;                // refers to facts and events
  DeviceLifecycle lifecycle;    // refers to facts, devices, ledger, events and clock
  OperationTracker operations;  // refers to clock, events and operation_records
  RequestIds requests;          // refers to clock
  Maintenance maintenance;      // refers to facts, clock and events
  ConsoleSessions consoles{*hypervisor, *clock};
  // Refers to clock, hypervisor and operations; its thread stops before they go.
  GuestWatch guest_watch{*clock, *hypervisor, operations};
  std::atomic<uint64_t> operations_started{0};  // the serial in each journal entry's name
};

class VmServiceImpl final : public service::VmService {
 public:
  VmServiceImpl(ServiceParts parts, state::Journal journal, state::CreateRequests requests,
                state::OperationRecords operations, numa::HostPolicy policy, std::chrono::milliseconds health_interval)
      : power_(parts.config.state_directory / "power.json", parts.boot_id),
        owners_(std::move(parts), std::move(journal), std::move(requests), std::move(operations), std::move(policy)),
        work_(owners_.work()),
        host_watch_(owners_.facts.host, owners_.facts.readers, owners_.lifecycle, *owners_.clock, health_interval),
        queues_(owners_.facts.config.operation_workers) {}

  ~VmServiceImpl() override {
    host_watch_.stop();  // its thread reads the host model and tells the lifecycle
    // Events stop first: the sinks point into the ledger, which goes before the hypervisor does.
    owners_.hypervisor->subscribe(nullptr, nullptr);
    queues_.join();
  }
  VmServiceImpl(const VmServiceImpl&) = delete;
  VmServiceImpl& operator=(const VmServiceImpl&) = delete;

  Status begin() {
    // Before anything changes: an unreadable record stops the start with nothing touched.
    HA_TRY_STATUS(owners_.requests.load());
    HA_TRY_STATUS(power_.load());
    HA_TRY_STATUS(owners_.maintenance.load());
    HA_TRY_STATUS(owners_.lifecycle.load());
    // Before reconcile, whose repair of running VMs binds groups too.
    owners_.devices->report_faults_to([this](const devices::DeviceFault& fault) {
      owners_.lifecycle.quarantine(fault.address, fault.step, fault.reason, fault.vm);
    });
    // Subscribed before reconcile lists the domains, so no change between the two goes unseen.
    owners_.hypervisor->subscribe([this](const virt::DomainEvent& event) { on_domain_event(event); },
                                  [this](virt::ConnectionEvent event) { on_connection_event(event); });
    HA_TRY(auto report, reconcile(work_));
    // What waits is cleaned now, a cleaning a restart cut short again, then what VMs let go.
    owners_.lifecycle.start();
    HA_TRY_STATUS(load_operations(report));
    repair_running(report);
    const auto starts = after_reboot(report);
    for (const auto& problem : report.problems) log(LogLevel::warning, "reconcile: " + problem);
    log(LogLevel::info, "reconciled: " + std::to_string(report.adopted.size()) + " VMs adopted, " +
                            std::to_string(report.foreign.size()) + " foreign domains, " +
                            std::to_string(report.finished.size() + report.rolled_back.size()) +
                            " interrupted operations recovered");
    set_report(std::move(report));
    owners_.requests.settle([this](const std::string& vm, const std::string& id) { return made_by(vm, id); });
    host_watch_.start();
    ready_ = true;
    start_after_reboot(starts);
    if (const auto deadline = owners_.maintenance.drain_underway()) {
      std::lock_guard lock(admission_mutex_);
      queue_drain(*deadline);  // a drain this daemon's stop cut short
    }
    return ok_status();
  }

  // The operations and start histories an earlier run left (and the history an older release kept
  // apart, in starts/, moved in and its directory removed); then the histories of VMs that are gone.
  Status load_operations(service::ReconcileReport& report) {
    const auto interrupted = [this](const service::OperationView& cut) { return interrupted_outcome(cut); };
    const auto older_directory = owners_.facts.config.state_directory / "starts";
    std::error_code ec;
    if (!std::filesystem::exists(older_directory, ec)) {
      HA_TRY_STATUS(owners_.operations.load(interrupted));
    } else {
      HA_TRY(auto older, state::StartHistory::open(older_directory));
      HA_TRY_STATUS(owners_.operations.load(interrupted, &older));
      std::filesystem::remove(older_directory, ec);  // not empty: a file that could not be moved stays
    }
    for (const auto& vm : owners_.operations.vms_with_starts()) {
      const auto entry = owners_.ledger.find(vm);
      if (entry && entry->defined) continue;
      owners_.operations.forget_starts(vm);
      report.released.push_back("start history of " + vm);
    }
    return ok_status();
  }

  Result<service::VmView> get_vm(const VmName& name) override { return current_view(work_, name); }

  // Built again only when the ledger or an operation's progress moved: a control plane polls the
  // list far more often than VMs change. The version is read before the list is built, so a change
  // made while it is built shows as a newer version and the next call builds again.
  service::VmList list_vms() override {
    const uint64_t version = owners_.ledger.entries_version() + owners_.operations.progress_version();
    std::lock_guard lock(list_mutex_);
    if (listed_.vms && listed_.version == version) return listed_;
    auto views = std::make_shared<std::vector<service::VmView>>();
    for (const auto& entry : owners_.ledger.entries())
      views->push_back(view_of(owners_.facts.host, owners_.operations, entry));
    listed_ = service::VmList{version, std::move(views)};
    return listed_;
  }

  service::ServiceStatus status() override {
    service::ServiceStatus status;
    status.ready = ready_.load();
    status.libvirt_connected = owners_.hypervisor->connected();
    status.libvirt_connection_losses = connection_losses_.load();
    auto counts = owners_.ledger.counts();
    status.managed_vms = counts.managed;
    status.foreign_domains = counts.foreign;
    status.vms_by_state = std::move(counts.by_state);
    status.operations_in_flight = queues_.pending();
    std::lock_guard lock(report_mutex_);
    status.last_reconcile = last_reconcile_;
    return status;
  }

  Result<service::OperationView> begin_create(const service::CreateVmRequest& request) override {
    HA_TRY_STATUS(check_create_request(owners_.facts, request));
    // One at a time from the check to the enqueue: two replays racing get one operation, and a
    // drain lists every create queued before it.
    std::unique_lock lock(admission_mutex_);
    if (!request.request_id.empty()) {
      HA_TRY(auto earlier, earlier_create(request));
      if (earlier) return *earlier;
    }
    HA_TRY_STATUS(owners_.maintenance.refuse_create());  // after the replay: what was accepted is answered
    HA_TRY_STATUS(check_name_free(request));
    HA_TRY_STATUS(check_holdings_free(request));
    auto operation = owners_.operations.enqueue("create", request.name, request.request_id, request.template_name);
    if (!request.request_id.empty()) {
      if (auto accepted = owners_.requests.accept(operation, request_fingerprints(request)); !accepted.ok()) {
        owners_.operations.finish(operation.id, accepted);  // never ran: nothing to undo
        return accepted.error();
      }
    }
    lock.unlock();
    queue(operation.id, request.name, [this, request, id = operation.id] {
      auto created = daemon::create_vm(work_, request);
      // Before the tracker says it ended: a replay that saw the end finds the record ended too.
      if (!request.request_id.empty()) owners_.requests.ended(id, status_of(created));
      return created;
    });
    return operation;
  }
  Result<service::OperationView> begin_start(const VmName& name) override {
    HA_TRY_STATUS(ours(name));
    std::lock_guard lock(admission_mutex_);  // a drain's stop is queued after any start it let in
    HA_TRY_STATUS(owners_.maintenance.refuse_start(name.str()));
    const auto operation = enqueue("start", name);
    queue(operation.id, name, [this, name] { return daemon::start_vm(work_, name); });
    return operation;
  }
  Result<service::OperationView> begin_stop(const VmName& name, bool force) override {
    HA_TRY_STATUS(ours(name));
    const auto operation = enqueue("stop", name);
    queue(operation.id, name, [this, name, force] { return daemon::stop_vm(work_, name, force); });
    return operation;
  }
  Result<service::OperationView> begin_reboot(const VmName& name) override {
    HA_TRY_STATUS(ours(name));
    const auto operation = enqueue("reboot", name);
    queue(operation.id, name, [this, name] { return daemon::reboot_vm(work_, name); });
    return operation;
  }
  Result<service::OperationView> begin_delete(const VmName& name) override {
    HA_TRY_STATUS(ours(name));
    const auto operation = enqueue("delete", name);
    queue(operation.id, name, [this, name, id = operation.id] {
      const auto entry = owners_.ledger.find(name);
      const std::string request_id = entry && entry->record ? entry->record->request_id : "";
      auto deleted = daemon::delete_vm(work_.effects, work_.recording, name);
      if (deleted.ok() && !request_id.empty()) owners_.requests.gone(request_id, "deleted by operation " + id);
      return deleted;
    });
    return operation;
  }

  Result<service::OperationView> wait(const std::string& id) override {
    if (auto ended = owners_.operations.wait_ended(id)) return *ended;
    return recorded_operation(id);
  }

  Result<service::OperationView> operation(const std::string& id) override {
    if (auto found = owners_.operations.find(id)) return *found;
    return recorded_operation(id);
  }
  std::vector<service::OperationView> operations() override { return owners_.operations.list(); }

  uint64_t subscribe(service::ServiceEventSink sink) override { return owners_.events.subscribe(std::move(sink)); }
  void unsubscribe(uint64_t id) override { owners_.events.unsubscribe(id); }

  service::HostUsage usage() override {
    auto holdings = owners_.ledger.holdings_with(host_watch_.free_pages());
    return service::HostUsage{&owners_.facts.host, std::move(holdings.held), holdings.version,
                              std::move(holdings.policy)};
  }
  std::vector<service::QuarantineView> quarantined() override { return owners_.lifecycle.quarantined(); }
  Result<service::QuarantineView> clear_quarantine(const PciAddress& address, const std::string& principal) override {
    return owners_.lifecycle.clear(address, principal);
  }
  std::vector<service::CleaningView> cleaning() override { return owners_.lifecycle.cleaning(); }
  Result<service::CleaningView> clean_device(const PciAddress& address, const std::string& principal) override {
    return owners_.lifecycle.request_cleaning(address, principal);
  }
  Result<service::DeviceHistoryView> device_history(const PciAddress& address) override {
    return owners_.lifecycle.history(address);
  }
  std::map<PciAddress, service::CleaningRecordView> last_cleanings() override {
    return owners_.lifecycle.last_cleanings();
  }
  const std::map<std::string, vmtemplates::VmTemplate>& templates() const override { return owners_.facts.templates; }

  Result<std::string> domain_xml(const VmName& name) override {
    HA_TRY_STATUS(known(name));
    return owners_.hypervisor->domain_xml(name);
  }
  Result<std::string> nccl_topology(const VmName& name) override {
    const auto entry = owners_.ledger.find(name);
    if (!entry) return Error{ErrorCode::not_found, "no VM named " + name.str()};
    if (!entry->record || entry->record->nccl_topology.empty()) {
      return Error{ErrorCode::not_found,
                   "VM " + name.str() + " has no NCCL topology: " +
                       (entry->managed ? "it is still being created" : "hostagent did not make it")};
    }
    return entry->record->nccl_topology;
  }
  Result<service::ConsoleLogView> console_log(const VmName& name, std::size_t lines) override {
    const auto entry = owners_.ledger.find(name);
    if (!entry || !entry->managed) {
      return Error{ErrorCode::not_found, "no VM named " + name.str() + " that hostagent made"};
    }
    const auto path = console_log_path(owners_.facts.config, name.str());
    if (!path) return service::ConsoleLogView{"", 0, true};  // libvirt's test driver: a guest that prints nothing
    auto tail = read_text_tail(*path, std::min(lines, service::kMaxConsoleTailLines), service::kConsoleTailBytes);
    if (!tail.ok() && tail.error().code == ErrorCode::not_found) return service::ConsoleLogView{};  // nothing yet
    if (!tail.ok()) return tail.error();
    return service::ConsoleLogView{std::move(tail->text), tail->file_bytes, tail->whole};
  }
  Result<std::shared_ptr<service::ConsoleSession>> open_console(const VmName& name, bool take_over,
                                                                const std::string& principal) override {
    const auto entry = owners_.ledger.find(name);
    if (!entry || !entry->managed) {
      return Error{ErrorCode::not_found, "no VM named " + name.str() + " that hostagent made"};
    }
    return owners_.consoles.open(name, take_over, principal);
  }
  numa::HostModel host_now() override { return host_watch_.host_now(); }

  // One virConnectGetAllDomainStats for every reader within kVmStatsMaxAge while the VMs stay as
  // they were: scrapes and polls from many clients cost libvirt one call, and a QEMU monitor round
  // trip per VM, per period; a VM made, deleted or changed is read at once, never shown stale.
  Result<std::vector<service::VmStatsView>> vm_stats() override {
    std::lock_guard lock(stats_mutex_);
    const auto now = owners_.clock->steady_now();
    const uint64_t version = owners_.ledger.entries_version();  // before the read: a change after it reads again
    if (stats_read_ && stats_version_ == version && now - *stats_read_ < service::kVmStatsMaxAge) return stats_;
    HA_TRY(const auto all, owners_.hypervisor->all_stats());
    const std::string read_at = rfc3339_ms(owners_.clock->now());
    std::vector<service::VmStatsView> views;
    for (const auto& domain : all) {
      const auto entry = owners_.ledger.find(domain.name);
      if (!entry || !entry->managed || !entry->record) continue;
      views.push_back(stats_view(domain, *entry, read_at));
    }
    std::sort(views.begin(), views.end(), [](const auto& a, const auto& b) { return a.vm < b.vm; });
    stats_ = std::move(views);
    stats_read_ = now;
    stats_version_ = version;
    return stats_;
  }

  service::MaintenanceView maintenance() override { return owners_.maintenance.view(); }
  Result<service::MaintenanceView> cordon(const std::string& reason, const std::string& principal) override {
    return owners_.maintenance.cordon(reason, principal);
  }
  Result<service::MaintenanceView> drain(const std::string& reason, std::chrono::seconds grace,
                                         const std::string& principal) override {
    std::lock_guard lock(admission_mutex_);
    HA_TRY(const auto deadline, owners_.maintenance.drain(reason, grace, principal));
    queue_drain(deadline);
    return owners_.maintenance.view();
  }
  Result<service::MaintenanceView> uncordon(const std::string& principal) override {
    return owners_.maintenance.uncordon(principal);
  }
  Result<service::DeviceHealthReading> device_health() override { return host_watch_.device_health(); }

 private:
  service::OperationView enqueue(const std::string& kind, const std::string& name) {
    // A start's phases are observed per template (the metrics), as a create's are.
    std::string template_name;
    if (kind == "start") {
      const auto entry = owners_.ledger.find(name);
      if (entry && entry->record) template_name = entry->record->template_name;
    }
    return owners_.operations.enqueue(kind, name, "", template_name);
  }

  // Runs `run` on the VM's queue as the operation `id`; the tracker keeps its outcome.
  template <typename Run>
  void queue(const std::string& id, const std::string& name, Run run) {
    queues_.post(name, [this, id, run = std::move(run)] {
      owners_.operations.start(id);
      auto outcome = status_of(run());
      power_.save(owners_.ledger.entries());
      owners_.operations.finish(id, outcome);
    });
  }

  static Status status_of(const Status& status) { return status; }
  static Status status_of(const Result<service::VmView>& result) {
    if (!result.ok()) return result.error();
    return ok_status();
  }

  Status known(const std::string& name) const {
    if (!owners_.ledger.find(name)) return Error{ErrorCode::not_found, "no VM named " + name};
    return ok_status();
  }

  // A VM this daemon made: the one kind a start, stop, reboot or delete may change. A domain it did
  // not make is refused now (409), as the operation itself would refuse it, and no operation,
  // record or start history is made for it.
  Status ours(const std::string& name) const {
    const auto entry = owners_.ledger.find(name);
    if (!entry) return Error{ErrorCode::not_found, "no VM named " + name};
    if (!entry->managed) {
      return Error{ErrorCode::conflict, "domain " + text::quoted(name) +
                                            " was not made by hostagent: it is reported, never changed; use libvirt"};
    }
    return ok_status();
  }

  // A create replayed with its request id must ask for the same VM, field for field.
  static Status same_create(const service::CreateVmRequest& request, const state::CreateRequestRecord& record) {
    const auto differ = differing_fields(request, record);
    if (differ.empty()) return ok_status();
    return Error{ErrorCode::conflict, "request_id: " + text::quoted(request.request_id) + " was used to create VM " +
                                          record.vm + " from template " + record.template_name + " with another " +
                                          differ + "; a different create needs a new request id"};
  }

  // The create this request id already named, answered rather than run again: its operation while
  // the VM it made exists or it failed; a conflict once that VM is gone. nullopt: the id is new.
  Result<std::optional<service::OperationView>> earlier_create(const service::CreateVmRequest& request) {
    auto record = owners_.requests.find(request.request_id);
    if (!record) {
      HA_TRY_STATUS(check_request_id_unused(request));
      return std::optional<service::OperationView>();
    }
    HA_TRY_STATUS(same_create(request, *record));
    if (record->outcome == state::CreateOutcome::created && !made_by(record->vm, record->request_id)) {
      // Deleted by a recovery that finished a delete, or undefined outside hostagent.
      owners_.requests.gone(record->request_id, "removed outside hostagent, or by a delete its recovery finished");
      record = owners_.requests.find(request.request_id);
    }
    if (record->outcome == state::CreateOutcome::gone) {
      return Error{ErrorCode::conflict, "request_id: " + text::quoted(request.request_id) + " created VM " +
                                            record->vm + " (operation " + record->operation +
                                            "), which is gone since " + record->gone_at + ": " + record->error +
                                            "; a new VM needs a new request id"};
    }
    if (auto live = owners_.operations.find(record->operation)) return std::optional(*live);
    return std::optional(operation_of(*record));
  }

  // Whether VM `vm` exists and was made by the create that carried `request_id`.
  bool made_by(const std::string& vm, const std::string& request_id) const {
    const auto entry = owners_.ledger.find(vm);
    return entry && entry->defined && entry->record && entry->record->request_id == request_id;
  }

  // An operation the tracker forgot (an hour after it ended, or 1000 newer): creates with a request id are
  // recorded until their id's window closes.
  Result<service::OperationView> recorded_operation(const std::string& id) {
    if (auto record = owners_.requests.find_operation(id)) return operation_of(*record);
    return Error{ErrorCode::not_found,
                 "no operation " + id +
                     " (operations are kept for an hour after they end, across restarts; a create with a request id " +
                     std::to_string(RequestIds::kWindow.count() / 24) + " days after it failed or its VM went)"};
  }

  Result<std::vector<service::OperationView>> vm_starts(const VmName& name) override {
    const auto entry = owners_.ledger.find(name.str());
    if (!entry || !entry->defined) return Error{ErrorCode::not_found, "no VM named " + text::quoted(name.str())};
    return owners_.operations.starts_of(name.str());
  }

  // A name in use is a conflict now rather than an operation that fails in the queue, unless the VM
  // is this very create's (a replay with its request id, answered above).
  Status check_name_free(const service::CreateVmRequest& request) const {
    const auto entry = owners_.ledger.find(request.name);
    if (!entry || !entry->defined) return ok_status();
    if (!request.request_id.empty() && entry->record && entry->record->request_id == request.request_id) {
      return ok_status();
    }
    return Error{ErrorCode::conflict,
                 "name: a VM named " + text::quoted(request.name.str()) + " exists" +
                     (entry->managed ? "" : " (a domain hostagent did not make)") +
                     "; choose another name, or delete it first",
                 "name"};
  }

  // The UUID, the MACs and the claim, as reserve() will judge them: a refusal now is the API's 409
  // or 400, not a queued create that fails (a create racing this one can still take them first,
  // and then this one fails in the queue with the same words).
  Status check_holdings_free(const service::CreateVmRequest& request) const {
    const ReserveClaim claim{owners_.facts.config.placement.host_name, &request.claim};
    return owners_.ledger.check_create(request.uuid ? request.uuid->str() : std::string(), request.macs,
                                       request.claim.empty() ? nullptr : &claim);
  }

  // A VM made before its create's request record was kept (an older hostagent) has the id in its
  // own record.
  Status check_request_id_unused(const service::CreateVmRequest& request) {
    for (const auto& entry : owners_.ledger.entries()) {
      if (!entry.record || entry.record->request_id != request.request_id) continue;
      state::CreateRequestRecord older;  // its VM and template are all such a VM's record says
      older.vm = entry.name;
      older.template_name = entry.record->template_name;
      return same_create(request, older);
    }
    return ok_status();
  }

  void set_report(service::ReconcileReport report) {
    std::lock_guard lock(report_mutex_);
    last_reconcile_ = std::move(report);
  }

  // On libvirt's event thread: only the ledger's lock, never a libvirt call.
  void on_domain_event(const virt::DomainEvent& event) {
    owners_.guest_watch.on_event(event);
    if (owners_.ledger.on_event(event) && !owners_.operations.progress_of(event.name)) {
      queues_.post(kHostQueue, [this] { resync(); });
    }
    // A guest that powered itself off, or crashed, is no longer running: the record follows.
    queues_.post(kHostQueue, [this] { power_.save(owners_.ledger.entries()); });
    service::ServiceEvent changed;
    changed.kind = service::ServiceEvent::Kind::vm;
    changed.vm = event.name;
    const auto entry = owners_.ledger.find(event.name);
    changed.vm_state = entry ? worded_state(*entry) : "absent";
    if (event.kind == virt::DomainEventKind::undefined) changed.vm_state = "absent";
    changed.detail = entry ? entry->last_event : std::string(virt::to_string(event.kind));
    owners_.events.publish(changed);
  }

  void on_connection_event(virt::ConnectionEvent event) {
    if (event == virt::ConnectionEvent::lost) {
      ++connection_losses_;
      ready_ = false;
      log(LogLevel::warning, "libvirt connection lost; reconnecting");
      return;
    }
    log(LogLevel::info, "libvirt connection back: syncing");
    queues_.post(kHostQueue, [this] { resync(); });
    queues_.post(kHostQueue, [this] {
      recover_journal();
      ready_ = owners_.hypervisor->connected();
    });
  }

  // What an operation the daemon's stop cut short came to, once reconcile has run. A create or a
  // delete is what recovery made of it (a create is kept only whole, a delete always finished), so
  // whether the VM exists says; a start, stop or reboot is not journaled, and the VM's state now
  // says what it did, except a start cut between launch and resume, which is finished.
  Status interrupted_outcome(const service::OperationView& cut) {
    const auto entry = owners_.ledger.find(cut.vm);
    const bool exists = entry && entry->defined && entry->managed;
    if ((cut.kind == "create" && exists) || (cut.kind == "delete" && !exists)) return ok_status();
    if (cut.kind == "start" && exists && entry->state == virt::DomainState::paused) return resume_cut_start(cut.vm);
    const std::string why = cut.kind == "create"   ? "its recovery rolled it back"
                            : cut.kind == "delete" ? "it had not begun, and the VM is still there"
                                                   : "the VM's state (GET /v1/vms/" + cut.vm + ") says what it did";
    return Error{ErrorCode::unavailable, "hostagentd stopped before this operation ended: " + why};
  }

  // A start cut short between QEMU's paused launch and its resume left the VM paused, and nothing
  // else would run it: hostagent pauses a VM nowhere else, so the start is finished here.
  Status resume_cut_start(const std::string& vm) {
    HA_TRY_STATUS(owners_.hypervisor->resume(vm));
    owners_.ledger.set_domain(vm, "", virt::DomainState::running);
    log(LogLevel::info, vm + " was left paused by a start hostagentd's stop cut short: resumed",
        {.vm = vm, .operation = "start"});
    return ok_status();
  }

  // A running VM's devices, as its record says they were prepared: a PF driver reloaded while the
  // daemon was down blanks the VFs under a running guest. Only what differs is written.
  void repair_running(service::ReconcileReport& report) {
    for (const auto& entry : owners_.ledger.entries()) {
      if (!entry.managed || !entry.record || entry.state != virt::DomainState::running) continue;
      auto repaired = reapply_devices(work_.effects, *entry.record);
      if (!repaired.ok()) {
        report.problems.push_back(entry.name + ": its devices are not as prepared, and putting them back failed: " +
                                  repaired.error().message);
        continue;
      }
      for (const auto& repair : *repaired) report.repaired.push_back(entry.name + ": " + repair);
    }
  }

  // After a host reboot, the VMs operations.on_host_boot starts again; none after a restart alone.
  std::vector<std::string> after_reboot(service::ReconcileReport& report) {
    const auto before = power_.reboot_record();
    if (!before) return {};
    report.host_rebooted = true;
    if (owners_.maintenance.drains()) {
      log(LogLevel::info, "the host rebooted since hostagentd last ran, and it is " +
                              std::string(service::to_string(owners_.maintenance.view().mode)) +
                              ": no VM is started (after the uncordon, start them: hostagentctl vm start NAME)");
      return {};
    }
    report.boot_starts = boot_starts(owners_.facts.config.on_host_boot, *before, owners_.ledger.entries());
    log(LogLevel::info, "the host rebooted since hostagentd last ran (boot " + before->boot_id +
                            "): operations.on_host_boot " + owners_.facts.config.on_host_boot + " starts " +
                            std::to_string(report.boot_starts.size()) + " VMs (" +
                            std::to_string(before->running.size()) + " were running)");
    return report.boot_starts;
  }

  // Each as a start operation (devices prepared first), on its VM's queue. The power record keeps
  // the last boot's until they have all ended: a daemon killed midway starts them again.
  void start_after_reboot(const std::vector<std::string>& starts) {
    power_.hold(static_cast<int>(starts.size()));
    for (const auto& name : starts) {
      const auto operation = enqueue("start", name);
      queue(operation.id, name, [this, name] {
        auto started = daemon::start_vm(work_, name);
        power_.boot_start_ended(owners_.ledger.entries());
        return started;
      });
    }
    power_.save(owners_.ledger.entries());
  }

  // A drain's stop for every VM hostagent made and every VM an operation is queued for (a create
  // whose VM is not defined yet), each on its VM's queue after what it holds; not for those the
  // drain is stopping already, whose stops keep their deadline. Under admission_mutex_.
  void queue_drain(std::chrono::steady_clock::time_point deadline) {
    std::set<std::string> names;
    for (const auto& entry : owners_.ledger.entries()) {
      if (entry.managed && entry.defined) names.insert(entry.name);
    }
    for (const auto& operation : owners_.operations.list()) {
      if (operation.state == "queued" || operation.state == "running") names.insert(operation.vm);
    }
    for (const auto& name : owners_.maintenance.still_stopping()) names.erase(name);
    owners_.maintenance.stopping({names.begin(), names.end()});
    for (const auto& name : names) {
      const auto operation = enqueue("stop", name);
      queue(operation.id, name, [this, name, deadline]() -> Status {
        if (!owners_.ledger.find(name)) {  // a create the drain waited for failed, or a delete came first
          owners_.maintenance.stop_ended(name, DrainStop::stopped);
          return ok_status();
        }
        auto forced = daemon::drain_vm(work_, name, deadline);
        if (!forced.ok()) {
          owners_.maintenance.stop_ended(name, forced.error());
          return forced.error();
        }
        owners_.maintenance.stop_ended(name, *forced ? DrainStop::powered_off : DrainStop::stopped);
        return ok_status();
      });
    }
  }

  service::VmStatsView stats_view(const virt::DomainStats& domain, const LedgerEntry& entry,
                                  const std::string& read_at) const {
    service::VmStatsView view;
    view.vm = domain.name;
    view.state = worded_state(entry);
    view.read_at = read_at;
    if (domain.cpu_time_ns) view.cpu_seconds = static_cast<double>(*domain.cpu_time_ns) / 1e9;
    view.vcpus = domain.vcpus;
    const auto bytes = [](std::optional<uint64_t> kib) { return kib ? std::optional(*kib * 1024) : std::nullopt; };
    view.memory_bytes = bytes(domain.balloon_kib);
    view.memory_max_bytes = bytes(domain.balloon_max_kib);
    view.rss_bytes = bytes(domain.rss_kib);
    for (const auto& b : domain.blocks) {
      view.blocks.push_back({b.name, b.read_bytes, b.write_bytes, b.read_requests, b.write_requests});
    }
    for (const auto& n : domain.nets) {
      view.interfaces.push_back({n.name, n.rx_bytes, n.tx_bytes, n.rx_packets, n.tx_packets});
    }
    for (const auto& address : entry.record->allocation.devices) {
      const auto* function = owners_.facts.host.find(address);
      ++view.devices[function != nullptr ? std::string(numa::to_string(function->role)) : "other"];
    }
    return view;
  }

  // Events may have been missed while libvirt was away, or a domain changed outside hostagent.
  void resync() {
    service::ReconcileReport report;
    if (auto synced = sync_domains(work_, report, false); !synced.ok()) {
      log(LogLevel::warning, "sync with libvirt failed: " + synced.error().message);
    }
  }

  // Operations left in the journal (a rollback or delete cut short by libvirt going away) are
  // recovered on their VM's queue, so they never race a newer operation on the same VM.
  void recover_journal() {
    auto entries = owners_.journal.entries();
    if (!entries.ok()) {
      log(LogLevel::error, "journal unreadable: " + entries.error().message);
      return;
    }
    for (const auto& entry : *entries) {
      queues_.post(entry.vm, [this, entry] {
        service::ReconcileReport report;
        recover(work_, entry, report);
        for (const auto& problem : report.problems) log(LogLevel::warning, problem);
      });
    }
  }

  PowerKeeper power_;  // before owners_: built from the parts owners_ takes
  Owners owners_;
  VmWork work_;           // refers into owners_
  HostWatch host_watch_;  // after owners_, whose members it reads; stopped first
  std::atomic<int> connection_losses_{0};
  std::atomic<bool> ready_{false};
  std::mutex admission_mutex_;  // a create's or start's checks and enqueue, and a drain's
  std::mutex report_mutex_;
  service::ReconcileReport last_reconcile_;  // the start's; under report_mutex_
  std::mutex stats_mutex_;
  std::optional<std::chrono::steady_clock::time_point> stats_read_;  // under stats_mutex_
  std::vector<service::VmStatsView> stats_;                          // the last read, under stats_mutex_
  uint64_t stats_version_ = 0;  // the ledger's entries_version at that read, under stats_mutex_
  std::mutex list_mutex_;
  service::VmList listed_{0, nullptr};  // the last list_vms(), by its version
  VmQueues queues_;                     // after owners_: destroyed (joined) before it
};

// libvirt opens each VM's serial log in it and fails the start when it is missing
// (virQEMUFileOpenAs: "Failed to create file"). The logs hold what guests print: 0750.
Status create_console_log_directory(const std::filesystem::path& directory) {
  if (directory.empty()) return ok_status();
  std::error_code ec;
  if (std::filesystem::create_directories(directory, ec)) {
    std::filesystem::permissions(directory, std::filesystem::perms(0750), ec);
  }
  if (ec) return errno_error(ec.value(), "create the console log directory", directory.string());
  return ok_status();
}

service::ManagedVmView managed_view(const numa::HostModel& host, const state::VmRecord& record) {
  service::ManagedVmView view;
  view.template_name = record.template_name;
  view.request_id = record.request_id;
  view.created_at = record.created_at;
  view.boot_image = record.inputs.boot_image;
  view.disk_pool = record.inputs.disk_pool;
  view.disk_volume = record.inputs.disk_volume;
  view.macs.assign(record.inputs.macs.begin(), record.inputs.macs.end());
  view.cloud_init_seed = record.inputs.seed_iso;
  view.allocation = record.allocation;
  view.nccl_topology = record.nccl_topology;
  view.nvlink = numa::nvlink_summary(host, record.allocation);
  for (const auto& vf : record.rdma) {
    view.rdma.push_back(service::VfRdmaView{vf.vf, vf.device, vf.port, vf.state, vf.link_layer, vf.roce_v2_gid_index,
                                            vf.node_guid, vf.port_guid});
  }
  return view;
}

}  // namespace

service::VmView view_of(const numa::HostModel& host, OperationTracker& operations, const LedgerEntry& entry) {
  service::VmView view;
  view.name = entry.name;
  // A managed VM's UUID is chosen at create, before libvirt has its domain: the same from the start.
  view.uuid = entry.uuid.empty() && entry.record ? entry.record->uuid : entry.uuid;
  view.managed = entry.managed;
  view.state = worded_state(entry);
  if (const auto progress = operations.progress_of(entry.name)) {
    view.operation = progress->operation;
    view.step = progress->step;
  }
  view.last_event = entry.last_event;
  if (entry.record) view.record = managed_view(host, *entry.record);
  return view;
}

Result<std::unique_ptr<service::VmService>> start_service(ServiceParts parts) {
  HA_ASSERT(parts.hypervisor && parts.devices && parts.clock && parts.readers.write_seed);
  HA_TRY(auto journal, state::Journal::open(parts.config.state_directory / "journal"));
  HA_TRY(auto requests, state::CreateRequests::open(parts.config.state_directory / "requests"));
  HA_TRY(auto operations, state::OperationRecords::open(parts.config.state_directory / "operations"));
  HA_TRY_STATUS(create_console_log_directory(parts.config.console_log_directory));
  numa::HostPolicy policy;
  policy.housekeeping_cpus = parts.config.housekeeping_cpus;
  policy.releasable_drivers = parts.config.devices.releasable_drivers;
  const auto health_interval = parts.device_health_interval;
  auto service = std::make_unique<VmServiceImpl>(std::move(parts), std::move(journal), std::move(requests),
                                                 std::move(operations), std::move(policy), health_interval);
  HA_TRY_STATUS(service->begin());
  return std::unique_ptr<service::VmService>(std::move(service));
}

}  // namespace hostagent::daemon
