// daemon/power_vm: start, stop and reboot. They hold nothing and change no allocation, so they are
// not journaled: after a crash, libvirt's state of the domain is the whole truth about them. A
// start puts the VM's devices back as prepared first, which is idempotent.
#include "daemon_log.hpp"
#include "operations.hpp"
#include "timeline.hpp"
#include "vm_steps.hpp"

namespace hostagent::daemon {
namespace {

constexpr std::chrono::milliseconds kPollInterval{200};

Result<state::VmRecord> managed_record(Ledger& ledger, const std::string& name) {
  const auto entry = ledger.find(name);
  if (!entry) return Error{ErrorCode::not_found, "no VM named " + name};
  if (!entry->managed || !entry->record) {
    return Error{ErrorCode::conflict, "domain " + name + " was not made by hostagent: it is reported, never changed"};
  }
  return *entry->record;
}

// Power operations have one step, or two for a graceful stop that has to be forced.
void step(Recording& recording, const std::string& name, const std::string& operation, const std::string& step_name,
          int number = 1, int count = 1) {
  recording.operations.progress(name, operation, step_name, number, count);
  if (recording.hook != nullptr) recording.hook->before_step(operation, name, step_name);
}

Result<virt::DomainState> refresh(Effects& effects, const std::string& name) {
  HA_TRY(const auto domain, effects.hypervisor.lookup(name));
  effects.ledger.set_domain(name, domain.uuid, domain.state);
  return domain.state;
}

// Waits until `deadline` for the guest to power itself off after the shutdown request.
Result<bool> wait_for_shut_off(VmWork& work, const std::string& name, std::chrono::steady_clock::time_point deadline) {
  for (;;) {
    HA_TRY(const auto state, refresh(work.effects, name));
    if (state == virt::DomainState::shut_off) return true;
    if (work.recording.clock.steady_now() >= deadline) return false;
    work.recording.clock.sleep_for(kPollInterval);
  }
}

// The guest asked to power off (its agent, else ACPI) and given until `deadline`, then powered off;
// `force` powers it off at once. True when it was powered off rather than shut down.
Result<bool> stop_until(VmWork& work, const std::string& name, bool force,
                        std::chrono::steady_clock::time_point deadline, const std::string& operation) {
  if (!force) {
    step(work.recording, name, operation, "shutdown", 1, 2);
    HA_TRY_STATUS(work.effects.hypervisor.shutdown(name));
    HA_TRY(const bool off, wait_for_shut_off(work, name, deadline));
    if (off) return false;
    log(LogLevel::warning, name + " did not power off by its deadline after the shutdown request: forcing",
        {.vm = name, .operation = operation});
  }
  step(work.recording, name, operation, "destroy", force ? 1 : 2, force ? 1 : 2);
  HA_TRY_STATUS(work.effects.hypervisor.destroy(name));
  return true;
}

Result<service::VmView> finish(VmWork& work, const std::string& name) {
  work.recording.operations.idle(name);
  HA_TRY_STATUS(refresh(work.effects, name));
  return current_view(work, name);
}

}  // namespace

Result<service::VmView> start_vm(VmWork& work, const std::string& name) {
  HA_TRY(const auto record, managed_record(work.effects.ledger, name));
  Timeline timeline(work.recording, name);
  step(work.recording, name, "start", "prepare_devices", 1, 2);
  auto outcome = [&]() -> Status {
    HA_TRY(const auto state, refresh(work.effects, name));
    // Starting a running VM is done already: a retried request must not fail.
    if (state == virt::DomainState::running) return ok_status();
    // Its devices may not be as prepared (a host reboot undoes all of it; the domain's hostdevs are
    // managed='no', so libvirt would start QEMU on devices still with their host drivers).
    HA_TRY_STATUS(reapply_devices(work.effects, record));
    timeline.mark("prepare_devices");
    step(work.recording, name, "start", "start", 2, 2);
    HA_TRY_STATUS(work.effects.hypervisor.start_paused(name));
    timeline.mark(kLaunchPhase);
    // The template the VM was made from says how its boot is watched, if the host still has it.
    const auto shape = work.facts.templates.find(record.template_name);
    HA_TRY_STATUS(
        resume_watched(work, timeline, name,
                       shape != work.facts.templates.end() ? shape->second.boot.watch : vmtemplates::BootWatch{}));
    return ok_status();
  }();
  if (!outcome.ok()) {
    work.recording.operations.idle(name);
    return std::move(outcome).error();
  }
  return finish(work, name);
}

Result<service::VmView> stop_vm(VmWork& work, const std::string& name, bool force) {
  HA_TRY_STATUS(managed_record(work.effects.ledger, name));
  const auto deadline = work.recording.clock.steady_now() + work.facts.config.stop_timeout;
  if (auto stopped = stop_until(work, name, force, deadline, "stop"); !stopped.ok()) {
    work.recording.operations.idle(name);
    return std::move(stopped).error();
  }
  return finish(work, name);
}

Result<bool> drain_vm(VmWork& work, const std::string& name, std::chrono::steady_clock::time_point deadline) {
  HA_TRY_STATUS(managed_record(work.effects.ledger, name));
  auto stopped = stop_until(work, name, false, deadline, "stop");
  work.recording.operations.idle(name);
  if (!stopped.ok()) return std::move(stopped).error();
  HA_TRY_STATUS(refresh(work.effects, name));
  return *stopped;
}

Result<service::VmView> reboot_vm(VmWork& work, const std::string& name) {
  HA_TRY_STATUS(managed_record(work.effects.ledger, name));
  step(work.recording, name, "reboot", "reboot");
  if (auto rebooted = work.effects.hypervisor.reboot(name); !rebooted.ok()) {
    work.recording.operations.idle(name);
    return std::move(rebooted).error();
  }
  return finish(work, name);
}

Result<service::VmView> current_view(VmWork& work, const std::string& name) {
  const auto entry = work.effects.ledger.find(name);
  if (!entry) return Error{ErrorCode::not_found, "no VM named " + name};
  return view_of(work.facts.host, work.recording.operations, *entry);
}

}  // namespace hostagent::daemon
