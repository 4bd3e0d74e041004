// hostagent/daemon/service_parts: what a VmService runs with, and starting one. The application's
// side of the service: the parts are adapters (libvirt, device preparation, a clock), assembled by
// the program (hostagent/cli/assembly) or by a test with doubles.
#pragma once

#include <chrono>
#include <map>
#include <memory>
#include <string>

#include "hostagent/common/result.hpp"
#include "hostagent/config/daemon_config.hpp"
#include "hostagent/daemon/clock.hpp"
#include "hostagent/daemon/host_readers.hpp"
#include "hostagent/daemon/step_hook.hpp"
#include "hostagent/devices/device_preparer.hpp"
#include "hostagent/numa/host_model.hpp"
#include "hostagent/service/vm_service.hpp"
#include "hostagent/virt/hypervisor.hpp"
#include "hostagent/vmtemplates/vm_template.hpp"

namespace hostagent::daemon {

// Everything the service works with, assembled by the caller (main, or a test).
struct ServiceParts {
  config::DaemonConfig config;
  numa::HostModel host;
  // What the daemon reads from the running host beyond the model, and the seed writer.
  HostReaders readers;
  // How often device health is read again (readers.device_health, HealthPoller): what /v1/metrics
  // reports is at most this old.
  std::chrono::milliseconds device_health_interval{10000};
  std::map<std::string, vmtemplates::VmTemplate> templates;
  // The host's identity (/etc/machine-id), which derived VF MACs start from; "" leaves them to the
  // VM's UUID alone (tests).
  std::string host_id;
  // This boot of the host (the kernel's boot_id): one that differs from the recorded one is a host
  // reboot, and config.on_host_boot says which VMs start again. "" never counts as a reboot.
  std::string boot_id;
  std::unique_ptr<virt::Hypervisor> hypervisor;
  std::unique_ptr<devices::DevicePreparer> devices;
  std::shared_ptr<Clock> clock;
  std::shared_ptr<StepHook> hook;  // null in production
};

// Opens the journal, subscribes to libvirt's events and reconciles: returns once the state is
// known, before anyone is served.
Result<std::unique_ptr<service::VmService>> start_service(ServiceParts parts);

}  // namespace hostagent::daemon
