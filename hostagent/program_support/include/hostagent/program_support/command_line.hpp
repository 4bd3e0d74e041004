// hostagent/command_line: how both programs read their command line, so they answer help, typos
// and exit codes alike.
#pragma once

#include <CLI/App.hpp>
#include <optional>
#include <string>

namespace hostagent::program_support {

// CLI11_PARSE, except that help asked for beside words no command knows is an error: CLI11 answers
// --help before it looks at the other arguments, so "hostagentctl UNKNOWN --help" would print the
// top's help and exit 0, and a typo in a script would pass. The exit code when parsing ends the
// program (help, version, an error), nullopt when the program goes on.
std::optional<int> parse_command_line(CLI::App& app, int argc, char** argv);

// The built-in simulated hosts, for --simulated's help: "vela1, vela2, ...".
std::string simulated_host_list();

}  // namespace hostagent::program_support
