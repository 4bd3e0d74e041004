// hostagentctl completion bash|zsh: shell completion generated from the CLI11 command tree itself,
// so a command or option added to hostagentctl completes without anyone editing a script.
#pragma once

#include <CLI/CLI.hpp>
#include <map>
#include <set>
#include <string>
#include <vector>

namespace hostagent::ctl {

// What completes where: per command path ("" for the top, "vm", "vm create"), its subcommands and
// its options (the top's options are offered everywhere: they fall through); the options that
// take a value (their value completes as a file name).
struct CompletionTree {
  std::map<std::string, std::vector<std::string>> subcommands;
  std::map<std::string, std::vector<std::string>> options;
  std::set<std::string> value_options;
};

CompletionTree completion_tree(const CLI::App& app);
std::string bash_completion(const CLI::App& app, const std::string& program);
std::string zsh_completion(const CLI::App& app, const std::string& program);

}  // namespace hostagent::ctl
