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

Status undo_create_step(Context& context, const state::VmRecord& record, const std::string& step) {
  if (step == "start") return destroy_if_ours(context, record);
  if (step == "define") return undefine_if_ours(context, record);
  if (step == "prepare_devices") return context.devices->release(record.name, record.allocation);
  if (step == "seed") return delete_seed(record);
  if (step == "disk") return delete_disk(context, record);
  HA_ASSERT(false && "undo of an unknown create step");
  return ok_status();
}

const std::vector<std::string>& delete_steps() {
  static const std::vector<std::string> steps = {"destroy", "undefine", "delete_disk", "delete_seed",
                                                 "release_devices"};
  return steps;
}

Status run_delete_step(Context& context, const state::VmRecord& record, const std::string& step) {
  if (step == "destroy") return destroy_if_ours(context, record);
  if (step == "undefine") return undefine_if_ours(context, record);
  if (step == "delete_disk") return delete_disk(context, record);
  if (step == "delete_seed") return delete_seed(record);
  if (step == "release_devices") return context.devices->release(record.name, record.allocation);
  HA_ASSERT(false && "unknown delete step");
  return ok_status();
}

}  // namespace hostagent::daemon
