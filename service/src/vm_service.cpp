// service/vm_service: the commands begun and waited for, for callers with a thread to block.
#include "hostagent/service/vm_service.hpp"

namespace hostagent::service {
namespace {

// The operation's error when it failed, else the VM as it is now.
Result<VmView> finished(VmService& service, const VmName& name, const Result<OperationView>& begun) {
  if (!begun.ok()) return begun.error();
  HA_TRY(const auto ended, service.wait(begun->id));
  if (ended.error) return *ended.error;
  return service.get_vm(name);
}

}  // namespace

std::string_view to_string(MaintenanceMode mode) {
  switch (mode) {
    case MaintenanceMode::in_service:
      return "in_service";
    case MaintenanceMode::cordoned:
      return "cordoned";
    case MaintenanceMode::draining:
      return "draining";
    case MaintenanceMode::drained:
      return "drained";
  }
  return "in_service";
}

Result<VmView> create_vm(VmService& service, const CreateVmRequest& request) {
  return finished(service, request.name, service.begin_create(request));
}
Result<VmView> start_vm(VmService& service, const VmName& name) {
  return finished(service, name, service.begin_start(name));
}
Result<VmView> stop_vm(VmService& service, const VmName& name, bool force) {
  return finished(service, name, service.begin_stop(name, force));
}
Result<VmView> reboot_vm(VmService& service, const VmName& name) {
  return finished(service, name, service.begin_reboot(name));
}
Status delete_vm(VmService& service, const VmName& name) {
  HA_TRY(const auto begun, service.begin_delete(name));
  HA_TRY(const auto ended, service.wait(begun.id));
  if (ended.error) return *ended.error;
  return ok_status();
}

}  // namespace hostagent::service
