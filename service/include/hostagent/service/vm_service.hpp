// service/vm_service: the daemon's command interface, the one the REST API drives. Each
// command on a VM is an operation: a sequence of journaled steps that rolls back on failure.
// Commands for one VM run in the order they arrive; commands for different VMs run in parallel, and
// placement is serialized so nothing is given twice. Thread-safe. A VM's command has one form:
// begun, it answers at once with its operation, which wait() follows to its end; the free functions
// below do both for a caller that has a thread to block (hostagentd --exec, tests, benchmarks).
// A device's two commands answer with the device's own record instead, never an operation:
// clean_device begins the device's cleaning and answers with it (followed in cleaning(), its events
// and the evidence log, the cleaning's one record: as an operation too it would be written twice),
// and clear_quarantine changes the device's state at once and answers with what it cleared. The
// interface the edges drive: it names values of the pure layer and its own, nothing of the
// adapters or of the daemon's state; service_parts.hpp starts one.
#pragma once

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "hostagent/common/hardware_ids.hpp"
#include "hostagent/common/names.hpp"
#include "hostagent/common/result.hpp"
#include "hostagent/fleet/provider_tree.hpp"
#include "hostagent/numa/device_health.hpp"
#include "hostagent/numa/host_model.hpp"
#include "hostagent/numa/placement.hpp"
#include "hostagent/vmtemplates/vm_template.hpp"

namespace hostagent::service {

// Names and MACs arrive checked (common/names, common/hardware_ids): the edge that took the text in
// built them, so the service never sees a name that breaks the rule.
struct CreateVmRequest {
  VmName name;
  TemplateName template_name;         // a template from the configured directories
  std::string request_id = {};        // optional: a retried create with the same id returns the VM, not a conflict
  std::string boot_image = {};        // optional: overrides the template's boot.image (absolute path)
  std::vector<MacAddress> macs = {};  // optional: one per VF, in placement order
  // optional, one or the other: reach the guest through a cloud-init NoCloud seed (a CD-ROM)
  std::vector<std::string> ssh_authorized_keys = {};
  std::string user_data = {};
  // optional: the VM's UUID (common/names' Uuid, in lower case), which a fleet's control plane
  // chooses: it is the Placement consumer that claimed `claim`, the allocations Placement granted
  // on this host (docs/placement.md). With a claim the VM gets exactly what it claimed.
  std::optional<Uuid> uuid = {};
  fleet::ProviderResources claim = {};
};

// A NIC VF's RDMA port as the host saw it at create, before the guest took the VF: what the guest's
// NCCL needs to find the same port and GID.
struct VfRdmaView {
  PciAddress vf;
  std::string host_device;  // the host's name for it, "mlx5_12"; the guest names its own
  int port = 1;
  std::string state;                     // the port's: "ACTIVE", "DOWN", ...
  std::string link_layer;                // "Ethernet" (RoCE) or "InfiniBand"
  std::optional<int> roce_v2_gid_index;  // RoCE: the GID NCCL picks by default; nullopt otherwise
  std::string node_guid;                 // "xxxx:xxxx:xxxx:xxxx"
  std::string port_guid;                 // InfiniBand only; "" otherwise
  bool operator==(const VfRdmaView&) const = default;
};

// What a managed VM was made from and holds, as the daemon recorded it at create.
struct ManagedVmView {
  std::string template_name;
  std::string request_id;         // the create's, "" none
  std::string created_at;         // RFC 3339, UTC
  std::string boot_image;         // the image its disk overlays; "" none
  std::string disk_pool;          // the libvirt storage pool of its disk's overlay; "" none
  std::string disk_volume;        // the overlay volume in disk_pool; "" none
  std::vector<std::string> macs;  // VF MACs as requested; empty: derived
  std::string cloud_init_seed;    // the NoCloud seed's path; "" none
  numa::Allocation allocation;
  std::string nccl_topology;  // the file rendered for the guest
  // Whether its GPUs have NVLink, and why (numa/nvlink.hpp); "" on a host without NVSwitches.
  std::string nvlink;
  std::vector<VfRdmaView> rdma;  // one per NIC VF the host had an RDMA device under, in placement order
};

struct VmView {
  std::string name;
  std::string uuid;
  bool managed = false;                 // made by hostagent; other domains are reported, never touched
  std::string state;                    // libvirt's, worded: "running", "shut off", ...; "absent" before define
  std::string operation;                // the operation in flight ("create", "delete", ...), "" when none
  std::string step;                     // its current step
  std::string last_event;               // the latest lifecycle event: "stopped (shutdown)", "crashed (panicked)", ...
  std::optional<ManagedVmView> record;  // what a managed VM holds
};

// The VMs, and the version of the list: the same version is the same list, so an answer built from
// one may be given again while the version stays (GET /v1/vms); any change to a VM's state, record,
// last event or the operation at work on it moves the version. Iterates like the vector it holds.
struct VmList {
  uint64_t version = 0;
  std::shared_ptr<const std::vector<VmView>> vms = std::make_shared<const std::vector<VmView>>();
  std::vector<VmView>::const_iterator begin() const { return vms->begin(); }
  std::vector<VmView>::const_iterator end() const { return vms->end(); }
  std::size_t size() const { return vms->size(); }
};

// One phase of a VM's way to a running guest, measured by the create or start that took it there
// (docs/operations.md, "Timeline"). Phases end one after another: each took `seconds` from the end
// of the one before, the first from the operation's start.
struct TimelinePhase {
  std::string name;      // placement, render, ..., launch, resume, kernel, up (docs/operations.md)
  std::string ended_at;  // RFC 3339, UTC, to the millisecond
  double seconds = 0;
  std::string detail;  // what was measured with it ("2 allocation threads per cell"); "" none
};

// An operation as the API reports it: queued behind the VM's earlier operations, then running step
// by step, then finished. Kept for a while after it ends (see VmService::operation).
struct OperationView {
  std::string id;    // "op-<run>-<n>": never names two operations, across restarts too
  std::string kind;  // create | delete | start | stop | reboot
  std::string vm;
  std::string request_id;               // the create's, "" otherwise
  std::string template_name;            // the create's, or the started VM's; "" otherwise
  std::string state;                    // queued | running | succeeded | failed
  std::string step;                     // the step running, or the last one run; "" while queued
  int step_number = 0;                  // 1-based position of `step` among the operation's steps; 0 while queued
  int step_count = 0;                   // known once it runs (create's depend on disk and seed); 0 while queued
  std::optional<Error> error;           // when failed
  std::string submitted_at;             // RFC 3339, UTC
  std::string started_at;               // "" while queued
  std::string finished_at;              // "" until it ends
  double duration_seconds = 0;          // from start to end; 0 until it ends
  std::vector<TimelinePhase> timeline;  // create and start: the phases so far, in order; empty for others
};

// A device kept out of placement until an operator clears it: the kernel would not bind it to
// vfio-pci, or it fell off the bus. It stays out across restarts and host reboots.
struct QuarantineView {
  PciAddress address;
  std::string step;    // what failed: "bind to vfio-pci", "health"
  std::string reason;  // what the kernel said, or what was seen
  std::string vm;      // whose preparation found it; "" none
  std::string since;   // when (UTC)
};

// A tenant's device out of placement until its cleaning passes (issue 19's lifecycle). Marked
// before the VM is given it, cleaned once no VM holds it: reset, firmware, erase, scrub, each
// step checked; then free, or quarantined with the step that failed.
struct CleaningView {
  PciAddress address;
  std::string vm;       // the VM that held it; "" for a cleaning an operator asked for
  std::string since;    // when it was marked (UTC)
  std::string held_by;  // the VM still holding it (cleaned once it lets go); "" when none
  std::string step;     // the step running now; "" while waiting
};

// One step of a cleaning, as its evidence holds it.
struct CleaningStepView {
  std::string name;    // reset | firmware | erase | scrub | vf-neutral
  std::string result;  // passed | failed | skipped
  std::string detail;  // what was seen: the reset method, the ROM's hash, why it was skipped
  std::string started_at;
  std::string finished_at;
  double seconds = 0;  // how long the step took
};

// One cleaning of one device, as the hash-chained evidence log holds it.
struct CleaningRecordView {
  uint64_t sequence = 0;  // its line in the log, from 1
  PciAddress address;
  std::string role;     // gpu | nic | nvme | nvswitch | other
  std::string vm;       // the VM that held it; "" none
  std::string outcome;  // clean | quarantined
  std::string started_at;
  std::string finished_at;
  std::vector<CleaningStepView> steps;
  std::string previous_sha256;  // the line before's digest
  std::string sha256;           // this line's digest
};

// Every cleaning of one device, oldest first, from the evidence log.
// The end of a VM's serial console log: what the guest printed, as virtlogd keeps it (the log
// rotates: this is the current file's end).
struct ConsoleLogView {
  std::string text;         // the last lines asked for, within kConsoleTailBytes
  uint64_t file_bytes = 0;  // the log's size when read
  bool whole = false;       // text is the whole log
};
inline constexpr std::size_t kMaxConsoleTailLines = 10000;
inline constexpr std::size_t kConsoleTailBytes = 1U << 20U;

// A VM's serial console, joined for one interactive client (the API's WebSocket). The guest's
// output waits here, at most kConsoleOutputBytes: beyond it the oldest is dropped, and the next
// take() says how much, so a client that reads slowly or not at all never makes the guest wait.
class ConsoleSession {
 public:
  virtual ~ConsoleSession() = default;  // detaches: the guest and its console go on
  // The guest's output waiting now; "" when none.
  virtual std::string take() = 0;
  // Bytes for the guest; how many it took (fewer when the guest has not read what came before:
  // offer the rest after a wake). None once ended.
  virtual std::size_t put(std::string_view bytes) = 0;
  // `wake` is called once, from any thread, when output waits, input has room again or the session
  // ended; at once when one of those holds already.
  virtual void wait(std::function<void()> wake) = 0;
  // Why the session ended (the guest stopped, another client took the console over), once it has;
  // take() still gives what the guest wrote before.
  virtual std::optional<std::string> ended() = 0;
};
inline constexpr std::size_t kConsoleOutputBytes = std::size_t{256} << 10U;

struct DeviceHistoryView {
  PciAddress address;
  std::vector<CleaningRecordView> cleanings;
  // "" when the log's chain is whole; else where it breaks and why: what follows the break is not
  // vouched for and not shown.
  std::string chain_broken;
};

// What changed, for the API's event stream. Sinks run on the thread that made the change (an
// operation thread, libvirt's event thread): they must return quickly and never call back into
// the service.
// A VM's devices let go together, once the last of them left cleaning (freed or quarantined): the
// wall time from the first of them seen waiting to then, beside the sum of their cleanings' steps
// (how much running them side by side saved).
struct ReleaseCleaningView {
  std::size_t devices = 0;
  double seconds = 0;
  double steps_seconds = 0;
};

// One VM's figures (GET /v1/vms/{name}/stats, the vm-labelled metrics), from libvirt's statistics
// of every domain read in one call and kept for kVmStatsMaxAge or until a VM is made, deleted or
// changes state, so that a scrape, a poll and a `vm top` together cost one call, never one per VM,
// and a deleted VM's figures are never shown. A figure libvirt did not report (its test
// driver reports only the state) is absent, never 0. Counters run from the VM's QEMU start.
struct VmBlockStatsView {
  std::string device;  // the guest's target: "vda"
  uint64_t read_bytes = 0, write_bytes = 0, read_requests = 0, write_requests = 0;
};
struct VmNetStatsView {
  std::string interface;  // the host side: "vnet3"
  uint64_t rx_bytes = 0, tx_bytes = 0, rx_packets = 0, tx_packets = 0;
};
struct VmStatsView {
  std::string vm;
  std::string state;    // as list_vms() words it
  std::string read_at;  // when libvirt was asked (RFC 3339, ms)
  std::optional<double> cpu_seconds;
  std::optional<uint64_t> vcpus;
  std::optional<uint64_t> memory_bytes;      // the balloon's current size: what the guest has
  std::optional<uint64_t> memory_max_bytes;  // the balloon's maximum
  std::optional<uint64_t> rss_bytes;         // QEMU's resident set
  std::vector<VmBlockStatsView> blocks;
  std::vector<VmNetStatsView> interfaces;
  std::map<std::string, int> devices;  // the PCI functions it holds, by role ("gpu": 8)
};
inline constexpr std::chrono::seconds kVmStatsMaxAge{5};

// Whether the host takes VMs (docs/maintenance.md). cordoned: creates are refused,
// the VMs it has run on; draining: cordoned, and each of its VMs is being stopped (gracefully, then
// forced at the drain's deadline), starts refused too; drained: every VM stopped by the drain, and
// none started at the host's next boot. Durable across restarts and reboots.
enum class MaintenanceMode { in_service, cordoned, draining, drained };
std::string_view to_string(MaintenanceMode mode);

// One VM of a drain: "stopping" (its stop queued or under way), "stopped" (it powered off when
// asked), "powered_off" (forced at the deadline), "failed" (the stop failed: `error`; it may still
// run, and drain again tries again).
struct DrainVmView {
  std::string vm;
  std::string state;
  std::string error;
  bool operator==(const DrainVmView&) const = default;
};

struct MaintenanceView {
  MaintenanceMode mode = MaintenanceMode::in_service;
  std::string reason;            // the operator's words, as given to cordon or drain ("" in service)
  std::string principal;         // who made the last change (the API's principal)
  std::string since;             // when the last change was made (RFC 3339); "" when never in maintenance
  std::string deadline;          // draining and drained: when the drain forces what still runs (RFC 3339)
  std::vector<DrainVmView> vms;  // the drain's VMs, by name, as this run of the daemon drove them
  bool operator==(const MaintenanceView&) const = default;
};

// A reason given to cordon or drain: 1 to kMaxMaintenanceReasonBytes of UTF-8 without control
// characters (the edge checks it; the record refuses any other).
inline constexpr std::size_t kMaxMaintenanceReasonBytes = 256;
// A drain's grace, from the drain to the deadline at which whatever still runs is powered off.
inline constexpr std::chrono::seconds kMaxDrainGrace{24 * 3600};
inline constexpr std::chrono::seconds kDefaultDrainGrace{300};

struct ServiceEvent {
  enum class Kind { vm, operation, device, quarantine, cleaning, maintenance };
  Kind kind = Kind::vm;
  std::string vm;                          // the VM concerned
  std::string vm_state;                    // vm: its state after the change ("absent" once gone)
  std::string detail;                      // vm: the lifecycle event ("started (booted)", "defined", "undefined")
  std::optional<OperationView> operation;  // operation: the operation as it now is
  std::vector<PciAddress> devices;         // device: the devices that changed hands
  bool held = false;                       // device: true when now held by `vm`, false when released
  // quarantine: the device (in `devices`) quarantined, as recorded; nullopt when a quarantine was cleared
  std::optional<QuarantineView> quarantine;
  // cleaning: the device (in `devices`) marked for cleaning, or its cleaning begun (`step` set);
  // nullopt when it ended, then `cleaned` says how
  std::optional<CleaningView> cleaning;
  std::optional<CleaningRecordView> cleaned;
  // cleaning or quarantine: set on the event of the last device of a VM's release to end
  // (ReleaseCleaningView).
  std::optional<ReleaseCleaningView> release;
  // maintenance: the host's maintenance after the change (a mode changed, or a drained VM's stop ended)
  std::optional<MaintenanceView> maintenance;
};

using ServiceEventSink = std::function<void(const ServiceEvent&)>;

// One reading of every PCI device's health, shared and never changed: a reader that kept one tells
// a newer reading by its address, and a read copies nothing.
using DeviceHealthReading = std::shared_ptr<const std::vector<numa::DeviceHealth>>;

// Reads of what the host has and who holds what, for capacity, devices and metrics.
struct HostUsage {
  const numa::HostModel* host = nullptr;  // the service's; lives as long as the service
  std::vector<numa::Allocation> held;     // one per VM holding anything
  uint64_t version = 0;                   // changes whenever `held` or policy.withheld may have
  numa::HostPolicy policy;                // what placement is told (housekeeping CPUs), for capacity
};

struct ReconcileReport {
  std::vector<std::string> adopted;      // managed VMs found in libvirt
  std::vector<std::string> foreign;      // domains hostagent did not make (or whose record it cannot read)
  std::vector<std::string> finished;     // interrupted operations completed ("delete vm1")
  std::vector<std::string> rolled_back;  // interrupted operations undone ("create vm2")
  std::vector<std::string> released;     // leftovers no VM held (volumes, devices)
  std::vector<std::string> problems;     // what could not be recovered, and why
  // Devices of running VMs found not as prepared and put back ("vm1: VF 2 of ens1f0 configured again (...)")
  std::vector<std::string> repaired;
  bool host_rebooted = false;            // the host's boot differs from the one the daemon last ran in
  std::vector<std::string> boot_starts;  // VMs operations.on_host_boot started again (each a start operation)
};

struct ServiceStatus {
  bool ready = false;  // false until the first reconcile ends, and while a resync after a reconnect runs
  bool libvirt_connected = false;
  int libvirt_connection_losses = 0;  // since start
  int managed_vms = 0;
  int foreign_domains = 0;
  std::map<std::string, int> vms_by_state;  // managed and foreign, by the state list_vms() reports
  int operations_in_flight = 0;
  ReconcileReport last_reconcile;
};

class VmService {
 public:
  virtual ~VmService() = default;

  // Each queues its operation on the VM's queue and answers at once with it, to poll or wait for.
  // A create whose request id matches an earlier create of this run returns that operation when
  // the name and template match, conflict (naming the VM) when they do not. A create whose VM
  // already exists with that request id (from before a restart) gets an operation that succeeds.
  // Validation that needs no queue (names, fields, a VM that does not exist) fails here, before an
  // operation exists.
  virtual Result<OperationView> begin_create(const CreateVmRequest& request) = 0;
  virtual Result<OperationView> begin_start(const VmName& name) = 0;
  // Graceful (ACPI) for up to stop_timeout, then forced; force skips the grace.
  virtual Result<OperationView> begin_stop(const VmName& name, bool force) = 0;
  virtual Result<OperationView> begin_reboot(const VmName& name) = 0;
  virtual Result<OperationView> begin_delete(const VmName& name) = 0;
  // The operation once it has ended (succeeded, or failed with its error), blocking until then.
  // not_found as operation() is. Never call it on an operation thread: the queue it waits on is its own.
  virtual Result<OperationView> wait(const std::string& id) = 0;
  // not_found when the id is unknown or the operation ended more than an hour (or 1000 operations) ago.
  virtual Result<OperationView> operation(const std::string& id) = 0;
  virtual std::vector<OperationView> operations() = 0;  // newest first

  virtual Result<VmView> get_vm(const VmName& name) = 0;
  // The VM's last creates and starts (at most 10), newest first, each with its timeline, kept past
  // the operations' hour and across restarts; not_found for a VM that does not exist.
  virtual Result<std::vector<OperationView>> vm_starts(const VmName& name) = 0;
  virtual VmList list_vms() = 0;
  virtual ServiceStatus status() = 0;

  // Events from now on; the returned id unsubscribes. Unsubscribing waits for a running sink.
  virtual uint64_t subscribe(ServiceEventSink sink) = 0;
  virtual void unsubscribe(uint64_t id) = 0;

  virtual HostUsage usage() = 0;
  // The quarantined devices, oldest first; a device the host no longer shows stays listed.
  virtual std::vector<QuarantineView> quarantined() = 0;
  // Puts a quarantined device back into placement, logged with who asked (the API's principal) and
  // what the quarantine was. not_found when the device is not quarantined.
  virtual Result<QuarantineView> clear_quarantine(const PciAddress& address, const std::string& principal) = 0;
  // The devices marked for cleaning, held or not, oldest first.
  virtual std::vector<CleaningView> cleaning() = 0;
  // Cleans a device again (a quarantined one too: it is freed only if the cleaning passes), logged
  // with who asked. not_found when the host has no such device to give to a VM; conflict when a VM
  // holds it (it is cleaned when the VM lets it go) or its cleaning is already under way.
  virtual Result<CleaningView> clean_device(const PciAddress& address, const std::string& principal) = 0;
  // Every cleaning of the device on record, from the evidence log. not_found when the host has no
  // such device and the log names none.
  virtual Result<DeviceHistoryView> device_history(const PciAddress& address) = 0;
  // The latest cleaning of each device that was ever cleaned, by address: what a device view shows
  // of its last tenant's hygiene (a step skipped, such as "not scrubbed: no scrubber configured").
  virtual std::map<PciAddress, CleaningRecordView> last_cleanings() = 0;
  // The templates the service creates from, by name.
  virtual const std::map<std::string, vmtemplates::VmTemplate>& templates() const = 0;
  // The domain XML as libvirt has it now (live when running); the NCCL topology file rendered for
  // the VM at create. not_found for a VM hostagent did not make.
  virtual Result<std::string> domain_xml(const VmName& name) = 0;
  virtual Result<std::string> nccl_topology(const VmName& name) = 0;
  // The last `lines` lines (1 to kMaxConsoleTailLines) of the VM's console log. not_found for a VM
  // hostagent did not make; an empty text while its guest has printed nothing, and always on
  // libvirt's test driver, whose domains print nothing.
  virtual Result<ConsoleLogView> console_log(const VmName& name, std::size_t lines) = 0;
  // The serial console of a running VM hostagent made, for one interactive client at a time: while
  // another session holds it, conflict naming who and since when, unless `take_over`, which ends
  // that session ("taken over by PRINCIPAL"). not_found for a VM hostagent did not make; conflict
  // when it is not running, or when a client outside hostagent holds the console (virsh console).
  // Logged with who asked.
  virtual Result<std::shared_ptr<ConsoleSession>> open_console(const VmName& name, bool take_over,
                                                               const std::string& principal) = 0;
  // Every PCI device's health (link trained below its capability, AER counters, gone), from sysfs:
  // the latest reading, never null when ok.
  virtual Result<DeviceHealthReading> device_health() = 0;
  // The host model with each function's ACS and ATS control as its config space holds them now:
  // device preparation changes them after discovery. When config space cannot be read (a device
  // gone), the discovered values stay, and the device's health says why.
  virtual numa::HostModel host_now() = 0;

  // Every VM hostagent made, by name, with its figures (VmStatsView); unavailable while libvirt is.
  virtual Result<std::vector<VmStatsView>> vm_stats() = 0;

  // The host's maintenance now.
  virtual MaintenanceView maintenance() = 0;
  // No new VMs from now on: begin_create answers conflict naming the maintenance and its reason.
  // Cordoning a cordoned host changes its reason; conflict while draining or drained (uncordon ends
  // those). Logged with who asked.
  virtual Result<MaintenanceView> cordon(const std::string& reason, const std::string& principal) = 0;
  // Cordons and stops every VM hostagent made, each on its own queue after what it already had:
  // gracefully (guest agent, else ACPI) until now + grace, then powered off. begin_start answers
  // conflict from now on, and the host's next boot starts none of them. When every stop has ended
  // without a failure the mode is drained. A drain again (say, after a stop failed) takes the new
  // reason and deadline and stops what still runs.
  virtual Result<MaintenanceView> drain(const std::string& reason, std::chrono::seconds grace,
                                        const std::string& principal) = 0;
  // Back in service: creates and starts are taken again. A drain's stops already queued still run.
  virtual Result<MaintenanceView> uncordon(const std::string& principal) = 0;
};

// A command begun and waited for: the operation's error when it failed, else the VM as it is now.
Result<VmView> create_vm(VmService& service, const CreateVmRequest& request);
Result<VmView> start_vm(VmService& service, const VmName& name);
Result<VmView> stop_vm(VmService& service, const VmName& name, bool force);
Result<VmView> reboot_vm(VmService& service, const VmName& name);
Status delete_vm(VmService& service, const VmName& name);

}  // namespace hostagent::service
