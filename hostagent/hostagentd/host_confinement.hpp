// hostagent/cli/host_confinement: host.confine_host_processes at start: the housekeeping CPUs set as
// AllowedCPUs= on the host's own units through systemd (systemd/cpu_confinement), each
// unit's outcome logged and the whole reported as a STATUS= line. A refusal never stops the
// daemon: VMs still work, only beside host processes, and the operator sees why in the log.
#pragma once

#include "hostagent/config/daemon_config.hpp"
#include "hostagent/systemd/notifier.hpp"

namespace hostagent::cli {

// True when every unit was confined; false when one was not (logged as an error naming the unit
// and systemd's D-Bus error) or the configuration does not ask for it.
bool confine_host_processes(const config::DaemonConfig& config, systemd::Notifier& notifier);

}  // namespace hostagent::cli
