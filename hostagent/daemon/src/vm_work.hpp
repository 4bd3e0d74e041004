// daemon/vm_work (private): what the VM operations are given, in three parts, so a function's
// signature says which it uses. The service owns what the parts refer to (vm_service.cpp's Owners)
// and gives each function only the parts it needs: a step acts on Effects alone, an Operation
// records through Recording alone, and only the operations that render, place or watch a guest get
// the whole VmWork.
#pragma once

#include <atomic>
#include <map>
#include <string>

#include "device_lifecycle.hpp"
#include "guest_watch.hpp"
#include "hostagent/config/daemon_config.hpp"
#include "hostagent/daemon/clock.hpp"
#include "hostagent/daemon/host_readers.hpp"
#include "hostagent/daemon/step_hook.hpp"
#include "hostagent/devices/device_preparer.hpp"
#include "hostagent/numa/host_model.hpp"
#include "hostagent/service/vm_service.hpp"
#include "hostagent/state/journal.hpp"
#include "hostagent/virt/hypervisor.hpp"
#include "hostagent/vmtemplates/vm_template.hpp"
#include "ledger.hpp"
#include "operation_tracker.hpp"

namespace hostagent::daemon {

// What the daemon knows at start and never changes while it runs.
struct Facts {
  config::DaemonConfig config;
  numa::HostModel host;
  HostReaders readers;
  std::map<std::string, vmtemplates::VmTemplate> templates;
  std::string host_id;
};

// What a VM's steps act on: libvirt's domains and volumes, the devices, and the books that say who
// holds what and what waits to be cleaned.
struct Effects {
  virt::Hypervisor& hypervisor;
  devices::DevicePreparer& devices;
  Ledger& ledger;
  DeviceLifecycle& lifecycle;
};

// What records an operation while it runs: its journal entry (named with a serial of the run),
// its progress and phases as the API shows them, and the tests' hook before each step.
struct Recording {
  Clock& clock;
  StepHook* hook;  // none outside tests
  state::Journal& journal;
  OperationTracker& operations;
  std::atomic<uint64_t>& serial;
};

// What an operation that renders, places or watches a guest uses: all three, and the guest watch
// that follows a started guest's phases.
struct VmWork {
  const Facts& facts;
  Effects effects;
  Recording recording;
  GuestWatch& guest_watch;
};

// The VM as the API shows it: the ledger's entry, with what the VM is doing now.
service::VmView view_of(const numa::HostModel& host, OperationTracker& operations, const LedgerEntry& entry);

}  // namespace hostagent::daemon
