// daemon/device_lifecycle: each device's state on disk, in the ledger, in the log and on the event
// stream, and the cleaning that moves a tenant's device back to free.
#include "device_lifecycle.hpp"

#include <algorithm>
#include <array>
#include <cstdio>
#include <set>
#include <utility>

#include "daemon_log.hpp"

namespace hostagent::daemon {
namespace {

using state::DeviceState;
using state::DeviceStateEntry;

service::QuarantineView quarantine_view(const DeviceStateEntry& device) {
  return service::QuarantineView{device.address, device.step, device.reason, device.vm, device.since};
}

// What happened to a quarantined device: the step and the account.
std::string account(const DeviceStateEntry& device) {
  return device.step + " failed" + (device.vm.empty() ? "" : " for vm " + device.vm) + " at " + device.since + ": " +
         device.reason;
}

// What placement says of a withheld device: the account, with how to clear it, or whose it was.
std::string placement_reason(const DeviceStateEntry& device) {
  if (device.state == DeviceState::cleaning) {
    return (device.vm.empty() ? std::string("asked for by an operator") : "after vm " + device.vm) + ", since " +
           device.since + "; `hostagentctl cleaning list` shows its progress";
  }
  return account(device) + "; once it is repaired, clear it with `hostagentctl quarantine clear " +
         device.address.to_string() + "`";
}

// The roles whose devices go to VMs: one of them gone is a device placement could still name.
constexpr std::array kPlacedRoles = {numa::PciRole::gpu, numa::PciRole::nvswitch, numa::PciRole::nic,
                                     numa::PciRole::nvme};

bool placed_role(numa::PciRole role) {
  return std::find(kPlacedRoles.begin(), kPlacedRoles.end(), role) != kPlacedRoles.end();
}

std::string holder_of(const std::vector<numa::Allocation>& held, const PciAddress& address) {
  for (const auto& allocation : held) {
    if (std::find(allocation.devices.begin(), allocation.devices.end(), address) != allocation.devices.end()) {
      return allocation.vm;
    }
  }
  return {};
}

std::set<PciAddress> held_devices(const std::vector<numa::Allocation>& held) {
  std::set<PciAddress> out;
  for (const auto& allocation : held) out.insert(allocation.devices.begin(), allocation.devices.end());
  return out;
}

double seconds_between(const std::string& from, const std::string& to) {
  const auto start = time_of(from);
  const auto end = time_of(to);
  if (!start || !end) return 0;
  return std::chrono::duration<double>(*end - *start).count();
}

service::CleaningRecordView record_view(const state::EvidenceRecord& record) {
  const auto& evidence = record.evidence;
  service::CleaningRecordView view{record.sequence,        evidence.device,     evidence.role,        evidence.vm,
                                   evidence.outcome,       evidence.started_at, evidence.finished_at, {},
                                   record.previous_sha256, record.sha256};
  for (const auto& step : evidence.steps) {
    view.steps.push_back({step.name, step.result, step.detail, step.started_at, step.finished_at,
                          seconds_between(step.started_at, step.finished_at)});
  }
  return view;
}

// The entries but the device's.
std::vector<DeviceStateEntry> without(std::vector<DeviceStateEntry> devices, const PciAddress& address) {
  devices.erase(
      std::remove_if(devices.begin(), devices.end(), [&](const DeviceStateEntry& d) { return d.address == address; }),
      devices.end());
  return devices;
}

const DeviceStateEntry* find_entry(const std::vector<DeviceStateEntry>& devices, const PciAddress& address) {
  const auto it = std::find_if(devices.begin(), devices.end(),
                               [&](const DeviceStateEntry& device) { return device.address == address; });
  return it == devices.end() ? nullptr : &*it;
}

// A deadline as hygiene.deadlines takes one: "2m", "90s", "500ms".
std::string duration_text(std::chrono::milliseconds duration) {
  const auto ms = duration.count();
  if (ms % 3'600'000 == 0) return std::to_string(ms / 3'600'000) + "h";
  if (ms % 60'000 == 0) return std::to_string(ms / 60'000) + "m";
  if (ms % 1000 == 0) return std::to_string(ms / 1000) + "s";
  return std::to_string(ms) + "ms";
}

std::string principal_text(const std::string& principal) {
  return principal.empty() ? std::string("an unnamed caller") : principal;
}

}  // namespace

// One device's cleaning: its steps, run in order on a thread of its own, and what the thread
// tells the supervisor (the lifecycle's thread). The thread touches nothing but this and Shared,
// both kept alive by it: a step past its deadline is left to finish whenever the kernel lets it,
// after the lifecycle is gone if need be.
struct DeviceLifecycle::Run {
  DeviceStateEntry entry;
  numa::PciRole role = numa::PciRole::other;
  std::vector<devices::CleaningStep> steps;
  Clock* clock = nullptr;
  std::shared_ptr<StepHook> hook;  // kept alive by the run: an abandoned step may be in it
  // Told each step as it begins, on the cleaning's own thread: set only where that thread is the
  // caller's (clean_waiting), since it reaches into the lifecycle; else the supervisor tells.
  std::function<void(const std::string&)> on_step;
  // Guarded by Shared::mutex.
  std::string step;  // the step under way; "" between steps
  std::chrono::steady_clock::time_point step_started{};
  std::string step_started_at;  // rfc3339_ms, for its evidence
  std::string told;             // the step the supervisor last published
  state::CleaningEvidence evidence;
  bool finished = false;  // the thread is done: evidence complete, or stopped (stopped_early)
  bool stopped_early = false;
  bool abandoned = false;  // past a deadline: the supervisor recorded it; the thread's result is dropped
  std::thread thread;
};

struct DeviceLifecycle::Shared {
  std::mutex mutex;
  std::condition_variable changed;  // a step began or ended, a release, a stop
  bool woken = false;
  bool stopping = false;
};

DeviceLifecycle::DeviceLifecycle(Parts parts) : parts_(std::move(parts)), shared_(std::make_shared<Shared>()) {}

DeviceLifecycle::~DeviceLifecycle() {
  {
    const std::lock_guard lock(shared_->mutex);
    shared_->stopping = true;
  }
  shared_->changed.notify_all();
  if (thread_.joinable()) thread_.join();
}

Status DeviceLifecycle::load() {
  HA_TRY(auto devices, state::read_device_states(parts_.states_file));
  std::size_t torn = 0;
  HA_TRY(evidence_, state::EvidenceLog::open(parts_.evidence_file, &torn));
  if (torn != 0) {
    log(LogLevel::warning, "cleaning evidence: a last line of " + std::to_string(torn) + " bytes was torn by a crash " +
                               "as it was written, and is cut; the cleaning it recorded runs again");
  }
  HA_TRY(const auto chain, evidence_->read());
  if (!chain.broken.empty()) {
    log(LogLevel::error, "cleaning evidence " + parts_.evidence_file.string() + ": the chain is broken at " +
                             chain.broken + ": what follows it is not vouched for");
  }
  const std::lock_guard lock(mutex_);
  for (const auto& record : chain.records) last_[record.evidence.device] = record_view(record);
  devices_ = std::move(devices);
  tell_ledger_locked();
  for (const auto& device : devices_) {
    if (device.state != DeviceState::quarantined) continue;
    log(LogLevel::warning,
        "quarantine: " + device.address.to_string() + " stays out of placement (" + placement_reason(device) + ")");
  }
  return ok_status();
}

void DeviceLifecycle::start() {
  thread_ = std::thread([this] { run_thread(); });
}

Status DeviceLifecycle::mark_used(const std::string& vm, const std::vector<PciAddress>& devices) {
  const std::lock_guard lock(mutex_);
  auto next = devices_;
  const auto since = rfc3339(parts_.clock.now());
  const auto holder = state::holder_name(vm);  // a foreign domain's name may be anything libvirt takes
  for (const auto& address : devices) {
    if (find_entry(next, address) == nullptr) next.push_back({address, DeviceState::cleaning, "", "", holder, since});
  }
  if (next.size() == devices_.size()) return ok_status();
  return write_locked(std::move(next));
}

void DeviceLifecycle::mark_held(const std::vector<numa::Allocation>& held) {
  for (const auto& allocation : held) {
    if (auto marked = mark_used(allocation.vm, allocation.devices); !marked.ok()) {
      log(LogLevel::error,
          "devices of " + allocation.vm +
              " could not be marked to be cleaned once it lets them go: " + marked.error().message,
          {.vm = allocation.vm});
    }
  }
}

void DeviceLifecycle::released() {
  if (parts_.devices.libvirt_manages_hostdevs()) {
    clean_waiting();
    return;
  }
  {
    const std::lock_guard lock(shared_->mutex);
    shared_->woken = true;
  }
  shared_->changed.notify_all();
}

void DeviceLifecycle::quarantine(const PciAddress& address, const std::string& step, const std::string& reason,
                                 const std::string& vm) {
  DeviceStateEntry device{address, DeviceState::quarantined, step,
                          reason,  state::holder_name(vm),   rfc3339(parts_.clock.now())};
  std::optional<service::ReleaseCleaningView> release;  // a device in cleaning ends its part of its VM's release
  std::string released_by;
  {
    const std::lock_guard lock(mutex_);
    const auto* known = find_entry(devices_, address);
    if (known != nullptr && known->state == DeviceState::quarantined) return;
    if (known != nullptr && known->state == DeviceState::cleaning) {
      released_by = known->vm;
      release = end_in_release_locked(released_by, address, 0);
    }
    auto next = without(devices_, address);
    next.push_back(device);
    if (auto written = write_locked(next); !written.ok()) {
      log(LogLevel::error,
          "quarantine: " + address.to_string() + " is kept out for this run only: " + written.error().message);
      devices_ = std::move(next);
      tell_ledger_locked();
    }
  }
  log(LogLevel::warning, "quarantine: " + address.to_string() + " out of placement (" + placement_reason(device) + ")",
      {.vm = vm});
  if (release) log_release(released_by, *release);
  publish_quarantine(address, quarantine_view(device), release);
}

void DeviceLifecycle::note_health(const std::vector<numa::DeviceHealth>& health) {
  std::vector<std::pair<PciAddress, std::string>> faults;
  for (const auto& device : health) {
    if (!placed_role(device.role)) continue;
    if (!device.present) {
      faults.emplace_back(device.address,
                          "gone from the bus: its sysfs directory is missing (surprise removal, a link down, or its "
                          "VFs disabled)");
    } else if (auto reason = health_gate_.judge(device)) {
      faults.emplace_back(device.address, std::move(*reason));
    }
  }
  if (faults.empty()) return;
  const auto held = parts_.ledger.holdings().held;
  for (const auto& [address, reason] : faults) quarantine(address, "health", reason, holder_of(held, address));
}

// A device gone from the bus (surprise removal, a link down, its VFs disabled) has nothing to
// clear or clean: refused, so that it stays out of placement until it is back.
Status DeviceLifecycle::check_on_bus(const PciAddress& address, const std::string& what) const {
  if (!parts_.on_bus || parts_.on_bus(address)) return ok_status();
  return Error{ErrorCode::conflict, "device " + address.to_string() + " is still gone from the bus (its sysfs " +
                                        "directory is missing): it cannot be " + what +
                                        ", and stays quarantined until it is back"};
}

Result<service::QuarantineView> DeviceLifecycle::clear(const PciAddress& address, const std::string& principal) {
  HA_TRY_STATUS(check_on_bus(address, "cleared"));
  DeviceStateEntry cleared;
  {
    const std::lock_guard lock(mutex_);
    const auto* found = find_entry(devices_, address);
    if (found == nullptr || found->state != DeviceState::quarantined) {
      return Error{ErrorCode::not_found, "device " + address.to_string() + " is not quarantined"};
    }
    cleared = *found;
    auto next = without(devices_, address);
    // A VM's device (quarantined while a tenant held it, or as one was given it) still holds what
    // that tenant left: it goes back through cleaning, not straight to the next VM.
    if (!cleared.vm.empty())
      next.push_back({address, DeviceState::cleaning, "", "", cleared.vm, rfc3339(parts_.clock.now())});
    HA_TRY_STATUS(write_locked(std::move(next)));
  }
  health_gate_.accept(address);  // what the operator saw of its health is its health from now on
  const bool tenants = !cleared.vm.empty();
  log(LogLevel::warning, "quarantine: " + address.to_string() + " cleared by " + principal_text(principal) +
                             (tenants ? ", to be cleaned, then back in placement" : ", back in placement") +
                             " (quarantined after " + account(cleared) + ")");
  publish_quarantine(address, std::nullopt);
  if (tenants) released();
  return quarantine_view(cleared);
}

std::vector<service::QuarantineView> DeviceLifecycle::quarantined() const {
  const std::lock_guard lock(mutex_);
  std::vector<service::QuarantineView> out;
  for (const auto& device : devices_) {
    if (device.state == DeviceState::quarantined) out.push_back(quarantine_view(device));
  }
  return out;
}

std::vector<service::CleaningView> DeviceLifecycle::cleaning() const {
  // Every scrape asks, and mostly nothing is cleaning: the ledger's holdings (a copy of every VM's
  // allocation) are read only when something is. Read before mutex_ is taken, as everywhere here.
  {
    const std::lock_guard lock(mutex_);
    const auto is_cleaning = [](const auto& device) { return device.state == DeviceState::cleaning; };
    if (std::none_of(devices_.begin(), devices_.end(), is_cleaning)) return {};
  }
  const auto held = held_devices(parts_.ledger.held());
  const std::lock_guard lock(mutex_);
  std::vector<service::CleaningView> out;
  for (const auto& device : devices_) {
    if (device.state == DeviceState::cleaning) out.push_back(cleaning_view_locked(device, held));
  }
  return out;
}

Result<service::CleaningView> DeviceLifecycle::request_cleaning(const PciAddress& address,
                                                                const std::string& principal) {
  const auto* function = parts_.host.find(address);
  if (function == nullptr || !placed_role(function->role)) {
    return Error{ErrorCode::not_found, "this host has no device " + address.to_string() + " to give to a VM"};
  }
  // The model's host use holds what discovery found and devices.reserved; each step asks again.
  if (function->host_use) {
    return Error{ErrorCode::conflict, "device " + address.to_string() + " is the host's (" + *function->host_use +
                                          "): hostagent never resets, erases or scrubs a device the host uses"};
  }
  HA_TRY_STATUS(check_on_bus(address, "cleaned"));
  const auto held = parts_.ledger.held();
  if (const auto vm = holder_of(held, address); !vm.empty()) {
    return Error{ErrorCode::conflict,
                 "device " + address.to_string() + " is held by vm " + vm + ": it is cleaned when the VM lets it go"};
  }
  service::CleaningView view;
  {
    const std::lock_guard lock(mutex_);
    const auto* found = find_entry(devices_, address);
    if (found != nullptr && found->state == DeviceState::cleaning) {
      return Error{ErrorCode::conflict,
                   "device " + address.to_string() + " is being cleaned already (since " + found->since + ")"};
    }
    auto next = without(devices_, address);
    next.push_back({address, DeviceState::cleaning, "", "", "", rfc3339(parts_.clock.now())});
    HA_TRY_STATUS(write_locked(next));
    view = cleaning_view_locked(next.back(), {});
  }
  log(LogLevel::warning, "cleaning: " + address.to_string() + " to be cleaned again, asked by " +
                             principal_text(principal) + "; out of placement until it passes");
  publish_cleaning(address, "", view, std::nullopt);
  released();
  return view;
}

Result<service::DeviceHistoryView> DeviceLifecycle::history(const PciAddress& address) const {
  HA_TRY(const auto chain, evidence_->read());
  service::DeviceHistoryView view{address, {}, chain.broken};
  for (const auto& record : chain.records) {
    if (record.evidence.device == address) view.cleanings.push_back(record_view(record));
  }
  if (view.cleanings.empty() && parts_.host.find(address) == nullptr) {
    return Error{ErrorCode::not_found, "this host has no device " + address.to_string() + ", and no cleaning of one"};
  }
  return view;
}

std::map<PciAddress, service::CleaningRecordView> DeviceLifecycle::last_cleanings() const {
  const std::lock_guard lock(mutex_);
  return last_;
}

// Every waiting device no VM holds, in the order they were marked, but those left out.
std::vector<DeviceStateEntry> DeviceLifecycle::waiting(const std::set<PciAddress>& leave_out) {
  const auto held = held_devices(parts_.ledger.held());
  const std::lock_guard lock(mutex_);
  std::vector<DeviceStateEntry> out;
  for (const auto& device : devices_) {
    if (device.state != DeviceState::cleaning || held.count(device.address) != 0) continue;
    note_waiting_locked(device);
    if (leave_out.count(device.address) == 0) out.push_back(device);
  }
  return out;
}

// A device of a VM's release seen waiting: the release begins with the first (the supervisor sees
// them as the VM lets them go), and every one is counted in it, started or not
// (hygiene.parallel). An operator's cleaning of a free device is no VM's release.
void DeviceLifecycle::note_waiting_locked(const DeviceStateEntry& entry) {
  if (entry.vm.empty()) return;
  auto [release, first] = releases_.try_emplace(entry.vm);
  if (first) release->second.began = parts_.clock.steady_now();
  release->second.left.insert(entry.address);
}

// The device left cleaning (cleaned, or quarantined): its release's figures once it was the last.
std::optional<service::ReleaseCleaningView> DeviceLifecycle::end_in_release_locked(const std::string& vm,
                                                                                   const PciAddress& address,
                                                                                   double steps_seconds) {
  const auto release = releases_.find(vm);
  if (release == releases_.end() || release->second.left.erase(address) == 0) return std::nullopt;
  release->second.devices += 1;
  release->second.steps_seconds += steps_seconds;
  if (!release->second.left.empty()) return std::nullopt;
  const std::chrono::duration<double> wall = parts_.clock.steady_now() - release->second.began;
  service::ReleaseCleaningView view{release->second.devices, wall.count(), release->second.steps_seconds};
  releases_.erase(release);
  return view;
}

void DeviceLifecycle::log_release(const std::string& vm, const service::ReleaseCleaningView& release) {
  char figures[128];
  std::snprintf(figures, sizeof figures, "%zu devices cleaned in %.3f s, their steps %.3f s together", release.devices,
                release.seconds, release.steps_seconds);
  log(LogLevel::info, "cleaning: vm " + vm + "'s release: " + figures, {.vm = vm});
}

// A device's run, its steps from the preparer; null (and the device quarantined) when the host
// model has no such device.
std::shared_ptr<DeviceLifecycle::Run> DeviceLifecycle::make_run(const DeviceStateEntry& entry) {
  const auto* function = parts_.host.find(entry.address);
  if (function == nullptr) {
    quarantine(entry.address, "cleaning", "the host model has no such device: it cannot be cleaned", entry.vm);
    return nullptr;
  }
  log(LogLevel::info,
      "cleaning: " + entry.address.to_string() + " (" + std::string(numa::to_string(function->role)) +
          (entry.vm.empty() ? "" : ", after vm " + entry.vm) + ") begins",
      {.vm = entry.vm});
  auto run = std::make_shared<Run>();
  run->entry = entry;
  run->role = function->role;
  run->steps = parts_.devices.cleaning_steps(*function);
  run->clock = &parts_.clock;
  run->hook = parts_.hook;
  // Milliseconds: a step's duration is read back from its times, and most take less than a second.
  run->evidence = {entry.address,
                   std::string(numa::to_string(function->role)),
                   entry.vm,
                   "clean",
                   rfc3339_ms(parts_.clock.now()),
                   "",
                   {}};
  return run;
}

void DeviceLifecycle::run_cleaning(const std::shared_ptr<Run>& run, const std::shared_ptr<Shared>& shared) {
  for (const auto& step : run->steps) {
    {
      const std::lock_guard lock(shared->mutex);
      if (shared->stopping) {
        run->stopped_early = true;
        break;
      }
      run->step = step.name;
      run->step_started = run->clock->steady_now();
      run->step_started_at = rfc3339_ms(run->clock->now());
    }
    shared->changed.notify_all();
    if (run->on_step) run->on_step(step.name);
    // Inside the step's time: a hook that never returns (the tests' pause) is a step that never
    // returns, which the step's deadline ends as it would a wedged reset.
    if (run->hook) run->hook->before_step("clean", run->entry.address.to_string(), step.name);
    const auto outcome = step.run();
    const std::lock_guard lock(shared->mutex);
    if (run->abandoned) return;  // the supervisor recorded it past its deadline; the lifecycle may be gone
    run->evidence.steps.push_back({step.name, devices::to_string(outcome.result), outcome.detail, run->step_started_at,
                                   rfc3339_ms(run->clock->now())});
    run->step.clear();
    if (outcome.result == devices::StepResult::failed) {
      run->evidence.outcome = "quarantined";
      break;
    }
  }
  {
    const std::lock_guard lock(shared->mutex);
    if (run->abandoned) return;
    run->evidence.finished_at = rfc3339_ms(run->clock->now());
    run->finished = true;
  }
  shared->changed.notify_all();
}

// On a host where every step is skipped (libvirt's managed hostdevs), on the caller's thread, one
// device after another, and recorded together, one append and one state write: a delete does not
// wait for an fsync per device.
void DeviceLifecycle::clean_waiting() {
  const std::lock_guard managed(managed_mutex_);
  std::vector<Cleaned> done;
  for (const auto& entry : waiting({})) {
    auto run = make_run(entry);
    if (!run) continue;
    run->on_step = [this, address = entry.address](const std::string& step) { set_running(address, step); };
    run_cleaning(run, shared_);
    set_running(entry.address, "");
    if (run->finished) done.push_back({run->entry, run->evidence});
  }
  conclude(done);
}

// Elsewhere, each waiting device on a thread of its own, hygiene.parallel at a time (0: all); not
// one tried since the last retry (its state could not be written: it waits for the next).
void DeviceLifecycle::start_runs(Runs& runs, const std::set<PciAddress>& tried) {
  std::set<PciAddress> under_way = tried;
  for (const auto& [address, run] : runs) under_way.insert(address);
  const auto limit = static_cast<std::size_t>(parts_.hygiene.parallel);
  for (const auto& entry : waiting(under_way)) {
    if (limit != 0 && runs.size() >= limit) return;
    {
      const std::lock_guard lock(shared_->mutex);
      if (shared_->stopping) return;
    }
    auto run = make_run(entry);
    if (!run) continue;
    run->thread = std::thread([run, shared = shared_] { run_cleaning(run, shared); });
    runs.emplace(entry.address, std::move(run));
  }
}

// How long the step a run is in may take.
std::chrono::milliseconds DeviceLifecycle::step_limit(const Run& run) const {
  return cleaning_deadline(parts_.hygiene, run.role, run.step);
}

// The earliest deadline of a step under way, or the next retry.
std::chrono::steady_clock::time_point DeviceLifecycle::next_deadline_locked(
    const Runs& runs, std::chrono::steady_clock::time_point retry_at) const {
  auto next = retry_at;
  for (const auto& [address, run] : runs) {
    if (run->step.empty() || run->finished) continue;
    next = std::min(next, run->step_started + step_limit(*run));
  }
  return next;
}

// Waits for a run to finish, a step to begin, a deadline, the retry, a release or the stop; then
// publishes the steps begun, and concludes what finished or ran late (each then tried). True when
// woken by a release.
bool DeviceLifecycle::supervise(Runs& runs, std::set<PciAddress>& tried,
                                std::chrono::steady_clock::time_point retry_at) {
  bool woken = false;
  std::vector<std::shared_ptr<Run>> done;
  std::vector<std::shared_ptr<Run>> late;
  std::vector<std::pair<PciAddress, std::string>> begun;
  {
    std::unique_lock lock(shared_->mutex);
    const auto news = [&] {
      if (shared_->woken || shared_->stopping) return true;
      return std::any_of(runs.begin(), runs.end(),
                         [](const auto& one) { return one.second->finished || one.second->step != one.second->told; });
    };
    parts_.clock.wait_until(shared_->changed, lock, next_deadline_locked(runs, retry_at), news);
    if (shared_->stopping) return false;
    woken = std::exchange(shared_->woken, false);
    const auto now = parts_.clock.steady_now();
    for (const auto& [address, run] : runs) {
      if (run->finished) {
        done.push_back(run);
        continue;
      }
      if (run->step != run->told) {
        run->told = run->step;
        if (!run->step.empty()) begun.emplace_back(address, run->step);
      }
      if (!run->step.empty() && now >= run->step_started + step_limit(*run)) {
        run->abandoned = true;
        late.push_back(run);
      }
    }
  }
  for (const auto& [address, step] : begun) set_running(address, step);
  for (const auto& run : done) tried.insert(run->entry.address);
  for (const auto& run : late) tried.insert(run->entry.address);
  finish_runs(runs, done, late);
  return woken;
}

void DeviceLifecycle::finish_runs(Runs& runs, const std::vector<std::shared_ptr<Run>>& done,
                                  const std::vector<std::shared_ptr<Run>>& late) {
  std::vector<Cleaned> cleaned;
  for (const auto& run : done) {
    run->thread.join();
    runs.erase(run->entry.address);
    set_running(run->entry.address, "");
    if (!run->stopped_early) cleaned.push_back({run->entry, run->evidence});
  }
  for (const auto& run : late) {
    // The thread is still in the step (a reset the kernel holds, a scrubber that does not exit):
    // it is left to it, holding nothing any other cleaning needs, and its result is dropped.
    run->thread.detach();
    runs.erase(run->entry.address);
    set_running(run->entry.address, "");
    const auto limit = step_limit(*run);
    auto evidence = run->evidence;
    evidence.steps.push_back(
        {run->step, devices::to_string(devices::StepResult::failed),
         "did not finish within its deadline of " + duration_text(limit) +
             " (hygiene.deadlines): the device is quarantined, and the step left to end whenever it does",
         run->step_started_at, rfc3339_ms(parts_.clock.now())});
    evidence.outcome = "quarantined";
    evidence.finished_at = rfc3339_ms(parts_.clock.now());
    cleaned.push_back({run->entry, std::move(evidence)});
  }
  // Each as it ends: a slow one holds the others' records back no more than their cleaning.
  for (const auto& one : cleaned) conclude({one});
}

// At the daemon's stop: each cleaning thread ends after the step it is in, and its device stays
// marked cleaning, to be cleaned again at the next start. A step that runs past its deadline
// meanwhile (a reset the kernel holds) is not waited for: its thread is left to it, abandoned as a
// late run's is, touching nothing of a lifecycle that is going. One given up on before is already
// on its own.
void DeviceLifecycle::stop_runs(Runs& runs) {
  if (parts_.hook != nullptr) parts_.hook->before_step("clean", "", "stop");  // the tests' seam
  for (const auto& [address, held] : runs) {
    const std::shared_ptr<Run> run = held;  // a copy a lambda may capture (a structured binding may not)
    std::unique_lock lock(shared_->mutex);
    while (!run->finished && !run->step.empty()) {
      const auto deadline = run->step_started + step_limit(*run);
      if (parts_.clock.steady_now() >= deadline) break;
      const std::string step = run->step;
      parts_.clock.wait_until(shared_->changed, lock, deadline,
                              [run, &step] { return run->finished || run->step != step; });
    }
    const std::string late = run->finished ? "" : run->step;
    if (!late.empty()) run->abandoned = true;
    lock.unlock();
    if (late.empty()) {
      if (run->thread.joinable()) run->thread.join();
      continue;
    }
    log(LogLevel::warning,
        "cleaning: " + address.to_string() + "'s " + late +
            " is past its deadline at the stop: left to it, and the device is cleaned again at the next start",
        {.vm = run->entry.vm});
    run->thread.detach();
  }
  runs.clear();
}

// The evidence first, then the state it justifies: a crash between them cleans the devices again.
void DeviceLifecycle::conclude(const std::vector<Cleaned>& cleaned) {
  if (cleaned.empty()) return;
  std::vector<state::CleaningEvidence> evidence;
  evidence.reserve(cleaned.size());
  for (const auto& one : cleaned) evidence.push_back(one.evidence);
  auto appended = evidence_->append_all(evidence);
  if (!appended.ok()) {
    for (const auto& one : cleaned) {
      quarantine(one.entry.address, "evidence", "its cleaning could not be recorded: " + appended.error().message,
                 one.entry.vm);
    }
    return;
  }
  std::vector<service::CleaningRecordView> views;
  views.reserve(appended->size());
  for (const auto& record : *appended) views.push_back(record_view(record));
  bool freed = true;
  std::vector<std::optional<service::ReleaseCleaningView>> releases(cleaned.size());
  {
    const std::lock_guard lock(mutex_);
    auto next = devices_;
    for (std::size_t i = 0; i < cleaned.size(); ++i) {
      last_[cleaned[i].entry.address] = views[i];
      double steps = 0;
      for (const auto& step : views[i].steps) steps += step.seconds;
      releases[i] = end_in_release_locked(cleaned[i].entry.vm, cleaned[i].entry.address, steps);
      if (cleaned[i].evidence.outcome == "clean")
        next.erase(std::remove(next.begin(), next.end(), cleaned[i].entry), next.end());
    }
    if (next.size() != devices_.size()) {
      if (auto written = write_locked(std::move(next)); !written.ok()) {
        log(LogLevel::error, "cleaning: what passed stays out of placement: " + written.error().message);
        freed = false;
      }
    }
  }
  for (std::size_t i = 0; i < cleaned.size(); ++i) {
    const auto& one = cleaned[i];
    const auto& view = views[i];
    if (one.evidence.outcome != "clean") {
      const auto& failed = one.evidence.steps.back();
      quarantine(one.entry.address, failed.name, failed.detail, one.entry.vm);
    } else if (!freed) {
      continue;
    } else {
      log_clean(one, view);
    }
    if (releases[i]) log_release(one.entry.vm, *releases[i]);
    publish_cleaning(one.entry.address, one.entry.vm, std::nullopt, view, releases[i]);
  }
}

void DeviceLifecycle::log_clean(const Cleaned& cleaned, const service::CleaningRecordView& view) {
  std::string marks;
  for (const auto& step : cleaned.evidence.steps) {
    if (step.result != "passed") marks += "; " + step.name + " " + step.result + ": " + step.detail;
  }
  log(LogLevel::info,
      "cleaning: " + cleaned.entry.address.to_string() + " is clean (evidence " + std::to_string(view.sequence) + ")" +
          marks,
      {.vm = cleaned.entry.vm});
}

// The step a device's cleaning is in ("" when none), for the views, and published.
void DeviceLifecycle::set_running(const PciAddress& address, const std::string& step) {
  std::optional<service::CleaningView> view;
  std::string vm;
  {
    const std::lock_guard lock(mutex_);
    if (step.empty()) {
      running_.erase(address);
      return;
    }
    running_[address] = step;
    const auto* entry = find_entry(devices_, address);
    if (entry == nullptr) return;
    view = cleaning_view_locked(*entry, {});
    vm = entry->vm;
  }
  publish_cleaning(address, vm, view, std::nullopt);
}

// Durably first: memory and the ledger follow only what is on disk.
Status DeviceLifecycle::write_locked(std::vector<DeviceStateEntry> next) {
  HA_TRY_STATUS(state::write_device_states(parts_.states_file, next));
  devices_ = std::move(next);
  tell_ledger_locked();
  return ok_status();
}

void DeviceLifecycle::tell_ledger_locked() {
  std::map<PciAddress, numa::Withheld> withheld;
  for (const auto& device : devices_) {
    const auto why =
        device.state == DeviceState::cleaning ? numa::Withheld::Why::cleaning : numa::Withheld::Why::quarantined;
    withheld.emplace(device.address, numa::Withheld{why, placement_reason(device)});
  }
  parts_.ledger.set_withheld(std::move(withheld));
}

service::CleaningView DeviceLifecycle::cleaning_view_locked(const DeviceStateEntry& entry,
                                                            const std::set<PciAddress>& held) const {
  service::CleaningView view{entry.address, entry.vm, entry.since, "", ""};
  if (held.count(entry.address) != 0) view.held_by = entry.vm.empty() ? "a VM" : entry.vm;
  if (const auto running = running_.find(entry.address); running != running_.end()) view.step = running->second;
  return view;
}

void DeviceLifecycle::publish_quarantine(const PciAddress& address, const std::optional<service::QuarantineView>& entry,
                                         std::optional<service::ReleaseCleaningView> release) {
  service::ServiceEvent event;
  event.kind = service::ServiceEvent::Kind::quarantine;
  event.vm = entry ? entry->vm : "";
  event.devices = {address};
  event.quarantine = entry;
  event.release = release;
  parts_.events.publish(event);
}

void DeviceLifecycle::publish_cleaning(const PciAddress& address, const std::string& vm,
                                       std::optional<service::CleaningView> cleaning,
                                       std::optional<service::CleaningRecordView> cleaned,
                                       std::optional<service::ReleaseCleaningView> release) {
  service::ServiceEvent event;
  event.kind = service::ServiceEvent::Kind::cleaning;
  event.vm = vm;
  event.devices = {address};
  event.cleaning = std::move(cleaning);
  event.cleaned = std::move(cleaned);
  event.release = release;
  parts_.events.publish(event);
}

// On a host whose devices hostagent prepares: the supervisor of every cleaning under way, woken by
// released(), by each step's start and end, by the earliest deadline, and every half minute (a
// device whose state could not be written is tried again). With libvirt's managed hostdevs:
// clean_waiting at each wake.
void DeviceLifecycle::run_thread() {
  constexpr std::chrono::seconds kRetry(30);
  const bool managed = parts_.devices.libvirt_manages_hostdevs();
  Runs runs;
  std::set<PciAddress> tried;  // since the last retry: a device still waiting after it waits for the next
  auto retry_at = parts_.clock.steady_now() + kRetry;
  for (;;) {
    if (managed) {
      clean_waiting();
      std::unique_lock lock(shared_->mutex);
      parts_.clock.wait_until(shared_->changed, lock, parts_.clock.steady_now() + kRetry,
                              [this] { return shared_->woken || shared_->stopping; });
      if (shared_->stopping) return;
      shared_->woken = false;
      continue;
    }
    start_runs(runs, tried);
    const bool woken = supervise(runs, tried, retry_at);
    {
      const std::lock_guard lock(shared_->mutex);
      if (shared_->stopping) break;
    }
    if (woken || parts_.clock.steady_now() >= retry_at) {
      tried.clear();
      retry_at = parts_.clock.steady_now() + kRetry;
    }
  }
  stop_runs(runs);
}

std::chrono::milliseconds cleaning_deadline(const config::HygieneConfig& hygiene, numa::PciRole role,
                                            const std::string& step) {
  using std::chrono::minutes;
  const auto of_role = hygiene.deadlines.find(numa::to_string(role));
  if (of_role != hygiene.deadlines.end()) {
    const auto set = of_role->second.find(step);
    if (set != of_role->second.end()) return set->second;
  }
  if (step == "erase") return hygiene.nvme_erase_timeout + minutes(5);
  if (step == "scrub") return hygiene.gpu_scrub_timeout + minutes(1);
  if (step == "reset") return minutes(2);
  return minutes(1);
}

}  // namespace hostagent::daemon
