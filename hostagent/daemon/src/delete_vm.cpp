// daemon/delete_vm: destroy, undefine, delete the disk, release the devices, then the reservation.
// Finished forward: once a delete has begun, a failure or a crash leaves it in the journal and
// reconcile completes it; it is never undone into a half-deleted VM.
#include "daemon_log.hpp"
#include "operation.hpp"
#include "operations.hpp"
#include "vm_steps.hpp"

namespace hostagent::daemon {

Status delete_vm(Effects& effects, Recording& recording, const std::string& name) {
  const auto entry = effects.ledger.find(name);
  if (!entry) return Error{ErrorCode::not_found, "no VM named " + name};
  if (!entry->managed || !entry->record) {
    return Error{
        ErrorCode::conflict,
        "domain " + name + " was not made by hostagent: it is reported, never changed; remove it with libvirt"};
  }
  auto record = *entry->record;
  std::vector<Step> steps;
  for (const auto& step : delete_steps()) {
    steps.push_back({std::string(step.name), [&effects, &record, &step] { return step.run(effects, record); }});
  }
  Operation operation(recording, state::OperationKind::remove, record);
  HA_TRY_STATUS(operation.run(steps, nullptr));
  release_vm(effects, name);
  // Tidiness, not safety: a history a crash leaves here is replaced by the next create of the name,
  // or forgotten at the next start when no VM has the name.
  recording.operations.forget_starts(name);
  log(LogLevel::info, "deleted " + name, {.vm = name, .operation = "delete"});
  return ok_status();
}

}  // namespace hostagent::daemon
