// hostagent/cli/daemon_command: hostagentd's run: configuration, service, then serve or --exec.
#include "daemon_command.hpp"

#include <systemd/sd-daemon.h>

#include <csignal>
#include <cstdlib>

#include "api_listener.hpp"
#include "exec_commands.hpp"
#include "hostagent/api/host_json.hpp"
#include "hostagent/config/daemon_config.hpp"
#include "hostagent/daemon/vm_service.hpp"

namespace hostagent::cli {
namespace {

namespace fs = std::filesystem;

constexpr const char* kDefaultConfig = "/etc/hostagent/hostagent.yaml";

// The embedded default's scratch directory: made here when none is given, removed at exit.
class Scratch {
 public:
  Result<fs::path> make() {
    std::string pattern = (fs::temp_directory_path() / "hostagentd-XXXXXX").string();
    if (::mkdtemp(pattern.data()) == nullptr) return errno_error(errno, "create directory", pattern);
    path_ = pattern;
    return path_;
  }
  ~Scratch() {
    std::error_code ec;
    if (!path_.empty()) fs::remove_all(path_, ec);
  }
  Scratch() = default;
  Scratch(const Scratch&) = delete;
  Scratch& operator=(const Scratch&) = delete;

 private:
  fs::path path_;
};

Result<config::DaemonConfig> load(const DaemonArgs& args, Scratch& scratch) {
  if (!args.simulated) {
    HA_TRY(auto loaded, config::load_config(args.config_file.value_or(kDefaultConfig)));
    if (args.state_directory) loaded.state_directory = *args.state_directory;
    return loaded;
  }
  fs::path directory;
  if (args.state_directory) {
    directory = *args.state_directory;
  } else {
    HA_TRY(directory, scratch.make());
  }
  auto embedded = config::embedded_default_config(*args.simulated, directory);
  embedded.template_directories = {HOSTAGENT_SHIPPED_TEMPLATE_DIR};
  return embedded;
}

// --listen replaces the configuration's addresses; checked like them.
Status apply_listen(const DaemonArgs& args, config::DaemonConfig& config) {
  if (args.listen.empty()) return ok_status();
  for (const auto& text : args.listen) {
    auto address = config::parse_listen_address(text);
    if (!address.ok()) return Error{ErrorCode::invalid_argument, "--listen: " + address.error().message};
    const bool authenticated =
        !config.api.tls.certificate.empty() || !config.api.token_file.empty() || !config.api.reader_token_file.empty();
    if (address->kind == config::ListenAddress::Kind::tcp && !authenticated) {
      return Error{ErrorCode::invalid_argument, "--listen " + text +
                                                    ": a tcp:// address needs api.tls or a token file in the "
                                                    "configuration; use a unix: address"};
    }
  }
  config.api.listen = args.listen;
  return ok_status();
}

int run_exec(daemon::VmService& service, const std::vector<std::string>& commands, std::ostream& out,
             std::ostream& err) {
  int status = 0;
  for (const auto& command : commands) {
    out << "$ " << command << std::endl;
    auto result = run_exec_command(service, command);
    if (!result.ok()) {
      err << "hostagentd: " << to_string(result.error().code) << ": " << result.error().message << "\n";
      status = 1;
      continue;
    }
    out << api::to_pretty_json(*result) << std::flush;  // in order with the log lines on stderr
  }
  return status;
}

// Blocked in every thread (they inherit the mask), so the main thread alone takes them in sigwait.
sigset_t stop_signals() {
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGINT);
  return signals;
}

// Ready once state is reconciled (VmService::start returned) and the API listens.
int serve(const config::DaemonConfig& config, daemon::VmService& service, const sigset_t& signals, std::ostream& err) {
  auto api = ApiListener::start(config, service);
  if (!api.ok()) {
    err << "hostagentd: " << to_string(api.error().code) << ": api: " << api.error().message << "\n";
    return 1;
  }
  std::string where;
  for (const auto& endpoint : (*api)->endpoints()) where += (where.empty() ? "" : ", ") + endpoint;
  const auto status = service.status();
  const std::string summary = "STATUS=" + std::to_string(status.managed_vms) + " VMs, " +
                              std::to_string(status.foreign_domains) + " foreign domains; API on " + where;
  sd_notify(0, ("READY=1\n" + summary).c_str());
  err << "hostagentd: ready: " << summary.substr(7) << std::endl;
  int signal = 0;
  sigwait(&signals, &signal);
  sd_notify(0, "STOPPING=1");
  err << "hostagentd: stopping on signal " << signal << "\n";
  return 0;
}

}  // namespace

std::string exec_help() {
  return "Run these commands, in order, then exit: create NAME TEMPLATE [boot_image=PATH] [request_id=ID] "
         "[ssh_key_file=PATH | user_data_file=PATH] | "
         "show NAME | list | status | start NAME | stop NAME [force] | reboot NAME | delete NAME";
}

int run_hostagentd(const DaemonArgs& args, std::ostream& out, std::ostream& err) {
  const auto fail = [&err](const Error& error) {
    err << "hostagentd: " << to_string(error.code) << ": " << error.message << "\n";
    return 1;
  };
  // A peer that goes away (libvirtd restarting, an API client hanging up) must make our write fail
  // with EPIPE, not kill the daemon.
  std::signal(SIGPIPE, SIG_IGN);
  const sigset_t signals = stop_signals();
  const bool serving = args.exec.empty();
  // Before the first thread (libvirt's event loop) starts.
  if (serving) pthread_sigmask(SIG_BLOCK, &signals, nullptr);
  Scratch scratch;
  auto config = load(args, scratch);
  if (!config.ok()) return fail(config.error());
  if (auto listen = apply_listen(args, *config); !listen.ok()) return fail(listen.error());
  auto parts = daemon::assemble_parts(*config);
  if (!parts.ok()) return fail(parts.error());
  if (!args.pause_at.empty()) parts->hook = daemon::pause_at_step(args.pause_at, args.pause_marker);
  auto service = daemon::VmService::start(std::move(parts).value());
  if (!service.ok()) return fail(service.error());
  return serving ? serve(*config, **service, signals, err) : run_exec(**service, args.exec, out, err);
}

}  // namespace hostagent::cli
