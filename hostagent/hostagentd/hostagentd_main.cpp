// hostagentd: the daemon. Only wiring lives here: hostagent/cli/daemon_command does the work.
#include <CLI/CLI.hpp>
#include <iostream>

#include "daemon_command.hpp"
#include "hostagent/program_support/build_info.hpp"
#include "hostagent/program_support/command_line.hpp"

int main(int argc, char** argv) {
  CLI::App app{"hostagentd: the hostagent daemon"};
  app.set_version_flag("--version", hostagent::program_support::version_string("hostagentd"));
  hostagent::cli::DaemonArgs args;
  auto* config =
      app.add_option("--config", args.config_file, "Configuration file (default /etc/hostagent/hostagent.yaml)");
  app.add_option("--simulated", args.simulated,
                 "Run the embedded default instead: libvirt's test:/// driver on this simulated host (" +
                     hostagent::program_support::simulated_host_list() + ")")
      ->excludes(config);
  app.add_option("--state-dir", args.state_directory, "State directory (overrides the configuration's)");
  app.add_option("--listen", args.listen,
                 "Serve the API here instead of the configuration's api.listen (unix:/PATH or tcp://HOST:PORT); "
                 "repeatable");
  app.add_option("--exec", args.exec, hostagent::cli::exec_help());
  // For the crash tests: stop before a step ("create:define") after writing the marker file.
  app.add_option("--pause-at", args.pause_at)->group("");
  app.add_option("--pause-marker", args.pause_marker)->group("");
  if (const auto exit_code = hostagent::program_support::parse_command_line(app, argc, argv)) return *exit_code;
  return hostagent::cli::run_hostagentd(args, std::cout, std::cerr);
}
