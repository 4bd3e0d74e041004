// daemon/device_lifecycle: each device's state on disk, in the ledger, in the log and on the event
// stream, and the cleaning that moves a tenant's device back to free.
#include "device_lifecycle.hpp"

#include <algorithm>
#include <array>
#include <set>

#include "daemon_log.hpp"

namespace hostagent::daemon {
namespace {

using state::DeviceState;
using state::DeviceStateEntry;

QuarantineView quarantine_view(const DeviceStateEntry& device) {
  return QuarantineView{device.address, device.step, device.reason, device.vm, device.since};
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

CleaningRecordView record_view(const state::EvidenceRecord& record) {
  const auto& evidence = record.evidence;
  CleaningRecordView view{record.sequence,        evidence.device,     evidence.role,        evidence.vm,
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

std::string principal_text(const std::string& principal) {
  return principal.empty() ? std::string("an unnamed caller") : principal;
}

}  // namespace

DeviceLifecycle::DeviceLifecycle(Parts parts) : parts_(std::move(parts)) {}

DeviceLifecycle::~DeviceLifecycle() {
  {
    const std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  wake_.notify_all();
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
    const std::lock_guard lock(mutex_);
    woken_ = true;
  }
  wake_.notify_all();
}

void DeviceLifecycle::quarantine(const PciAddress& address, const std::string& step, const std::string& reason,
                                 const std::string& vm) {
  DeviceStateEntry device{address, DeviceState::quarantined, step,
                          reason,  state::holder_name(vm),   rfc3339(parts_.clock.now())};
  {
    const std::lock_guard lock(mutex_);
    const auto* known = find_entry(devices_, address);
    if (known != nullptr && known->state == DeviceState::quarantined) return;
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
  publish_quarantine(address, quarantine_view(device));
}

void DeviceLifecycle::note_health(const std::vector<numa::DeviceHealth>& health) {
  std::vector<numa::Allocation> held;
  for (const auto& device : health) {
    if (device.present || !placed_role(device.role)) continue;
    if (held.empty()) held = parts_.ledger.holdings().held;
    quarantine(device.address, "health",
               "gone from the bus: its sysfs directory is missing (surprise removal, a link down, or its VFs disabled)",
               holder_of(held, device.address));
  }
}

// A device gone from the bus (surprise removal, a link down, its VFs disabled) has nothing to
// clear or clean: refused, so that it stays out of placement until it is back.
Status DeviceLifecycle::check_on_bus(const PciAddress& address, const std::string& what) const {
  if (!parts_.on_bus || parts_.on_bus(address)) return ok_status();
  return Error{ErrorCode::conflict, "device " + address.to_string() + " is still gone from the bus (its sysfs " +
                                        "directory is missing): it cannot be " + what +
                                        ", and stays quarantined until it is back"};
}

Result<QuarantineView> DeviceLifecycle::clear(const PciAddress& address, const std::string& principal) {
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
  const bool tenants = !cleared.vm.empty();
  log(LogLevel::warning, "quarantine: " + address.to_string() + " cleared by " + principal_text(principal) +
                             (tenants ? ", to be cleaned, then back in placement" : ", back in placement") +
                             " (quarantined after " + account(cleared) + ")");
  publish_quarantine(address, std::nullopt);
  if (tenants) released();
  return quarantine_view(cleared);
}

std::vector<QuarantineView> DeviceLifecycle::quarantined() const {
  const std::lock_guard lock(mutex_);
  std::vector<QuarantineView> out;
  for (const auto& device : devices_) {
    if (device.state == DeviceState::quarantined) out.push_back(quarantine_view(device));
  }
  return out;
}

std::vector<CleaningView> DeviceLifecycle::cleaning() const {
  const auto held = held_devices(parts_.ledger.held());
  const std::lock_guard lock(mutex_);
  std::vector<CleaningView> out;
  for (const auto& device : devices_) {
    if (device.state == DeviceState::cleaning) out.push_back(cleaning_view_locked(device, held));
  }
  return out;
}

Result<CleaningView> DeviceLifecycle::request_cleaning(const PciAddress& address, const std::string& principal) {
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
  CleaningView view;
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

Result<DeviceHistoryView> DeviceLifecycle::history(const PciAddress& address) const {
  HA_TRY(const auto chain, evidence_->read());
  DeviceHistoryView view{address, {}, chain.broken};
  for (const auto& record : chain.records) {
    if (record.evidence.device == address) view.cleanings.push_back(record_view(record));
  }
  if (view.cleanings.empty() && parts_.host.find(address) == nullptr) {
    return Error{ErrorCode::not_found, "this host has no device " + address.to_string() + ", and no cleaning of one"};
  }
  return view;
}

std::map<PciAddress, CleaningRecordView> DeviceLifecycle::last_cleanings() const {
  const std::lock_guard lock(mutex_);
  return last_;
}

// One at a time, in the order they were marked; what a VM still holds waits for it. On a host
// where every step is skipped (libvirt's managed hostdevs), the cleanings of one release are
// recorded together, one append and one state write: a delete does not wait for an fsync per
// device. Elsewhere each is recorded as it ends, so a slow one does not hold the others back.
void DeviceLifecycle::clean_waiting() {
  const std::lock_guard cleaning(clean_mutex_);
  const bool together = parts_.devices.libvirt_manages_hostdevs();
  std::set<PciAddress> tried;  // once per pass: a state that could not be written waits for the next
  std::vector<Cleaned> done;
  while (auto next = next_waiting(tried)) {
    tried.insert(next->address);
    if (auto cleaned = clean_one(*next)) done.push_back(std::move(*cleaned));
    if (!together) {
      conclude(done);
      done.clear();
    }
  }
  conclude(done);
}

std::optional<DeviceStateEntry> DeviceLifecycle::next_waiting(const std::set<PciAddress>& tried) {
  const auto held = held_devices(parts_.ledger.held());
  const std::lock_guard lock(mutex_);
  if (stopping_) return std::nullopt;
  for (const auto& device : devices_) {
    if (device.state == DeviceState::cleaning && held.count(device.address) == 0 && tried.count(device.address) == 0) {
      return device;
    }
  }
  return std::nullopt;
}

std::optional<DeviceLifecycle::Cleaned> DeviceLifecycle::clean_one(const DeviceStateEntry& entry) {
  const auto* function = parts_.host.find(entry.address);
  if (function == nullptr) {
    quarantine(entry.address, "cleaning", "the host model has no such device: it cannot be cleaned", entry.vm);
    return std::nullopt;
  }
  log(LogLevel::info,
      "cleaning: " + entry.address.to_string() + " (" + std::string(numa::to_string(function->role)) +
          (entry.vm.empty() ? "" : ", after vm " + entry.vm) + ") begins",
      {.vm = entry.vm});
  return Cleaned{entry, run_steps(entry, *function)};
}

state::CleaningEvidence DeviceLifecycle::run_steps(const DeviceStateEntry& entry, const numa::PciFunction& function) {
  // Milliseconds: a step's duration is read back from its times, and most take less than a second.
  state::CleaningEvidence evidence{entry.address,
                                   std::string(numa::to_string(function.role)),
                                   entry.vm,
                                   "clean",
                                   rfc3339_ms(parts_.clock.now()),
                                   "",
                                   {}};
  for (const auto& step : parts_.devices.cleaning_steps(function)) {
    if (parts_.hook) parts_.hook->before_step("clean", entry.address.to_string(), step.name);
    set_running(Running{entry.address, step.name});
    const auto started = rfc3339_ms(parts_.clock.now());
    const auto outcome = step.run();
    evidence.steps.push_back(
        {step.name, devices::to_string(outcome.result), outcome.detail, started, rfc3339_ms(parts_.clock.now())});
    if (outcome.result == devices::StepResult::failed) {
      evidence.outcome = "quarantined";
      break;
    }
  }
  set_running(std::nullopt);
  evidence.finished_at = rfc3339_ms(parts_.clock.now());
  return evidence;
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
  std::vector<CleaningRecordView> views;
  views.reserve(appended->size());
  for (const auto& record : *appended) views.push_back(record_view(record));
  bool freed = true;
  {
    const std::lock_guard lock(mutex_);
    auto next = devices_;
    for (std::size_t i = 0; i < cleaned.size(); ++i) {
      last_[cleaned[i].entry.address] = views[i];
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
    publish_cleaning(one.entry.address, one.entry.vm, std::nullopt, view);
  }
}

void DeviceLifecycle::log_clean(const Cleaned& cleaned, const CleaningRecordView& view) {
  std::string marks;
  for (const auto& step : cleaned.evidence.steps) {
    if (step.result != "passed") marks += "; " + step.name + " " + step.result + ": " + step.detail;
  }
  log(LogLevel::info,
      "cleaning: " + cleaned.entry.address.to_string() + " is clean (evidence " + std::to_string(view.sequence) + ")" +
          marks,
      {.vm = cleaned.entry.vm});
}

void DeviceLifecycle::set_running(const std::optional<Running>& running) {
  std::optional<CleaningView> view;
  std::string vm;
  {
    const std::lock_guard lock(mutex_);
    running_ = running;
    if (!running) return;
    const auto* entry = find_entry(devices_, running->address);
    if (entry == nullptr) return;
    view = cleaning_view_locked(*entry, {});
    vm = entry->vm;
  }
  publish_cleaning(running->address, vm, view, std::nullopt);
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

CleaningView DeviceLifecycle::cleaning_view_locked(const DeviceStateEntry& entry,
                                                   const std::set<PciAddress>& held) const {
  CleaningView view{entry.address, entry.vm, entry.since, "", ""};
  if (held.count(entry.address) != 0) view.held_by = entry.vm.empty() ? "a VM" : entry.vm;
  if (running_ && running_->address == entry.address) view.step = running_->step;
  return view;
}

void DeviceLifecycle::publish_quarantine(const PciAddress& address, const std::optional<QuarantineView>& entry) {
  ServiceEvent event;
  event.kind = ServiceEvent::Kind::quarantine;
  event.vm = entry ? entry->vm : "";
  event.devices = {address};
  event.quarantine = entry;
  parts_.events.publish(event);
}

void DeviceLifecycle::publish_cleaning(const PciAddress& address, const std::string& vm,
                                       std::optional<CleaningView> cleaning,
                                       std::optional<CleaningRecordView> cleaned) {
  ServiceEvent event;
  event.kind = ServiceEvent::Kind::cleaning;
  event.vm = vm;
  event.devices = {address};
  event.cleaning = std::move(cleaning);
  event.cleaned = std::move(cleaned);
  parts_.events.publish(event);
}

// Wakes when released() says so, and every half minute besides: a device whose state could not be
// written is tried again.
void DeviceLifecycle::run_thread() {
  for (;;) {
    clean_waiting();
    std::unique_lock lock(mutex_);
    wake_.wait_for(lock, std::chrono::seconds(30), [this] { return woken_ || stopping_; });
    if (stopping_) return;
    woken_ = false;
  }
}

}  // namespace hostagent::daemon
