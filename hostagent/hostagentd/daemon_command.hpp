// hostagent/cli/daemon_command: what hostagentd does with its command line: load the configuration
// (or the embedded default), assemble and start the service, then either serve until SIGTERM
// (SIGHUP reopens the audit log) or, with --exec, run the given commands in order and exit (no API:
// for scripts and crash tests).
// Under systemd (docs/systemd.md): STATUS= lines as start-up proceeds, READY=1 once reconciled and
// listening, WATCHDOG=1 while the service answers, STOPPING=1 at SIGTERM; the API on the sockets
// systemd passed (socket activation); the host's processes confined to the housekeeping CPUs.
#pragma once

#include <filesystem>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

namespace hostagent::cli {

struct DaemonArgs {
  std::optional<std::filesystem::path> config_file;      // default /etc/hostagent/hostagent.yaml
  std::optional<std::string> simulated;                  // the embedded default on this simulated host
  std::optional<std::filesystem::path> state_directory;  // overrides the configuration's
  std::vector<std::string> listen;                       // overrides api.listen ("unix:/PATH", "tcp://HOST:PORT")
  std::vector<std::string> exec;                         // "create vm1 cx-2x1", "show vm1", ...
  std::string pause_at;                                  // crash tests: "create:define"
  std::filesystem::path pause_marker;                    // written when the pause is reached
};

// The commands --exec understands, for --help.
std::string exec_help();

// Returns the process exit status: 0 when everything asked succeeded.
int run_hostagentd(const DaemonArgs& args, std::ostream& out, std::ostream& err);

}  // namespace hostagent::cli
