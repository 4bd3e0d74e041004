// daemon/reconcile: adoption, recovery of interrupted operations, release of leftovers.
#include "reconcile.hpp"

#include <algorithm>
#include <filesystem>
#include <set>

#include "daemon_log.hpp"
#include "hostagent/state/domain_holdings.hpp"
#include "vm_steps.hpp"

namespace hostagent::daemon {
namespace {

constexpr std::string_view kVolumePrefix = "hostagent-";

bool contains(const std::vector<std::string>& items, const std::string& item) {
  return std::find(items.begin(), items.end(), item) != items.end();
}

std::string describe(const state::JournalEntry& entry) {
  return std::string(state::to_string(entry.kind)) + " " + entry.vm;
}

// Drops the ledger's entry for the record's VM, but only if it is that record's (same UUID).
void release_if_same(VmWork& work, const state::VmRecord& record) {
  const auto entry = work.effects.ledger.find(record.name);
  if (entry && entry->record && entry->record->uuid == record.uuid) release_vm(work.effects, record.name);
}

// libvirt's <hugepages/> without a page size means the kernel's default, which is 2 MiB on x86-64
// unless default_hugepagesz= says otherwise.
constexpr uint64_t kDefaultHugepageBytes = 2ULL << 20U;

// A domain hostagent did not make is never changed, but what it holds is held: placement must not
// give a VM the CPUs it is pinned to, its passthrough functions or its hugepages. What cannot be
// read is not counted, and the report says so; what it may use without pinning is logged.
std::optional<numa::Allocation> foreign_holdings(VmWork& work, const std::string& name,
                                                 service::ReconcileReport& report) {
  const std::string whose = "domain " + name + " (not hostagent's): ";
  auto xml = work.effects.hypervisor.domain_xml(name);
  if (!xml.ok()) {
    report.problems.push_back(whose + "what it holds could not be read, and is not counted: " + xml.error().message);
    return std::nullopt;
  }
  auto holdings = state::domain_holdings(name, *xml, kDefaultHugepageBytes);
  if (!holdings.ok()) {
    report.problems.push_back(whose + "what it holds is not counted: " + holdings.error().message);
    return std::nullopt;
  }
  for (const auto& note : holdings->uncounted) log(LogLevel::warning, whose + note);
  return std::move(holdings->allocation);
}

void adopt_foreign(VmWork& work, const virt::DomainSummary& domain, service::ReconcileReport& report) {
  work.effects.ledger.adopt(domain, std::nullopt, foreign_holdings(work, domain.name, report));
}

void adopt(VmWork& work, const virt::DomainSummary& domain, service::ReconcileReport& report) {
  if (!domain.metadata) {
    adopt_foreign(work, domain, report);
    report.foreign.push_back(domain.name);
    return;
  }
  auto record = state::parse_record(*domain.metadata);
  if (!record.ok()) {
    adopt_foreign(work, domain, report);
    report.foreign.push_back(domain.name);
    report.problems.push_back("domain " + domain.name + ": its hostagent record cannot be read, so it is treated " +
                              "as foreign: " + record.error().message);
    return;
  }
  work.effects.ledger.adopt(domain, std::move(record).value());
  report.adopted.push_back(domain.name);
}

// What a VM removed outside hostagent leaves in the state directory, removed as its delete would:
// its seed (the tenant's keys and user data) and its start history.
void forget_vm_files(VmWork& work, const state::VmRecord& record) {
  if (auto removed = delete_seed(work.effects, record); !removed.ok()) {
    log(LogLevel::warning, "the seed of " + record.name + " stays: " + removed.error().message, {.vm = record.name});
  }
  work.recording.operations.forget_starts(record.name);
}

// A domain undefined outside hostagent (virsh undefine, another tool): its devices are released at
// once through its record, as a delete would, so none stays bound to vfio-pci or configured for a
// guest that is gone, and none is given to the next VM in that state. A release that fails keeps
// the entry, and so the devices, held: the next sync or start tries again.
void drop_vanished(VmWork& work, const std::set<std::string>& listed) {
  for (const auto& entry : work.effects.ledger.entries()) {
    if (listed.count(entry.name) != 0 || !entry.defined || work.recording.operations.progress_of(entry.name)) continue;
    if (entry.managed && entry.record) {
      if (auto released = release_devices(work.effects, *entry.record); !released.ok()) {
        log(LogLevel::warning,
            "domain " + entry.name + " was removed outside hostagent, and its devices could not be released (" +
                released.error().message + "): they stay held until a retry succeeds",
            {.vm = entry.name});
        continue;
      }
    }
    release_vm(work.effects, entry.name);
    if (entry.managed && entry.record) forget_vm_files(work, *entry.record);
    log(LogLevel::warning,
        "domain " + entry.name + " was removed outside hostagent; what it held is free again, its devices once cleaned",
        {.vm = entry.name});
  }
}

// Every step of create, newest first, whatever the entry says had begun: a create journals its
// entry once before its first step (daemon/operation), and each undo is idempotent and touches only
// what is this record's. An entry an earlier release wrote before each step is undone the same way.
Status undo_create(VmWork& work, const state::JournalEntry& entry) {
  const auto steps = create_step_names();
  for (auto step = steps.rbegin(); step != steps.rend(); ++step) {
    HA_TRY_STATUS(create_undo(*step)(work.effects, entry.record));
  }
  return ok_status();
}

Status finish_delete(VmWork& work, const state::JournalEntry& entry) {
  for (const auto& step : delete_steps()) HA_TRY_STATUS(step.run(work.effects, entry.record));
  return ok_status();
}

// Seeds of VMs gone while the daemon was down (undefined outside hostagent, or a delete whose
// tidying a crash cut short): at start, whatever no VM in the ledger owns. Their start histories
// are the operation tracker's, forgotten once it has loaded them (VmService::begin).
void release_unheld_files(VmWork& work, service::ReconcileReport& report) {
  std::set<std::string> seeds;
  for (const auto& entry : work.effects.ledger.entries()) {
    if (entry.record) seeds.insert(entry.record->inputs.seed_iso);
  }
  const auto directory = work.facts.config.state_directory / "seeds";
  std::error_code ec;
  for (std::filesystem::directory_iterator it(directory, ec), end; !ec && it != end; it.increment(ec)) {
    if (it->path().extension() != ".iso" || seeds.count(it->path().string()) != 0) continue;
    std::error_code removed;
    if (std::filesystem::remove(it->path(), removed); removed) {
      report.problems.push_back("remove " + it->path().string() + ": " + removed.message());
      continue;
    }
    report.released.push_back("seed " + it->path().filename().string());
  }
}

void release_unheld_volumes(VmWork& work, service::ReconcileReport& report) {
  const auto& pool = work.facts.config.storage_pool;
  auto volumes = work.effects.hypervisor.list_volumes(pool);
  if (!volumes.ok()) {
    if (volumes.error().code != ErrorCode::not_found) report.problems.push_back(volumes.error().message);
    return;
  }
  std::set<std::string> held;
  for (const auto& entry : work.effects.ledger.entries()) {
    if (entry.record) held.insert(entry.record->inputs.disk_volume);
  }
  for (const auto& volume : *volumes) {
    if (volume.rfind(kVolumePrefix, 0) != 0 || held.count(volume) != 0) continue;
    if (auto deleted = work.effects.hypervisor.delete_volume(pool, volume); !deleted.ok()) {
      report.problems.push_back(deleted.error().message);
      continue;
    }
    report.released.push_back("volume " + pool + "/" + volume);
  }
}

}  // namespace

Status sync_domains(VmWork& work, service::ReconcileReport& report, bool initial) {
  HA_TRY(const auto domains, work.effects.hypervisor.list());
  std::set<std::string> listed;
  for (const auto& domain : domains) {
    listed.insert(domain.name);
    const auto known = work.effects.ledger.find(domain.name);
    // A domain not hostagent's is read again at each sync: redefined, it may hold other things.
    if (initial || !known || !known->defined || !known->managed) {
      adopt(work, domain, report);
    } else {
      work.effects.ledger.set_domain(domain.name, domain.uuid, domain.state);
    }
  }
  if (!initial) drop_vanished(work, listed);
  // What the ledger now holds is cleaned once let go: VMs from before the device lifecycle, and
  // domains hostagent did not make, whose devices no prepare of ours marked.
  work.effects.lifecycle.mark_held(work.effects.ledger.held());
  return ok_status();
}

void recover(VmWork& work, const state::JournalEntry& entry, service::ReconcileReport& report) {
  // Marked busy, so the events this recovery causes are not taken for changes made outside hostagent.
  work.recording.operations.progress(entry.vm, "recover", std::string(state::to_string(entry.kind)));
  Status done = ok_status();
  bool finished = true;
  if (entry.kind == state::OperationKind::create) {
    // A create whose domain started had done all it does: only the entry's removal was missing.
    finished = contains(entry.steps_done, std::string(state::step::start));
    if (!finished) done = undo_create(work, entry);
  } else if (entry.kind == state::OperationKind::remove) {
    done = finish_delete(work, entry);
  }
  if (!done.ok()) {
    work.recording.operations.idle(entry.vm);
    report.problems.push_back(describe(entry) +
                              ": interrupted, and recovery failed (retried at the next "
                              "reconnect or start): " +
                              done.error().message);
    return;
  }
  if (entry.kind == state::OperationKind::remove || (entry.kind == state::OperationKind::create && !finished)) {
    release_if_same(work, entry.record);
  }
  if (auto removed = work.recording.journal.remove(entry.id); !removed.ok())
    report.problems.push_back(removed.error().message);
  work.recording.operations.idle(entry.vm);
  (finished ? report.finished : report.rolled_back).push_back(describe(entry));
  log(LogLevel::info, describe(entry) + " was interrupted: " + (finished ? "finished" : "rolled back"),
      {.vm = entry.vm, .operation = std::string(state::to_string(entry.kind))});
}

void release_unheld(VmWork& work, service::ReconcileReport& report) {
  release_unheld_volumes(work, report);
  release_unheld_files(work, report);
  auto devices = work.effects.devices.release_unheld(work.effects.ledger.held());
  if (!devices.ok()) {
    report.problems.push_back(devices.error().message);
    return;
  }
  for (const auto& device : *devices) report.released.push_back("device " + device);
}

Result<service::ReconcileReport> reconcile(VmWork& work) {
  service::ReconcileReport report;
  HA_TRY_STATUS(sync_domains(work, report, true));
  // libvirt lists domains in no particular order; the report is read by people, and compared.
  std::sort(report.adopted.begin(), report.adopted.end());
  std::sort(report.foreign.begin(), report.foreign.end());
  // An entry that cannot be read is an operation whose effects are unknown: starting anyway could
  // give its CPUs or devices to another VM. The message names the file for the operator.
  HA_TRY(const auto entries, work.recording.journal.entries());
  for (const auto& entry : entries) recover(work, entry, report);
  release_unheld(work, report);
  return report;
}

}  // namespace hostagent::daemon
