// daemon/context (private): what every operation works with. Owned by the service; operations get
// it by reference and never outlive it.
#pragma once

#include <atomic>
#include <map>
#include <memory>
#include <string>

#include "device_lifecycle.hpp"
#include "event_hub.hpp"
#include "guest_watch.hpp"
#include "hostagent/config/daemon_config.hpp"
#include "hostagent/daemon/clock.hpp"
#include "hostagent/daemon/service_parts.hpp"
#include "hostagent/daemon/step_hook.hpp"
#include "hostagent/devices/device_preparer.hpp"
#include "hostagent/numa/host_model.hpp"
#include "hostagent/service/vm_service.hpp"
#include "hostagent/state/create_requests.hpp"
#include "hostagent/state/journal.hpp"
#include "hostagent/virt/hypervisor.hpp"
#include "hostagent/vmtemplates/vm_template.hpp"
#include "ledger.hpp"
#include "operation_tracker.hpp"
#include "request_ids.hpp"

namespace hostagent::daemon {

struct Context {
  Context(ServiceParts parts, state::Journal journal_in, state::CreateRequests requests_in,
          state::OperationRecords operation_records_in, numa::HostPolicy policy)
      : config(std::move(parts.config)),
        host(std::move(parts.host)),
        readers(std::move(parts.readers)),
        templates(std::move(parts.templates)),
        host_id(std::move(parts.host_id)),
        hypervisor(std::move(parts.hypervisor)),
        devices(std::move(parts.devices)),
        clock(std::move(parts.clock)),
        hook(std::move(parts.hook)),
        journal(std::move(journal_in)),
        operation_records(std::move(operation_records_in)),
        ledger(host, std::move(policy), events, readers.free_hugepages),
        lifecycle({config.state_directory / "device_states.json", config.state_directory / "cleaning_evidence.jsonl",
                   host, *devices, ledger, events, *clock, hook, readers.on_bus, config.hygiene}),
        operations(*clock, events, &operation_records),
        requests(std::move(requests_in), *clock) {}

  const config::DaemonConfig config;
  const numa::HostModel host;
  const HostReaders readers;
  const std::map<std::string, vmtemplates::VmTemplate> templates;
  const std::string host_id;
  const std::unique_ptr<virt::Hypervisor> hypervisor;
  const std::unique_ptr<devices::DevicePreparer> devices;
  const std::shared_ptr<Clock> clock;
  const std::shared_ptr<StepHook> hook;
  state::Journal journal;
  state::OperationRecords operation_records;  // before operations, which writes to it
  EventHub events;
  Ledger ledger;                // refers to host and events: declared after them
  DeviceLifecycle lifecycle;    // refers to host, devices, ledger, events and clock
  OperationTracker operations;  // refers to clock, events and operation_records
  RequestIds requests;          // refers to clock
  // Refers to clock, hypervisor and operations; its thread stops before they go.
  GuestWatch guest_watch{*clock, *hypervisor, operations};
  std::atomic<uint64_t> operations_started{0};
};

// The VM as the API shows it: the ledger's entry, with what the VM is doing now.
service::VmView view_of(Context& context, const LedgerEntry& entry);

}  // namespace hostagent::daemon
