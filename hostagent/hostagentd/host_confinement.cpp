// hostagent/cli/host_confinement: applying and reporting host.confine_host_processes.
#include "host_confinement.hpp"

#include "hostagent/common/sysfs_root.hpp"
#include "hostagent/systemd/cpu_confinement.hpp"
#include "hostagent/systemd/log.hpp"

namespace hostagent::cli {

using systemd::log;
using systemd::LogLevel;

bool confine_host_processes(const config::DaemonConfig& config, systemd::Notifier& notifier) {
  if (!config.confine_host_processes) return false;
  const std::string cpus = format_cpu_list(config.housekeeping_cpus);
  const std::string consequence = "; VMs still run, but host processes may use their CPUs";
  auto results = systemd::confine_host_processes(config.housekeeping_cpus);
  if (!results.ok()) {
    log(LogLevel::error, "host processes not confined to CPUs " + cpus + ": " + results.error().message + consequence);
    (void)notifier.status("host processes NOT confined to CPUs " + cpus + " (see the log)");
    return false;
  }
  std::string confined;
  std::string refused;
  for (const auto& [unit, result] : *results) {
    if (result.ok()) {
      log(LogLevel::info, "confined " + unit + " to CPUs " + cpus + " (AllowedCPUs=, until reboot)");
      confined += (confined.empty() ? "" : ", ") + unit;
      continue;
    }
    log(LogLevel::error,
        "could not confine " + unit + " to CPUs " + cpus + ": " + result.error().message + consequence);
    refused += (refused.empty() ? "" : ", ") + unit;
  }
  std::string status = "host processes confined to CPUs " + cpus + ": " + (confined.empty() ? "none" : confined);
  if (!refused.empty()) status += "; refused for " + refused + " (see the log)";
  (void)notifier.status(status);
  return refused.empty();
}

}  // namespace hostagent::cli
