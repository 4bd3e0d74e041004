// daemon/vm_steps: the step effects, and delete's table.
#include "vm_steps.hpp"

#include <filesystem>

#include "daemon_log.hpp"

namespace hostagent::daemon {
namespace {

// Whether the domain called record.name is the one this record made. Absent: false.
Result<bool> is_ours(Effects& effects, const state::VmRecord& record) {
  auto domain = effects.hypervisor.lookup(record.name);
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

}  // namespace

Status destroy_if_ours(Effects& effects, const state::VmRecord& record) {
  HA_TRY(const bool ours, is_ours(effects, record));
  return ours ? effects.hypervisor.destroy(record.name) : ok_status();
}

Status undefine_if_ours(Effects& effects, const state::VmRecord& record) {
  HA_TRY(const bool ours, is_ours(effects, record));
  if (!ours) return ok_status();
  // A running persistent domain that is undefined keeps running as a transient one: stop it first.
  HA_TRY_STATUS(effects.hypervisor.destroy(record.name));
  return effects.hypervisor.undefine(record.name);
}

Status delete_disk(Effects& effects, const state::VmRecord& record) {
  if (record.inputs.disk_volume.empty()) return ok_status();
  return effects.hypervisor.delete_volume(record.inputs.disk_pool, record.inputs.disk_volume);
}

Status delete_seed(Effects& /*effects*/, const state::VmRecord& record) {
  if (record.inputs.seed_iso.empty()) return ok_status();
  std::error_code ec;
  std::filesystem::remove(record.inputs.seed_iso, ec);  // absent: false, no error
  if (ec) return errno_error(ec.value(), "remove", record.inputs.seed_iso);
  return ok_status();
}

Status release_devices(Effects& effects, const state::VmRecord& record) {
  return effects.devices.release(record.name, record.allocation);
}

Result<std::vector<std::string>> reapply_devices(Effects& effects, const state::VmRecord& record) {
  HA_TRY(auto repaired, effects.devices.reapply(record.name, record.allocation));
  for (const auto& repair : repaired) {
    log(LogLevel::warning, "devices of " + record.name + " were not as prepared: " + repair, {.vm = record.name});
  }
  return repaired;
}

Status no_effect(Effects& /*effects*/, const state::VmRecord& /*record*/) {
  return ok_status();
}

void release_vm(Effects& effects, const std::string& name) {
  effects.ledger.release(name);
  effects.lifecycle.released();
}

const std::vector<DeleteStep>& delete_steps() {
  namespace s = state::step;
  // One row per step, aligned.
  // clang-format off
  static const std::vector<DeleteStep> steps = {
      {s::destroy,         destroy_if_ours},
      {s::undefine,        undefine_if_ours},
      {s::delete_disk,     delete_disk},
      {s::delete_seed,     delete_seed},
      {s::release_devices, release_devices},
  };
  // clang-format on
  return steps;
}

}  // namespace hostagent::daemon
