// daemon/vm_steps (private): the effects of each step, by name, shared by the operations that run
// them and by reconcile, which finishes or undoes them after a crash. Every function here is
// idempotent and touches a domain only when its UUID is the record's: a same-named domain someone
// else made is never destroyed or undefined.
#pragma once

#include <string>
#include <vector>

#include "context.hpp"

namespace hostagent::daemon {

// Create: disk, seed, prepare_devices, define, start (reservation precedes them, in memory only).
Status undo_create_step(Context& context, const state::VmRecord& record, const std::string& step);

// Delete: destroy, undefine, delete_disk, delete_seed, release_devices. Finished forward, never undone.
const std::vector<std::string>& delete_steps();
Status run_delete_step(Context& context, const state::VmRecord& record, const std::string& step);

}  // namespace hostagent::daemon
