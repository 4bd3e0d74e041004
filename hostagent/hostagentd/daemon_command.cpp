// hostagent/cli/daemon_command: hostagentd's run: configuration, service, then serve or --exec.
#include "daemon_command.hpp"

#include <sys/resource.h>
#include <unistd.h>

#include <array>
#include <atomic>
#include <cerrno>
#include <csignal>
#include <cstdlib>
#include <cstring>

#include "api_listener.hpp"
#include "assembly.hpp"
#include "exec_commands.hpp"
#include "host_confinement.hpp"
#include "hostagent/api/host_json.hpp"
#include "hostagent/common/names.hpp"
#include "hostagent/config/daemon_config.hpp"
#include "hostagent/daemon/clock.hpp"
#include "hostagent/daemon/placement_sync.hpp"
#include "hostagent/program_support/install_paths.hpp"
#include "hostagent/service/vm_service.hpp"
#include "hostagent/state/state_lock.hpp"
#include "hostagent/systemd/log.hpp"
#include "hostagent/systemd/notifier.hpp"
#include "hostagent/systemd/socket_activation.hpp"
#include "hostagent/systemd/watchdog.hpp"

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
  embedded.template_directories = {program_support::shipped_template_dir()};
  // Made here, so a boot image can be put there before the first create.
  for (const auto& images : embedded.image_directories) {
    std::error_code ec;
    fs::create_directories(images, ec);
    if (ec) return Error{ErrorCode::io_error, "create directory " + images.string() + ": " + ec.message()};
  }
  return embedded;
}

// --listen replaces the configuration's addresses; checked like them.
Status apply_listen(const DaemonArgs& args, config::DaemonConfig& config) {
  if (args.listen.empty()) return ok_status();
  for (const auto& text : args.listen) {
    auto address = parse_listen_address(text);
    if (!address.ok()) return Error{ErrorCode::invalid_argument, "--listen: " + address.error().message};
    const bool authenticated =
        !config.api.tls.certificate.empty() || !config.api.token_file.empty() || !config.api.reader_token_file.empty();
    if (address->kind == ListenAddress::Kind::tcp && !authenticated) {
      return Error{ErrorCode::invalid_argument, "--listen " + text +
                                                    ": a tcp:// address needs api.tls or a token file in the "
                                                    "configuration; use a unix: address"};
    }
  }
  config.api.listen = args.listen;
  return ok_status();
}

int run_exec(service::VmService& service, const std::vector<std::string>& commands, std::ostream& out,
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

// Blocked in every thread (they inherit the mask), so the main thread alone takes them in sigwait:
// SIGTERM and SIGINT stop, SIGHUP reopens the audit log (logrotate's postrotate sends it).
sigset_t served_signals() {
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGHUP);
  return signals;
}

// Until a stop signal; each SIGHUP in between reopens the audit log. Returns the stop signal.
int wait_for_stop(const sigset_t& signals, ApiListener& api) {
  for (;;) {
    int signal = 0;
    sigwait(&signals, &signal);
    if (signal != SIGHUP) return signal;
    const auto reopened = api.reopen_audit_log();
    if (reopened.ok()) {
      systemd::log(systemd::LogLevel::info, "SIGHUP: audit log reopened");
    } else {
      systemd::log(systemd::LogLevel::error, "SIGHUP: " + reopened.error().message + "; still writing the old file");
    }
  }
}

// sd_notify, with a failure logged once: systemd acts on what it does not receive (a start that
// never reports ready times out), so the daemon goes on either way.
class WarningNotifier final : public systemd::Notifier {
 public:
  explicit WarningNotifier(std::unique_ptr<systemd::Notifier> inner) : inner_(std::move(inner)) {}
  Status notify(const std::string& assignments) override {
    auto sent = inner_->notify(assignments);
    if (!sent.ok() && !warned_.exchange(true)) {
      systemd::log(systemd::LogLevel::warning, "systemd notification failed: " + sent.error().message);
    }
    return sent;
  }

 private:
  std::unique_ptr<systemd::Notifier> inner_;
  std::atomic<bool> warned_{false};
};

// A start that fails: said to systemd (`systemctl status` shows it) and on stderr; exit status 1.
int fail_start(systemd::Notifier& notifier, std::ostream& err, const Error& error, const std::string& where = "") {
  (void)notifier.status("failed: " + where + error.message);
  err << "hostagentd: " << to_string(error.code) << ": " << where << error.message << "\n";
  return 1;
}

// The unix: paths of api.listen, for matching the sockets systemd passed.
std::vector<fs::path> unix_listen_paths(const config::DaemonConfig& config) {
  std::vector<fs::path> paths;
  for (const auto& text : config.api.listen) {
    auto address = parse_listen_address(text);
    if (address.ok() && address->kind == ListenAddress::Kind::unix_socket) paths.push_back(address->socket_path);
  }
  return paths;
}

// WATCHDOG=1 every half WatchdogSec while the service answers: status() takes the locks an
// operation, libvirt's event thread and reconcile take, so a wedged service never returns from it.
Result<std::unique_ptr<systemd::Watchdog>> start_watchdog(systemd::Notifier& notifier, service::VmService& service) {
  HA_TRY(const auto interval, systemd::watchdog_interval());
  if (!interval) return std::unique_ptr<systemd::Watchdog>();
  return systemd::Watchdog::start(notifier, *interval, [&service] {
    (void)service.status();
    return true;
  });
}

std::string recovered(const service::ServiceStatus& status) {
  const auto& report = status.last_reconcile;
  return std::to_string(status.managed_vms) + " VMs, " + std::to_string(status.foreign_domains) + " foreign domains, " +
         std::to_string(report.finished.size() + report.rolled_back.size()) + " interrupted operations recovered";
}

// Every API connection is a descriptor, and so is every domain's console log and libvirt's own; the
// soft limit systemd and shells start a process with (1024) would refuse accept() long before
// api.limits.max_connections. The hard limit (systemd: 524288) is what the operator allows; nothing
// here uses select(), whose fd_set is why the soft default is low (systemd.exec(5), LimitNOFILE=).
void raise_open_file_limit(std::ostream& err) {
  rlimit limit{};
  if (::getrlimit(RLIMIT_NOFILE, &limit) != 0 || limit.rlim_cur >= limit.rlim_max) return;
  const rlim_t soft = limit.rlim_cur;
  limit.rlim_cur = limit.rlim_max;
  if (::setrlimit(RLIMIT_NOFILE, &limit) != 0) {
    err << "hostagentd: warning: cannot raise the open file limit from " << soft << ": " << std::strerror(errno)
        << "\n";
  }
}

// placement.host_name left out: the machine's host name, which must then be a name by the
// project's rule, since every provider of the host is named after it.
Status settle_placement_host(config::DaemonConfig& config) {
  if (config.placement.url.empty() || !config.placement.host_name.empty()) return ok_status();
  std::array<char, 256> name{};
  if (gethostname(name.data(), name.size() - 1) != 0) return errno_error(errno, "gethostname", "");
  if (!is_name(name.data())) {
    return field_error("placement.host_name",
                       "the machine's host name " + std::string(name.data()) +
                           " is not a name Placement's providers can carry; set placement.host_name");
  }
  config.placement.host_name = name.data();
  return ok_status();
}

// READY=1 once state is reconciled (start_service returned) and the API listens, not before:
// systemd orders the units that need hostagent after that moment.
int serve(const config::DaemonConfig& config, service::VmService& service, systemd::InheritedSockets inherited,
          systemd::Notifier& notifier, const sigset_t& signals, std::ostream& err) {
  auto watchdog = start_watchdog(notifier, service);
  if (!watchdog.ok()) return fail_start(notifier, err, watchdog.error());
  std::unique_ptr<daemon::PlacementSync> placement;  // stops before the service does
  if (!config.placement.url.empty()) {
    auto client = cli::placement_client(config.placement);
    if (!client.ok()) return fail_start(notifier, err, client.error(), "placement: ");
    placement =
        daemon::PlacementSync::start(service, std::move(client).value(), config.placement, daemon::make_system_clock());
  }
  auto api = ApiListener::start(config, service, std::move(inherited));
  if (!api.ok()) return fail_start(notifier, err, api.error(), "api: ");
  std::string where;
  for (const auto& endpoint : (*api)->endpoints()) where += (where.empty() ? "" : ", ") + endpoint;
  const auto status = service.status();
  const std::string summary = std::to_string(status.managed_vms) + " VMs, " + std::to_string(status.foreign_domains) +
                              " foreign domains; API listening on " + where;
  (void)notifier.ready(summary);
  err << "hostagentd: ready: " << summary << std::endl;
  const int signal = wait_for_stop(signals, **api);
  const std::string stopping = "stopping on signal " + std::to_string(signal) + " (" + strsignal(signal) + ")";
  (void)notifier.stopping(stopping);
  err << "hostagentd: " << stopping << "\n";
  return 0;
}

}  // namespace

std::string exec_help() {
  return "Run these commands, in order, then exit: create NAME TEMPLATE [boot_image=PATH] [request_id=ID] "
         "[ssh_key_file=PATH | user_data_file=PATH] | "
         "show NAME | list | status | start NAME | stop NAME [force] | reboot NAME | delete NAME";
}

int run_hostagentd(const DaemonArgs& args, std::ostream& out, std::ostream& err) {
  WarningNotifier notifier(systemd::make_sd_notifier());
  const auto fail = [&err, &notifier](const Error& error) { return fail_start(notifier, err, error); };
  // A peer that goes away (libvirtd restarting, an API client hanging up) must make our write fail
  // with EPIPE, not kill the daemon.
  std::signal(SIGPIPE, SIG_IGN);
  const sigset_t signals = served_signals();
  const bool serving = args.exec.empty();
  // Before the first thread (libvirt's event loop) starts.
  if (serving) {
    pthread_sigmask(SIG_BLOCK, &signals, nullptr);
    raise_open_file_limit(err);
  }
  Scratch scratch;
  auto config = load(args, scratch);
  if (!config.ok()) return fail(config.error());
  if (auto listen = apply_listen(args, *config); !listen.ok()) return fail(listen.error());
  if (auto host = settle_placement_host(*config); !host.ok()) return fail(host.error());
  // Checked before the slow part of start-up, so a unit/configuration mismatch fails at once.
  systemd::InheritedSockets inherited;
  if (serving) {
    auto passed = systemd::inherited_sockets(unix_listen_paths(*config));
    if (!passed.ok()) return fail(passed.error());
    inherited = std::move(passed).value();
  }
  (void)notifier.status("configuration read: " + config->source);
  // Before anything reads or writes the state directory (a simulated host's tree is written there
  // by the assembly): --exec reconciles as the server does, so it takes the lock as well.
  auto lock = state::StateLock::take(config->state_directory,
                                     serving ? "hostagentd serving" : "hostagentd --exec " + args.exec.front());
  if (!lock.ok()) return fail(lock.error());
  confine_host_processes(*config, notifier);
  auto parts = assemble_parts(*config, [&notifier](const std::string& stage) { (void)notifier.status(stage); });
  if (!parts.ok()) return fail(parts.error());
  if (!args.pause_at.empty()) parts->hook = daemon::pause_at_step(args.pause_at, args.pause_marker);
  auto service = daemon::start_service(std::move(parts).value());
  if (!service.ok()) return fail(service.error());
  (void)notifier.status("state reconciled: " + recovered((*service)->status()));
  if (!serving) return run_exec(**service, args.exec, out, err);
  return serve(*config, **service, std::move(inherited), notifier, signals, err);
}

}  // namespace hostagent::cli
