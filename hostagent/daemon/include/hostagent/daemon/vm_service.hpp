// hostagent/daemon/vm_service: the daemon's command interface, the one the REST API drives. Each
// command is an operation on one VM: a sequence of journaled steps that rolls back on failure.
// Commands for one VM run in the order they arrive; commands for different VMs run in parallel, and
// placement is serialized so nothing is given twice. Thread-safe; every call may block on libvirt,
// so network threads use the submit_* forms.
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "hostagent/common/result.hpp"
#include "hostagent/config/daemon_config.hpp"
#include "hostagent/daemon/clock.hpp"
#include "hostagent/daemon/device_preparer.hpp"
#include "hostagent/daemon/step_hook.hpp"
#include "hostagent/numa/host_model.hpp"
#include "hostagent/state/vm_record.hpp"
#include "hostagent/virt/hypervisor.hpp"
#include "hostagent/vmtemplates/vm_template.hpp"

namespace hostagent::daemon {

struct CreateVmRequest {
  std::string name;               // [A-Za-z0-9_.-]{1,64}
  std::string template_name;      // a template from the configured directories
  std::string request_id;         // optional: a retried create with the same id returns the VM, not a conflict
  std::string boot_image;         // optional: overrides the template's boot.image (absolute path)
  std::vector<std::string> macs;  // optional: one per VF, in placement order
  // optional, one or the other: reach the guest through a cloud-init NoCloud seed (a CD-ROM)
  std::vector<std::string> ssh_authorized_keys;
  std::string user_data;
};

struct VmView {
  std::string name;
  std::string uuid;
  bool managed = false;                   // made by hostagent; other domains are reported, never touched
  std::string state;                      // libvirt's, worded: "running", "shut off", ...; "absent" before define
  std::string operation;                  // the operation in flight ("create", "delete", ...), "" when none
  std::string step;                       // its current step
  std::string last_event;                 // the latest lifecycle event: "stopped (shutdown)", "crashed (panicked)", ...
  std::optional<state::VmRecord> record;  // what a managed VM holds
};

struct ReconcileReport {
  std::vector<std::string> adopted;      // managed VMs found in libvirt
  std::vector<std::string> foreign;      // domains hostagent did not make (or whose record it cannot read)
  std::vector<std::string> finished;     // interrupted operations completed ("delete vm1")
  std::vector<std::string> rolled_back;  // interrupted operations undone ("create vm2")
  std::vector<std::string> released;     // leftovers no VM held (volumes, devices)
  std::vector<std::string> problems;     // what could not be recovered, and why
};

struct ServiceStatus {
  bool libvirt_connected = false;
  int libvirt_connection_losses = 0;  // since start
  int managed_vms = 0;
  int foreign_domains = 0;
  int operations_in_flight = 0;
  ReconcileReport last_reconcile;
};

// Everything the service works with, assembled by the caller (main, or a test).
struct ServiceParts {
  config::DaemonConfig config;
  numa::HostModel host;
  std::map<std::string, vmtemplates::VmTemplate> templates;
  std::unique_ptr<virt::Hypervisor> hypervisor;
  std::unique_ptr<DevicePreparer> devices;
  std::shared_ptr<Clock> clock;
  std::shared_ptr<StepHook> hook;  // null in production
};

class VmService {
 public:
  // Opens the journal, subscribes to libvirt's events and reconciles: returns once the state is
  // known, before anyone is served.
  static Result<std::unique_ptr<VmService>> start(ServiceParts parts);
  virtual ~VmService() = default;

  virtual Result<VmView> create_vm(const CreateVmRequest& request) = 0;
  virtual Result<VmView> start_vm(const std::string& name) = 0;
  // Graceful (ACPI) for up to stop_timeout, then forced; force skips the grace.
  virtual Result<VmView> stop_vm(const std::string& name, bool force) = 0;
  virtual Result<VmView> reboot_vm(const std::string& name) = 0;
  virtual Status delete_vm(const std::string& name) = 0;
  virtual Result<VmView> get_vm(const std::string& name) = 0;
  virtual std::vector<VmView> list_vms() = 0;
  virtual ServiceStatus status() = 0;

  // The same operations, queued; `done` runs on an operation thread when the operation ends.
  virtual void submit_create(CreateVmRequest request, std::function<void(Result<VmView>)> done) = 0;
  virtual void submit_start(std::string name, std::function<void(Result<VmView>)> done) = 0;
  virtual void submit_stop(std::string name, bool force, std::function<void(Result<VmView>)> done) = 0;
  virtual void submit_reboot(std::string name, std::function<void(Result<VmView>)> done) = 0;
  virtual void submit_delete(std::string name, std::function<void(Status)> done) = 0;
};

// What main wires: discovers the host (or writes the simulated one), loads the templates, connects
// to libvirt. Call before starting any thread of your own: hwloc discovery sets the environment.
Result<ServiceParts> assemble_parts(const config::DaemonConfig& config);

}  // namespace hostagent::daemon
