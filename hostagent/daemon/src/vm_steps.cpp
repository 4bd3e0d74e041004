// daemon/vm_steps: step effects for rollback and recovery.
#include "vm_steps.hpp"

#include <filesystem>

#include "hostagent/daemon/log.hpp"

namespace hostagent::daemon {
namespace {

// Whether the domain called record.name is the one this record made. Absent: false.
Result<bool> is_ours(Context& context, const state::VmRecord& record) {
  auto domain = context.hypervisor->lookup(record.name);
  if (!domain.ok()) {
    if (domain.error().code == ErrorCode::not_found) return false;
    return std::move(domain).error();
  }
  if (domain->uuid == record.uuid) return true;
  log(LogLevel::warning,
      "domain " + record.name + " has UUID " + domain->uuid + ", not " + record.uuid +
          " as hostagent's record says: left alone",
      {.vm = record.name});
  return false;
}

Status destroy_if_ours(Context& context, const state::VmRecord& record) {
  HA_TRY(const bool ours, is_ours(context, record));
  return ours ? context.hypervisor->destroy(record.name) : ok_status();
}

Status undefine_if_ours(Context& context, const state::VmRecord& record) {
  HA_TRY(const bool ours, is_ours(context, record));
  if (!ours) return ok_status();
  // A running persistent domain that is undefined keeps running as a transient one: stop it first.
  HA_TRY_STATUS(context.hypervisor->destroy(record.name));
  return context.hypervisor->undefine(record.name);
}

Status delete_disk(Context& context, const state::VmRecord& record) {
  if (record.inputs.disk_volume.empty()) return ok_status();
  return context.hypervisor->delete_volume(record.inputs.disk_pool, record.inputs.disk_volume);
}

Status delete_seed(const state::VmRecord& record) {
  if (record.inputs.seed_iso.empty()) return ok_status();
  std::error_code ec;
  std::filesystem::remove(record.inputs.seed_iso, ec);  // absent: false, no error
  if (ec) return errno_error(ec.value(), "remove", record.inputs.seed_iso);
  return ok_status();
}

}  // namespace

// The journal refuses an entry naming a step outside its kind's vocabulary (state::journaled_steps),
// so a step no branch knows is this program's error, not the file's.
Status undo_create_step(Context& context, const state::VmRecord& record, const std::string& step) {
  namespace s = state::step;
  if (step == s::start) return destroy_if_ours(context, record);
  if (step == s::define) return undefine_if_ours(context, record);
  if (step == s::prepare_devices) return context.devices->release(record.name, record.allocation);
  if (step == s::seed) return delete_seed(record);
  if (step == s::disk) return delete_disk(context, record);
  if (step == s::commit) return ok_status();  // it changes nothing but the journal
  HA_ASSERT(false && "undo of an unknown create step");
  return ok_status();
}

const std::vector<std::string>& delete_steps() {
  static const std::vector<std::string> steps = [] {
    const auto& names = state::journaled_steps(state::OperationKind::remove);
    return std::vector<std::string>(names.begin(), names.end());
  }();
  return steps;
}

Status run_delete_step(Context& context, const state::VmRecord& record, const std::string& step) {
  namespace s = state::step;
  if (step == s::destroy) return destroy_if_ours(context, record);
  if (step == s::undefine) return undefine_if_ours(context, record);
  if (step == s::delete_disk) return delete_disk(context, record);
  if (step == s::delete_seed) return delete_seed(record);
  if (step == s::release_devices) return context.devices->release(record.name, record.allocation);
  HA_ASSERT(false && "unknown delete step");
  return ok_status();
}

}  // namespace hostagent::daemon
