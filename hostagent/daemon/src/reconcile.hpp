// daemon/reconcile (private): making the ledger true again. At start: adopt the VMs hostagent made
// (their records are in libvirt's metadata), report the domains it did not make, finish or undo
// each operation the journal says was interrupted, and delete leftovers nothing holds. After
// libvirt reconnects: the same, against a ledger that may have missed events while it was away.
#pragma once

#include "vm_work.hpp"

namespace hostagent::daemon {

// Lists libvirt's domains into the ledger. `initial`: the ledger is empty (daemon start); later
// syncs also drop managed VMs whose domain vanished outside hostagent while no operation ran.
Status sync_domains(VmWork& work, service::ReconcileReport& report, bool initial);

// Finishes (delete, or a create that had started its domain) or undoes (any other create) one
// interrupted operation, then removes its journal entry.
void recover(VmWork& work, const state::JournalEntry& entry, service::ReconcileReport& report);

// Deletes disks nothing holds and has the device preparer give back devices nothing holds.
void release_unheld(VmWork& work, service::ReconcileReport& report);

// All of the above, in that order: the daemon's start. Fails when libvirt cannot list its domains
// or a journal entry cannot be read: serving on a ledger that may be wrong could give a device twice.
Result<service::ReconcileReport> reconcile(VmWork& work);

}  // namespace hostagent::daemon
