// hostagentctl's commands that talk to hostagentd's REST API: host, devices, templates, VMs,
// operations, events, status, health, metrics, and the shell completion of the whole command
// tree. The connection options are global (they fall through from any subcommand).
#pragma once

#include <CLI/CLI.hpp>
#include <functional>
#include <optional>
#include <ostream>
#include <string>
#include <utility>
#include <vector>

#include "hostagent/api/api_client.hpp"
#include "progress.hpp"

namespace hostagent::ctl {

struct ApiGlobals {
  std::string socket;      // --socket PATH: unix:PATH
  std::string url;         // --url, else $HOSTAGENT_URL
  std::string token_file;  // --token-file: the bearer token, for http(s)://
  std::string certificate_file;
  std::string key_file;
  std::string ca_file;
  bool json = false;
  double timeout_seconds = 30;
};

// The client's options from the globals: --socket, then --url / $HOSTAGENT_URL, then the default
// socket; the token read from its file (whitespace around it trimmed).
Result<api::ClientOptions> client_options(const ApiGlobals& globals);

class ApiCommands {
 public:
  // Adds the global options to app and the API's commands under it; `templates` (the existing
  // offline `template validate`'s parent) gains list, show and check.
  ApiCommands(CLI::App& app, CLI::App& templates);
  ApiCommands(const ApiCommands&) = delete;  // CLI11 holds pointers into it
  ApiCommands& operator=(const ApiCommands&) = delete;

  // Runs the API command the command line named; nullopt when it named none of them.
  std::optional<int> run(std::ostream& out, std::ostream& err);

  struct Context {
    api::ApiClient& client;
    const ApiGlobals& globals;
    std::ostream& out;
    std::ostream& err;
    WaitSettings wait;
  };
  using Action = std::function<int(Context&)>;

 private:
  struct Args {
    std::string name;
    std::string id;
    std::vector<std::string> files;
    std::string role;
    std::string address;  // a PCI address: the device a command is about
    bool free_only = false;
    int tail = 100;          // vm console-log: lines
    bool take_over = false;  // vm console
    std::string template_name;
    std::string request_id;
    std::string boot_image;
    std::vector<std::string> macs;
    std::string ssh_key_file;
    std::string user_data_file;
    bool force = false;
    bool no_wait = false;
    std::string shell;
    std::string reason;        // host cordon, drain
    int grace_seconds = 0;     // host drain: 0 leaves the daemon's default
    int interval_seconds = 5;  // vm top
  };

  void add_globals();
  void add_host_commands();
  void add_template_commands(CLI::App& templates);
  void add_vm_commands();
  void add_vm_change(CLI::App& vm, const std::string& verb, const std::string& help);
  void add_operation_commands();
  void add_service_commands();
  CLI::App* add(CLI::App& parent, const std::string& name, const std::string& help, Action action);

  CLI::App& app_;
  ApiGlobals globals_;
  Args args_;
  std::vector<std::pair<CLI::App*, Action>> commands_;
  CLI::App* completion_ = nullptr;
};

}  // namespace hostagent::ctl
