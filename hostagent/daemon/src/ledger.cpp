// daemon/ledger: the allocation ledger.
#include "ledger.hpp"

#include <algorithm>
#include <cctype>

#include "hostagent/numa/capacity.hpp"

namespace hostagent::daemon {
namespace {

std::string worded(const virt::DomainEvent& event) {
  std::string text(virt::to_string(event.kind));
  if (!event.detail.empty()) text += " (" + event.detail + ")";
  return text;
}

// The state a lifecycle event leaves a domain in; nullopt when the event does not say.
std::optional<virt::DomainState> state_after(virt::DomainEventKind kind) {
  switch (kind) {
    case virt::DomainEventKind::started:
    case virt::DomainEventKind::resumed:
      return virt::DomainState::running;
    case virt::DomainEventKind::suspended:
      return virt::DomainState::paused;
    case virt::DomainEventKind::stopped:
      return virt::DomainState::shut_off;
    case virt::DomainEventKind::crashed:
      return virt::DomainState::crashed;
    default:
      return std::nullopt;
  }
}

// Whether a domain has its memory now: one that is not running (or not yet defined) takes its
// hugepages from the pool only when it starts.
bool has_its_memory(const LedgerEntry& entry) {
  return entry.defined && (entry.state == virt::DomainState::running || entry.state == virt::DomainState::paused);
}

// A foreign domain that pins nothing, passes nothing through and has no hugepages holds nothing.
bool holds_anything(const numa::Allocation& allocation) {
  return !allocation.cpus.empty() || !allocation.devices.empty() || !allocation.hugepages.empty();
}

}  // namespace

std::string worded_state(const LedgerEntry& entry) {
  return entry.defined ? std::string(virt::to_string(entry.state)) : "absent";
}

Result<numa::Placement> Ledger::reserve(state::VmRecord& record, const numa::PlacementRequest& request,
                                        const ReserveClaim* claim) {
  HA_TRY(auto placement, place_and_record(record, request, claim));
  publish_devices(record.name, record.allocation.devices, true);
  return placement;
}

Result<numa::Placement> Ledger::place_and_record(state::VmRecord& record, const numa::PlacementRequest& request,
                                                 const ReserveClaim* claim) {
  std::lock_guard lock(mutex_);
  if (const auto it = entries_.find(record.name); it != entries_.end()) {
    const std::string whose = it->second.managed ? "a VM" : "a domain hostagent did not make";
    return Error{ErrorCode::conflict, "name " + record.name + " is taken by " + whose + ": choose another name"};
  }
  HA_TRY_STATUS(check_identity_locked(record.uuid, record.inputs.macs));
  HA_TRY(const auto policy, policy_now_locked());
  auto held = held_locked();
  if (claim != nullptr) HA_TRY_STATUS(hold_outside_claim_locked(*claim, policy, held));
  HA_TRY(auto placement, numa::place(host_, held, policy, request));
  record.allocation = numa::allocation_of(record.name, placement, request.hugepage_size_bytes);
  LedgerEntry entry;
  entry.name = record.name;
  entry.managed = true;
  entry.record = record;
  entries_.emplace(record.name, std::move(entry));
  ++holdings_version_;
  ++entries_version_;
  return placement;
}

Status Ledger::check_create(const std::string& uuid, const std::vector<MacAddress>& macs,
                            const ReserveClaim* claim) const {
  std::lock_guard lock(mutex_);
  HA_TRY_STATUS(check_identity_locked(uuid, macs));
  if (claim == nullptr) return ok_status();
  HA_TRY(const auto policy, policy_now_locked());
  auto held = held_locked();
  return hold_outside_claim_locked(*claim, policy, held);
}

// A VM's UUID names one VM (libvirt refuses a second domain with it), and a MAC one NIC: two
// guests with one MAC on a fabric take each other's traffic.
Status Ledger::check_identity_locked(const std::string& uuid, const std::vector<MacAddress>& macs) const {
  // MacAddress values are in lower case whichever case they came in: one MAC, one text.
  for (std::size_t i = 0; i < macs.size(); ++i) {
    for (std::size_t j = 0; j < i; ++j) {
      if (macs[i] != macs[j]) continue;
      const std::string field = "macs[" + std::to_string(i) + "]";
      return Error{ErrorCode::invalid_argument,
                   field + ": " + macs[i] + " is macs[" + std::to_string(j) + "] too: each VF needs a MAC of its own",
                   field};
    }
  }
  for (const auto& [name, entry] : entries_) {
    if (!uuid.empty() && (entry.uuid == uuid || (entry.record && entry.record->uuid == uuid))) {
      return Error{ErrorCode::conflict, "uuid: " + uuid + " is " + name + "'s: a VM's UUID names one VM", "uuid"};
    }
    if (!entry.record) continue;
    const auto& held = entry.record->inputs.macs;
    for (std::size_t i = 0; i < macs.size(); ++i) {
      if (std::find(held.begin(), held.end(), macs[i]) == held.end()) continue;
      const std::string field = "macs[" + std::to_string(i) + "]";
      return Error{ErrorCode::conflict,
                   field + ": " + macs[i] + " is " + name + "'s: a MAC names one NIC; choose another", field};
    }
  }
  return ok_status();
}

// Placement granted the claim against the host's whole tree: what it leaves out is another's.
Status Ledger::hold_outside_claim_locked(const ReserveClaim& claim, const numa::HostPolicy& policy,
                                         std::vector<numa::Allocation>& held) const {
  const auto capacity = numa::capacity(host_, held, policy);
  fleet::TreeInput input{claim.host_name, &host_, &capacity, &held, policy.housekeeping_cpus, {}};
  const auto tree = fleet::provider_tree(input);
  HA_TRY(const auto limits, fleet::claim_limits(tree, capacity, *claim.allocations));
  held.push_back(fleet::outside_claim(host_, capacity, limits));
  return ok_status();
}

void Ledger::release(const std::string& name) {
  std::vector<PciAddress> devices;
  {
    std::lock_guard lock(mutex_);
    const auto it = entries_.find(name);
    if (it == entries_.end()) return;
    if (it->second.managed && it->second.record) devices = it->second.record->allocation.devices;
    entries_.erase(it);
    ++holdings_version_;
    ++entries_version_;
  }
  publish_devices(name, devices, false);
}

void Ledger::publish_devices(const std::string& vm, const std::vector<PciAddress>& devices, bool held) {
  if (devices.empty()) return;
  service::ServiceEvent event;
  event.kind = service::ServiceEvent::Kind::device;
  event.vm = vm;
  event.devices = devices;
  event.held = held;
  events_.publish(event);
}

void Ledger::adopt(const virt::DomainSummary& domain, std::optional<state::VmRecord> record,
                   std::optional<numa::Allocation> holdings) {
  std::lock_guard lock(mutex_);
  auto& entry = entries_[domain.name];
  entry.name = domain.name;
  entry.managed = record.has_value();
  entry.defined = true;
  entry.uuid = domain.uuid;
  entry.state = domain.state;
  entry.record = std::move(record);
  entry.foreign_holdings = std::move(holdings);
  ++holdings_version_;
  ++entries_version_;
}

void Ledger::set_domain(const std::string& name, const std::string& uuid, virt::DomainState state) {
  std::lock_guard lock(mutex_);
  const auto it = entries_.find(name);
  if (it == entries_.end()) return;
  it->second.defined = true;
  if (!uuid.empty()) it->second.uuid = uuid;
  it->second.state = state;
  ++entries_version_;
}

void Ledger::set_record(const state::VmRecord& record) {
  std::lock_guard lock(mutex_);
  const auto it = entries_.find(record.name);
  if (it == entries_.end()) return;
  it->second.record = record;
  ++holdings_version_;
  ++entries_version_;
}

bool Ledger::on_event(const virt::DomainEvent& event) {
  std::lock_guard lock(mutex_);
  const auto it = entries_.find(event.name);
  if (it == entries_.end()) return event.kind == virt::DomainEventKind::defined;
  it->second.last_event = worded(event);
  ++entries_version_;
  if (const auto state = state_after(event.kind)) it->second.state = *state;
  if (event.kind == virt::DomainEventKind::resumed) {
    ++it->second.resumed_events;
    resumed_.notify_all();
  }
  return event.kind == virt::DomainEventKind::undefined;
}

uint64_t Ledger::resumed_events(const std::string& name) const {
  std::lock_guard lock(mutex_);
  const auto it = entries_.find(name);
  return it == entries_.end() ? 0 : it->second.resumed_events;
}

bool Ledger::wait_resumed(const std::string& name, uint64_t seen, std::chrono::milliseconds timeout) {
  std::unique_lock lock(mutex_);
  return resumed_.wait_for(lock, timeout, [&] {
    const auto it = entries_.find(name);
    return it != entries_.end() && it->second.resumed_events > seen;
  });
}

std::optional<LedgerEntry> Ledger::find(const std::string& name) const {
  std::lock_guard lock(mutex_);
  const auto it = entries_.find(name);
  if (it == entries_.end()) return std::nullopt;
  return it->second;
}

std::vector<LedgerEntry> Ledger::entries() const {
  std::lock_guard lock(mutex_);
  std::vector<LedgerEntry> all;
  all.reserve(entries_.size());
  for (const auto& [name, entry] : entries_) all.push_back(entry);
  return all;
}

std::vector<numa::Allocation> Ledger::held() const {
  std::lock_guard lock(mutex_);
  return held_locked();
}

Holdings Ledger::holdings() const {
  return holdings_with(std::nullopt);
}

Holdings Ledger::holdings_with(std::optional<FreePages> free) const {
  std::lock_guard lock(mutex_);
  return Holdings{held_locked(), holdings_version_, policy_with_locked(std::move(free))};
}

DomainCounts Ledger::counts() const {
  std::lock_guard lock(mutex_);
  DomainCounts counts;
  for (const auto& [name, entry] : entries_) {
    (entry.managed ? counts.managed : counts.foreign)++;
    ++counts.by_state[worded_state(entry)];
  }
  return counts;
}

void Ledger::set_withheld(std::map<PciAddress, numa::Withheld> withheld) {
  std::lock_guard lock(mutex_);
  withheld_ = std::move(withheld);
  ++holdings_version_;  // capacity and the metrics read free devices by it
}

// Read under the ledger's lock, so no VM starts (and takes its pages) between the reading and the
// placement that goes by it.
Result<numa::HostPolicy> Ledger::policy_now_locked() const {
  if (!free_hugepages_) return policy_with_locked(std::nullopt);
  HA_TRY(auto free, free_hugepages_(host_));
  return policy_with_locked(std::move(free));
}

// Pages the kernel counts free but a held VM that is not running will take at its start are not
// free to a new one.
numa::HostPolicy Ledger::policy_with_locked(std::optional<FreePages> free) const {
  numa::HostPolicy policy = policy_;
  policy.withheld = withheld_;
  if (!free) return policy;
  for (const auto& [name, entry] : entries_) {
    if (has_its_memory(entry)) continue;
    const numa::Allocation* held =
        entry.record ? &entry.record->allocation : (entry.foreign_holdings ? &*entry.foreign_holdings : nullptr);
    if (held == nullptr) continue;
    for (const auto& [node, pages] : held->hugepages) {
      const auto pool = free->find({node, held->hugepage_size_bytes});
      if (pool != free->end()) pool->second -= std::min(pool->second, pages);
    }
  }
  policy.unclaimed_hugepages = std::move(*free);
  return policy;
}

std::vector<numa::Allocation> Ledger::held_locked() const {
  std::vector<numa::Allocation> held;
  for (const auto& [name, entry] : entries_) {
    if (entry.managed && entry.record) held.push_back(entry.record->allocation);
    if (!entry.managed && entry.foreign_holdings && holds_anything(*entry.foreign_holdings)) {
      held.push_back(*entry.foreign_holdings);
    }
  }
  return held;
}

}  // namespace hostagent::daemon
