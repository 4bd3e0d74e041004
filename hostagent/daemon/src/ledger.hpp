// daemon/ledger (private): who holds what, in memory. Rebuilt from libvirt's domain metadata at
// every start, changed only under its mutex: reserve() places and records in one critical section,
// so two creates can never be given the same CPU, device or hugepage.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "event_hub.hpp"
#include "hostagent/common/result.hpp"
#include "hostagent/daemon/host_readers.hpp"
#include "hostagent/fleet/provider_tree.hpp"
#include "hostagent/numa/host_model.hpp"
#include "hostagent/numa/placement.hpp"
#include "hostagent/state/vm_record.hpp"
#include "hostagent/virt/hypervisor.hpp"

namespace hostagent::daemon {

struct LedgerEntry {
  std::string name;
  bool managed = false;  // a record of ours is in its metadata (or it is being created by us)
  bool defined = false;  // libvirt knows the domain
  std::string uuid;
  virt::DomainState state = virt::DomainState::shut_off;
  std::string last_event;
  uint64_t resumed_events = 0;  // counted for Ledger::wait_resumed
  std::optional<state::VmRecord> record;
  // A domain hostagent did not make: its pinned CPUs, passthrough functions and hugepages
  // (state/domain_holdings), held like a VM's so placement never gives them out.
  std::optional<numa::Allocation> foreign_holdings;
};

// The state list_vms() reports for an entry: libvirt's, worded, or "absent" before the define.
std::string worded_state(const LedgerEntry& entry);

// What is held, what placement is told, and the version they are: taken under one lock, so the
// three always agree.
struct Holdings {
  std::vector<numa::Allocation> held;  // one per VM holding anything
  uint64_t version = 0;                // changes with every change that may change `held` or the quarantine
  numa::HostPolicy policy;             // housekeeping CPUs, hugepage checks, quarantined devices
};

// The domains the ledger knows, counted: what a status or a scrape needs, without copying entries.
struct DomainCounts {
  int managed = 0;
  int foreign = 0;
  std::map<std::string, int> by_state;  // by worded_state()
};

// A create's Placement claim (docs/placement.md, "Claims"): placement takes exactly what the
// allocations name on this host's provider tree, which is named after `host_name`.
struct ReserveClaim {
  std::string host_name;
  const fleet::ProviderResources* allocations = nullptr;
};

class Ledger {
 public:
  // Devices changing hands are published to `events` (after the ledger's lock is released).
  // free_hugepages, when given, reads what the kernel's pools have free now, at each placement
  // (numa::HostPolicy::unclaimed_hugepages).
  using FreePages = HostReaders::FreePages;
  using HugepageReader = HostReaders::FreePagesReader;
  Ledger(const numa::HostModel& host, numa::HostPolicy policy, EventHub& events, HugepageReader free_hugepages = {})
      : host_(host), policy_(std::move(policy)), events_(events), free_hugepages_(std::move(free_hugepages)) {}

  // Places a new VM and records what it holds in record.allocation, under one lock. conflict when
  // the name is taken (by any domain), does_not_fit when the host has no room.
  // With a claim, what the claim does not cover is out of reach, and a UUID another VM has is a
  // conflict.
  Result<numa::Placement> reserve(state::VmRecord& record, const numa::PlacementRequest& request,
                                  const ReserveClaim* claim = nullptr);
  // What a create is refused for before it is queued, by the rules reserve() applies again under
  // its lock: a UUID or a MAC another VM has (conflict, naming the field and the VM), and a claim
  // the host's tree cannot read (invalid_argument) or no longer holds free (does_not_fit). So the
  // documented 400 and 409 are answered at once, not as a queued create that fails.
  Status check_create(const std::string& uuid, const std::vector<MacAddress>& macs, const ReserveClaim* claim) const;
  void release(const std::string& name);

  // A domain as libvirt reports it; record is set when it carries a readable record of ours, and
  // holdings, what it holds, when it is another's.
  void adopt(const virt::DomainSummary& domain, std::optional<state::VmRecord> record,
             std::optional<numa::Allocation> holdings = std::nullopt);
  void set_domain(const std::string& name, const std::string& uuid, virt::DomainState state);
  void set_record(const state::VmRecord& record);
  // Records a lifecycle event. True when the ledger cannot follow it alone (a domain defined, or
  // undefined): unless hostagent is at work on that VM, the caller then syncs with libvirt.
  bool on_event(const virt::DomainEvent& event);
  // How many resumed events `name` has had; wait_resumed waits (at most `timeout`) for one more than
  // `seen`. libvirt delivers a domain's events in order, so once a start's resumed event is here its
  // started and suspended ones are too, and cannot turn the VM back to paused after the start.
  uint64_t resumed_events(const std::string& name) const;
  bool wait_resumed(const std::string& name, uint64_t seen, std::chrono::milliseconds timeout);

  std::optional<LedgerEntry> find(const std::string& name) const;
  std::vector<LedgerEntry> entries() const;
  // Moves with every change to what entries() returns (read before entries(), a later change shows
  // as a later version): what lets a reader keep what it built from an earlier call.
  uint64_t entries_version() const { return entries_version_.load(std::memory_order_acquire); }
  std::vector<numa::Allocation> held() const;
  Holdings holdings() const;
  // holdings(), with `free` (what the kernel's pools had free when last read) in the policy as the
  // next placement would count it: what capacity reports. nullopt: the accounting alone.
  Holdings holdings_with(std::optional<FreePages> free) const;
  DomainCounts counts() const;
  // The devices placement must never give (daemon/device_lifecycle's: being cleaned, quarantined),
  // each with why: replaces the last.
  void set_withheld(std::map<PciAddress, numa::Withheld> withheld);

 private:
  Result<numa::Placement> place_and_record(state::VmRecord& record, const numa::PlacementRequest& request,
                                           const ReserveClaim* claim);
  std::vector<numa::Allocation> held_locked() const;
  Result<numa::HostPolicy> policy_now_locked() const;
  Status check_identity_locked(const std::string& uuid, const std::vector<MacAddress>& macs) const;
  Status hold_outside_claim_locked(const ReserveClaim& claim, const numa::HostPolicy& policy,
                                   std::vector<numa::Allocation>& held) const;
  numa::HostPolicy policy_with_locked(std::optional<FreePages> free) const;
  void publish_devices(const std::string& vm, const std::vector<PciAddress>& devices, bool held);

  const numa::HostModel& host_;
  const numa::HostPolicy policy_;
  EventHub& events_;
  const HugepageReader free_hugepages_;
  mutable std::mutex mutex_;
  std::condition_variable resumed_;  // notified on every resumed event
  std::map<std::string, LedgerEntry> entries_;
  std::map<PciAddress, numa::Withheld> withheld_;
  // bumped by every change to an entry's record, to the set of entries, or to what is withheld
  uint64_t holdings_version_ = 0;
  std::atomic<uint64_t> entries_version_{0};  // bumped under mutex_, read without it
};

}  // namespace hostagent::daemon
