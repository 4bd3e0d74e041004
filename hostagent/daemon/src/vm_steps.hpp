// daemon/vm_steps (private): the steps of the journaled operations as tables, one line per step with
// what runs it and what undoes it. The operations run them, rollback undoes them newest first, and
// reconcile finishes or undoes them after a crash, all from the same rows. Every effect here is
// idempotent and touches a domain only when its UUID is the record's: a same-named domain someone
// else made is never destroyed or undefined.
#pragma once

#include <string_view>
#include <vector>

#include "vm_work.hpp"

namespace hostagent::daemon {

// A step's effect on the VM a record describes.
using StepEffect = Status (*)(Effects& effects, const state::VmRecord& record);

// Create's steps (disk, seed, prepare_devices, define, start: create_vm.cpp's table, where each
// one's run needs the shape and placement), by name in run order.
std::vector<std::string_view> create_step_names();
// What undoes a create step, or commit (nothing); from create's table. The journal admits no other
// name (state::journaled_steps), so any other is this program's error: it aborts.
StepEffect create_undo(std::string_view step);

// Delete's steps: finished forward, never undone.
struct DeleteStep {
  std::string_view name;
  StepEffect run;
};
const std::vector<DeleteStep>& delete_steps();

// The effects the tables are made of.
Status destroy_if_ours(Effects& effects, const state::VmRecord& record);
Status undefine_if_ours(Effects& effects, const state::VmRecord& record);
Status delete_disk(Effects& effects, const state::VmRecord& record);
Status delete_seed(Effects& effects, const state::VmRecord& record);
Status release_devices(Effects& effects, const state::VmRecord& record);
// Not a table's step: the VM's devices put back as prepared (DevicePreparer::reapply) before its
// domain starts, and at reconcile for a running one. Each repair is logged; returns them.
Result<std::vector<std::string>> reapply_devices(Effects& effects, const state::VmRecord& record);
Status no_effect(Effects& effects, const state::VmRecord& record);

// Not a step: the VM's reservation let go in the ledger, after its steps are done or undone. Its
// devices, marked when they were prepared, go to cleaning (daemon/device_lifecycle), not to free.
void release_vm(Effects& effects, const std::string& name);

}  // namespace hostagent::daemon
