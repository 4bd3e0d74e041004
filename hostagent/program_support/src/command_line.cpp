// hostagent/command_line: parsing with CLI11, help refused beside unknown words.
#include "hostagent/program_support/command_line.hpp"

#include <CLI/CLI.hpp>

#include "hostagent/simhost/sim_host.hpp"

namespace hostagent::program_support {

std::optional<int> parse_command_line(CLI::App& app, int argc, char** argv) {
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& help) {
    const auto unknown = app.remaining(true);  // what the parse left over, subcommands' included
    if (unknown.empty()) return app.exit(help);
    return app.exit(CLI::ExtrasError(unknown));
  } catch (const CLI::RequiredError& error) {
    // "A subcommand is required" for "hostagentctl UNKNOWN": the word it did not know says more.
    const auto unknown = app.remaining(true);
    if (unknown.empty()) return app.exit(error);
    return app.exit(CLI::ExtrasError(unknown));
  } catch (const CLI::ParseError& error) {
    return app.exit(error);
  }
  return std::nullopt;
}

std::string simulated_host_list() {
  std::string names;
  for (const auto& name : simhost::builtin_host_names()) names += (names.empty() ? "" : ", ") + name;
  return names;
}

}  // namespace hostagent::program_support
