// hostagentctl's API commands: wiring to CLI11, one request (or a create and its wait) each.
#include "api_commands.hpp"

#include <map>
#include <optional>
#include <thread>

#include <termios.h>
#include <unistd.h>

#include <boost/json.hpp>
#include <random>

#include "api_views.hpp"
#include "completion.hpp"
#include "hostagent/api/host_json.hpp"
#include "hostagent/common/text.hpp"
#include "hostagent/common/text_file.hpp"
#include "table.hpp"

namespace hostagent::ctl {
namespace {

namespace json = boost::json;
using Context = ApiCommands::Context;

int fail(Context& context, const Error& error) {
  return print_failure(context.err, error);
}

void print_json(Context& context, const json::value& value) {
  context.out << api::to_pretty_json(value);
}

// Percent-encodes a path segment or query value (names are [A-Za-z0-9_.-], but the server judges).
std::string encode(const std::string& text) {
  static const char* const hex = "0123456789ABCDEF";
  std::string out;
  for (const unsigned char c : text) {
    if (std::isalnum(c) != 0 || c == '-' || c == '_' || c == '.' || c == '~' || c == ':') {
      out += static_cast<char>(c);
    } else {
      out += {'%', hex[c >> 4], hex[c & 15]};
    }
  }
  return out;
}

// Every document the API answers is an object, and a list's holds its array under `list`: what
// answers otherwise (not hostagentd, or a broken one) is an error naming what was missing, never
// an abort (issue 43, defect 8). The renderers read what they show leniently ("-" for a field
// missing), so nothing beyond the shape can throw.
Status check_answer(const json::value& value, const std::string& target, const char* list = nullptr) {
  if (!value.is_object()) {
    return Error{ErrorCode::parse_error, "GET " + target + ": the answer is not a JSON object; is this hostagentd?"};
  }
  const auto* items = list == nullptr ? nullptr : value.get_object().if_contains(list);
  if (list != nullptr && (items == nullptr || !items->is_array())) {
    return Error{ErrorCode::parse_error, "GET " + target + ": the answer has no \"" + list + "\" array"};
  }
  return ok_status();
}

// GET target; --json prints it, else render() does.
int show(Context& context, const std::string& target, std::string (*render)(const json::value&),
         const char* list = nullptr) {
  auto value = context.client.get_json(target);
  if (!value.ok()) return fail(context, value.error());
  if (auto shaped = check_answer(*value, target, list); !shaped.ok()) return fail(context, shaped.error());
  if (context.globals.json) {
    print_json(context, *value);
  } else {
    context.out << render(*value);
  }
  return 0;
}

// GET target and print the body as it came (XML, Prometheus text).
int show_text(Context& context, const std::string& target) {
  auto response = context.client.call("GET", target);
  if (!response.ok()) return fail(context, response.error());
  context.out << response->body;
  if (!response->body.empty() && response->body.back() != '\n') context.out << "\n";
  return 0;
}

std::string vm_target(const std::string& name) {
  return "/v1/vms/" + encode(name);
}

// The VM, and its last start's timeline from its start history.
int vm_show(Context& context, const std::string& name) {
  auto vm = context.client.get_json(vm_target(name));
  if (!vm.ok()) return fail(context, vm.error());
  if (auto shaped = check_answer(*vm, vm_target(name)); !shaped.ok()) return fail(context, shaped.error());
  if (context.globals.json) {
    print_json(context, *vm);
    return 0;
  }
  auto starts = context.client.get_json(vm_target(name) + "/starts");
  const bool with_start = starts.ok() && check_answer(*starts, vm_target(name) + "/starts").ok();
  context.out << (with_start ? render_vm_with_start(*vm, *starts) : render_vm(*vm));
  return 0;
}

int print_vm_row(Context& context, const std::string& name) {
  auto vm = context.client.get_json(vm_target(name));
  if (!vm.ok()) return fail(context, vm.error());
  if (auto shaped = check_answer(*vm, vm_target(name)); !shaped.ok()) return fail(context, shaped.error());
  if (context.globals.json) {
    print_json(context, *vm);
  } else {
    context.out << render_vms(json::array{*vm});
  }
  return 0;
}

// After a 202: wait for the operation (unless --no-wait), then `done` prints the outcome.
int follow(Context& context, const json::value& operation, bool no_wait, const std::function<int()>& done) {
  if (auto shaped = check_operation(operation, "the answer"); !shaped.ok()) return fail(context, shaped.error());
  if (no_wait) {
    if (context.globals.json) {
      print_json(context, operation);
    } else {
      const auto id = display(operation, "id");
      context.out << "operation " << id << ": " << progress_plain(operation)
                  << " (follow it: hostagentctl operation wait " << id << ")\n";
    }
    return 0;
  }
  std::ostringstream discard;
  const bool quiet = context.globals.json && !context.wait.terminal;  // --json to a pipe: no progress lines
  auto ended = wait_for_operation(context.client, operation, context.wait, quiet ? discard : context.err);
  if (!ended.ok()) return fail(context, ended.error());
  if (display(*ended, "state") != "succeeded") {
    context.err << "hostagentctl: " << failure_message(*ended) << "\n";
    if (context.globals.json) print_json(context, *ended);
    return 1;
  }
  return done();
}

Result<std::vector<std::string>> read_ssh_keys(const std::string& file) {
  HA_TRY(auto text, read_text_file(file));
  std::vector<std::string> keys;
  std::istringstream lines(text);
  for (std::string line; std::getline(lines, line);) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.empty() || line.front() == '#') continue;
    keys.push_back(line);
  }
  if (keys.empty()) return Error{ErrorCode::invalid_argument, "--ssh-key-file " + file + ": no keys in it"};
  return keys;
}

// A request id of our own when none is given: a create the client had to resend is then the same
// create, not a second one (docs/api.md, "Create").
std::string fresh_request_id() {
  std::random_device random;
  char text[40];
  std::snprintf(text, sizeof text, "hostagentctl-%08x%08x", random(), random());
  return text;
}

struct CreateArgs {
  const std::string& name;
  const std::string& template_name;
  const std::string& request_id;
  const std::string& boot_image;
  const std::vector<std::string>& macs;
  const std::string& ssh_key_file;
  const std::string& user_data_file;
};

Result<json::object> create_body(const CreateArgs& args) {
  json::object body{{"name", args.name},
                    {"template", args.template_name},
                    {"request_id", args.request_id.empty() ? fresh_request_id() : args.request_id}};
  if (!args.boot_image.empty()) body["boot_image"] = args.boot_image;
  if (!args.macs.empty()) body["macs"] = json::value_from(args.macs);
  if (!args.ssh_key_file.empty()) {
    HA_TRY(auto keys, read_ssh_keys(args.ssh_key_file));
    body["ssh_authorized_keys"] = json::value_from(keys);
  }
  if (!args.user_data_file.empty()) {
    HA_TRY(auto user_data, read_text_file(args.user_data_file));
    body["user_data"] = user_data;
  }
  return body;
}

int vm_create(Context& context, const CreateArgs& args, bool no_wait) {
  auto body = create_body(args);
  if (!body.ok()) return fail(context, body.error());
  auto operation = context.client.send_json("POST", "/v1/vms", *body);
  if (!operation.ok()) return fail(context, operation.error());
  return follow(context, *operation, no_wait, [&] { return print_vm_row(context, args.name); });
}

int vm_change(Context& context, const std::string& verb, const std::string& name, bool force, bool no_wait) {
  Result<json::value> operation = Error{ErrorCode::internal, ""};
  if (verb == "delete") {
    auto response = context.client.call("DELETE", vm_target(name));
    if (!response.ok()) return fail(context, response.error());
    boost::system::error_code ec;
    operation = json::parse(response->body, ec);
    if (ec) return fail(context, {ErrorCode::parse_error, "DELETE " + vm_target(name) + ": the answer is not JSON"});
  } else {
    json::object body;
    if (verb == "stop" && force) body["force"] = true;
    operation = context.client.send_json("POST", vm_target(name) + "/" + verb, body);
  }
  if (!operation.ok()) return fail(context, operation.error());
  return follow(context, *operation, no_wait, [&] {
    if (verb != "delete") return print_vm_row(context, name);
    if (!context.globals.json) context.out << "deleted " << name << "\n";
    return 0;
  });
}

int quarantine_clear(Context& context, const std::string& address) {
  const std::string target = "/v1/quarantine/" + encode(address);
  auto response = context.client.call("DELETE", target);
  if (!response.ok()) return fail(context, response.error());
  boost::system::error_code ec;
  const auto cleared = json::parse(response->body, ec);
  if (ec) return fail(context, {ErrorCode::parse_error, "DELETE " + target + ": the answer is not JSON"});
  if (context.globals.json) {
    print_json(context, cleared);
  } else {
    context.out << "cleared " << display(cleared, "address") << " (quarantined since " << display(cleared, "since")
                << ": " << display(cleared, "step") << " failed: " << display(cleared, "reason") << ")\n";
  }
  return 0;
}

// The maintenance as the API answers it: an object with a string mode and its vms array.
Status check_maintenance(const json::value& maintenance, const std::string& where) {
  HA_TRY_STATUS(check_answer(maintenance, where, "vms"));
  const auto* mode = maintenance.get_object().if_contains("mode");
  if (mode == nullptr || !mode->is_string()) {
    return Error{ErrorCode::parse_error, where + ": the answer has no \"mode\" string"};
  }
  return ok_status();
}

int maintenance_change(Context& context, const std::string& target, const json::object& body) {
  auto changed = context.client.send_json("POST", target, body);
  if (!changed.ok()) return fail(context, changed.error());
  if (auto shaped = check_maintenance(*changed, "POST " + target); !shaped.ok()) return fail(context, shaped.error());
  if (context.globals.json) {
    print_json(context, *changed);
  } else {
    context.out << render_maintenance(*changed);
  }
  return 0;
}

// Each VM's drain state as it changes, one line each on stderr; true while some stop is under way.
bool report_drain(Context& context, const json::value& maintenance, std::map<std::string, std::string>& shown) {
  bool stopping = false;
  for (const auto& vm : maintenance.get_object().at("vms").get_array()) {
    const std::string name = display(vm, "vm");
    const std::string state = display(vm, "state");
    stopping = stopping || state == "stopping";
    if (shown[name] == state) continue;
    shown[name] = state;
    context.err << "drain " << name << ": " << state
                << (state == "failed" ? ": " + display(vm, "error") : std::string()) << "\n";
  }
  return stopping;
}

// Begun, then followed (GET /v1/host/maintenance) until the host is drained: 0; 1 when a stop
// failed and none is under way any more (the VMs that failed were named), or the maintenance
// changed under the drain (an uncordon).
int host_drain(Context& context, const std::string& reason, int grace_seconds, bool no_wait) {
  json::object body{{"reason", reason}};
  if (grace_seconds > 0) body["grace_seconds"] = grace_seconds;
  auto view = context.client.send_json("POST", "/v1/host/drain", body);
  if (!view.ok()) return fail(context, view.error());
  std::map<std::string, std::string> shown;
  for (;;) {
    if (auto shaped = check_maintenance(*view, "/v1/host/maintenance"); !shaped.ok()) {
      return fail(context, shaped.error());
    }
    const bool stopping = report_drain(context, *view, shown);
    const std::string mode = display(*view, "mode");
    if (no_wait || mode != "draining" || !stopping) {
      if (context.globals.json) {
        print_json(context, *view);
      } else {
        context.out << render_maintenance(*view);
      }
      if (no_wait || mode == "drained") return 0;
      if (mode != "draining") return fail(context, {ErrorCode::conflict, "the drain ended: the host is " + mode});
      return fail(context, {ErrorCode::io_error,
                            "the host is still draining and no stop is under way (a failed one is named above): "
                            "drain again, or stop the VM yourself"});
    }
    std::this_thread::sleep_for(context.wait.poll_interval);
    view = context.client.get_json("/v1/host/maintenance");
    if (!view.ok()) return fail(context, view.error());
  }
}

// Each VM hostagent made, by name, with its figures (GET /v1/vms, then GET .../stats of each; the
// daemon reads libvirt once for all of them). A VM gone between the two is left out.
Result<std::map<std::string, json::value>> vm_stats_by_name(Context& context) {
  HA_TRY(const auto listed, context.client.get_json("/v1/vms"));
  HA_TRY_STATUS(check_answer(listed, "/v1/vms", "vms"));
  std::map<std::string, json::value> out;
  for (const auto& vm : listed.get_object().at("vms").get_array()) {
    const auto* managed = vm.is_object() ? vm.get_object().if_contains("managed") : nullptr;
    if (managed == nullptr || !managed->is_bool() || !managed->get_bool()) continue;
    const std::string name = display(vm, "name");
    auto stats = context.client.get_json(vm_target(name) + "/stats");
    if (!stats.ok() && stats.error().code == ErrorCode::not_found) continue;
    HA_TRY(auto value, std::move(stats));
    out[name] = std::move(value);
  }
  return out;
}

// Two reads `interval` apart (at least the daemon's 5 s cache, so the second is a new one): CPU use
// between them, and the totals of the second.
// The terminal in raw mode while a console is attached (cfmakeraw: every key goes to the guest, ^C
// too), put back as it was however the attachment ends.
class RawTerminal {
 public:
  explicit RawTerminal(int fd) : fd_(fd) {
    if (::tcgetattr(fd_, &saved_) != 0) return;
    termios raw = saved_;
    ::cfmakeraw(&raw);
    active_ = ::tcsetattr(fd_, TCSANOW, &raw) == 0;
  }
  ~RawTerminal() {
    if (active_) ::tcsetattr(fd_, TCSANOW, &saved_);
  }
  RawTerminal(const RawTerminal&) = delete;
  RawTerminal& operator=(const RawTerminal&) = delete;

 private:
  int fd_;
  termios saved_{};
  bool active_ = false;
};

// This terminal joined to the VM's serial console until Ctrl-], the end of input, or the server
// closing it (the guest stopped, another operator took it over: said on stderr).
int vm_console(Context& context, const std::string& name, bool take_over) {
  context.out.flush();  // the console writes to the descriptor itself
  context.err << "Connected to the console of " << text::shown(name) << "; Ctrl-] leaves.\n";
  context.err.flush();
  std::optional<RawTerminal> raw;
  if (::isatty(STDIN_FILENO) == 1) raw.emplace(STDIN_FILENO);
  const auto reason = context.client.attach(vm_target(name) + "/console" + (take_over ? "?take_over=true" : ""),
                                            api::ConsoleIo{STDIN_FILENO, STDOUT_FILENO, 0x1d});
  raw.reset();
  if (!reason.ok()) return fail(context, reason.error());
  if (!reason->empty()) context.err << "\nhostagentctl: the console closed: " << text::shown(*reason) << "\n";
  return 0;
}

int vm_top(Context& context, int interval_seconds) {
  auto before = vm_stats_by_name(context);
  if (!before.ok()) return fail(context, before.error());
  std::this_thread::sleep_for(std::chrono::seconds(interval_seconds));
  auto after = vm_stats_by_name(context);
  if (!after.ok()) return fail(context, after.error());
  if (context.globals.json) {
    json::object all;
    for (auto& [name, value] : *after) all[name] = std::move(value);
    print_json(context, all);
  } else {
    context.out << render_vm_top(*before, *after);
  }
  return 0;
}

// Answered at once: the cleaning runs in the daemon, its steps come as events.
int device_clean(Context& context, const std::string& address) {
  auto begun = context.client.send_json("POST", "/v1/devices/" + encode(address) + "/clean", json::object{});
  if (!begun.ok()) return fail(context, begun.error());
  if (context.globals.json) {
    print_json(context, *begun);
  } else {
    context.out << "cleaning " << display(*begun, "address")
                << " (follow it: hostagentctl events; its outcome: hostagentctl devices history " << address << ")\n";
  }
  return 0;
}

int operation_wait(Context& context, const std::string& id) {
  auto operation = context.client.get_json("/v1/operations/" + encode(id));
  if (!operation.ok()) return fail(context, operation.error());
  return follow(context, *operation, false, [&] {
    if (context.globals.json) print_json(context, *operation);
    return 0;
  });
}

// The server names the document "request" in its messages; the operator knows it as FILE.
std::string with_file(std::string message, const std::string& file) {
  if (message.rfind("request:", 0) == 0) message.replace(0, 7, file);
  return message;
}

int template_check(Context& context, const std::vector<std::string>& files) {
  int status = 0;
  for (const auto& file : files) {
    auto yaml = read_text_file(file);
    if (!yaml.ok()) return fail(context, yaml.error());
    auto response = context.client.request("POST", "/v1/templates/validate", *yaml, "application/yaml");
    if (!response.ok()) return fail(context, response.error());
    if (response->status == 200) {
      boost::system::error_code ec;
      const auto value = json::parse(response->body, ec);
      const auto* object = ec ? nullptr : value.if_object();
      const auto* checked = object == nullptr ? nullptr : object->if_contains("template");
      if (checked == nullptr) {
        return fail(context, {ErrorCode::parse_error, "POST /v1/templates/validate: the answer has no \"template\""});
      }
      context.out << file << ": ok (" << display(*checked, "name") << ")\n";
      continue;
    }
    const auto problem = api::parse_problem(response->body);
    if (response->status != 422 || !problem) {
      return fail(context,
                  problem ? api::problem_error(*problem)
                          : Error{ErrorCode::internal, "template check: HTTP " + std::to_string(response->status)});
    }
    status = 1;
    const auto* errors = problem->json.get_object().if_contains("errors");
    if (errors == nullptr || !errors->is_array()) {
      context.err << file << ": " << terminal_text(problem->detail) << "\n";
      continue;
    }
    for (const auto& error : errors->get_array()) context.err << with_file(display(error), file) << "\n";
  }
  return status;
}

int health(Context& context) {
  auto live = context.client.call("GET", "/v1/health/live");
  if (!live.ok()) return fail(context, live.error());
  auto ready = context.client.request("GET", "/v1/health/ready");
  if (!ready.ok()) return fail(context, ready.error());
  const auto problem = api::parse_problem(ready->body);
  const bool is_ready = ready->status == 200;
  if (context.globals.json) {
    boost::system::error_code ec;
    print_json(context, json::object{{"live", json::parse(live->body, ec)}, {"ready", json::parse(ready->body, ec)}});
  } else {
    context.out << "live:  ok\nready: "
                << (is_ready ? "yes" : "no" + (problem ? ": " + terminal_text(problem->detail) : "")) << "\n";
  }
  return is_ready ? 0 : 1;
}

int events(Context& context) {
  auto status = context.client.read_events("/v1/events", [&context](const api::ServerEvent& event) {
    context.out << (context.globals.json ? event.data : render_event(event)) << std::endl;
    return static_cast<bool>(context.out);
  });
  return status.ok() ? 0 : fail(context, status.error());
}

}  // namespace

Result<api::ClientOptions> client_options(const ApiGlobals& globals) {
  api::ClientOptions options;
  if (!globals.socket.empty()) {
    options.url = "unix:" + globals.socket;
  } else if (!globals.url.empty()) {
    options.url = globals.url;
  }
  if (!globals.token_file.empty()) {
    HA_TRY(options.token, read_token_file(globals.token_file, "--token-file"));
  }
  options.certificate_file = globals.certificate_file;
  options.key_file = globals.key_file;
  options.ca_file = globals.ca_file;
  // A bound, so that seconds * 1000 is a number of milliseconds at all (1e308 overflowed to a
  // timeout that fired at once).
  constexpr double kMaxTimeoutSeconds = 86400;
  if (!(globals.timeout_seconds > 0) || globals.timeout_seconds > kMaxTimeoutSeconds) {
    return Error{ErrorCode::invalid_argument, "--timeout must be a number of seconds above 0 and at most 86400"};
  }
  const auto timeout = std::chrono::milliseconds(static_cast<std::int64_t>(globals.timeout_seconds * 1000));
  options.connect_timeout = std::min(timeout, std::chrono::milliseconds(10000));
  options.read_timeout = timeout;
  return options;
}

ApiCommands::ApiCommands(CLI::App& app, CLI::App& templates) : app_(app) {
  add_globals();
  add_host_commands();
  add_template_commands(templates);
  add_vm_commands();
  add_operation_commands();
  add_service_commands();
}

CLI::App* ApiCommands::add(CLI::App& parent, const std::string& name, const std::string& help, Action action) {
  auto* command = parent.add_subcommand(name, help);
  commands_.emplace_back(command, std::move(action));
  return command;
}

void ApiCommands::add_globals() {
  const std::string group = "API connection (any command that talks to hostagentd)";
  auto* socket =
      app_.add_option("--socket", globals_.socket, "hostagentd's unix socket (default /run/hostagent/hostagent.sock)")
          ->group(group);
  auto* url = app_.add_option("--url", globals_.url,
                              "unix:PATH, https://HOST:PORT or http://HOST:PORT (bearer token, loopback only)")
                  ->envname("HOSTAGENT_URL")
                  ->group(group);
  socket->excludes(url);
  app_.add_option("--token-file", globals_.token_file, "File holding the bearer token")->group(group);
  app_.add_option("--cert", globals_.certificate_file, "Client certificate (PEM), for https://")->group(group);
  app_.add_option("--key", globals_.key_file, "The client certificate's key (PEM)")->group(group);
  app_.add_option("--ca", globals_.ca_file, "CA certificate that signed the server's (default: the system's)")
      ->group(group);
  app_.add_option("--timeout", globals_.timeout_seconds, "Seconds to wait for each answer")
      ->capture_default_str()
      ->group(group);
  app_.add_flag("--json", globals_.json, "Print the server's JSON instead of tables")->group(group);
}

void ApiCommands::add_host_commands() {
  auto* host = app_.add_subcommand("host", "The host as hostagentd sees it");
  host->require_subcommand(1);
  add(*host, "show", "NUMA nodes, CPUs and devices by role",
      [](Context& c) { return show(c, "/v1/host", render_host); });
  add(*host, "capacity", "Free CPUs, GPUs, VFs, NVMe and hugepages per NUMA node",
      [](Context& c) { return show(c, "/v1/host/capacity", render_capacity); });
  add(*host, "maintenance", "Whether the host takes VMs: in service, cordoned, draining or drained, by whom and why",
      [](Context& c) { return show(c, "/v1/host/maintenance", render_maintenance, "vms"); });
  add(*host, "cordon", "Take no new VMs (creates refused; its VMs run on); Placement marks it disabled (audited)",
      [this](Context& c) {
        return maintenance_change(c, "/v1/host/cordon", json::object{{"reason", args_.reason}});
      })
      ->add_option("--reason", args_.reason, "Why, for whoever finds the host cordoned (a ticket, a change)")
      ->required();
  auto* drain = add(*host, "drain",
                    "Cordon, and stop every VM: its guest agent or ACPI, powered off at the deadline; waits until "
                    "drained (audited)",
                    [this](Context& c) { return host_drain(c, args_.reason, args_.grace_seconds, args_.no_wait); });
  drain->add_option("--reason", args_.reason, "Why, for whoever finds the host drained (a ticket, a change)")
      ->required();
  drain->add_option("--grace", args_.grace_seconds, "Seconds each guest has to shut down before it is powered off")
      ->check(CLI::Range(1, 86400));
  drain->add_flag("--no-wait", args_.no_wait, "Answer once the drain is begun; follow it with host maintenance");
  add(*host, "uncordon", "Take VMs again (no VM is started) and clear the Placement mark (audited)",
      [](Context& c) { return maintenance_change(c, "/v1/host/uncordon", json::object{}); });
  auto* devices = add(app_, "devices", "PCI endpoints and the VM holding each", [this](Context& c) {
    std::string query;
    if (!args_.role.empty()) query += "role=" + encode(args_.role);
    if (args_.free_only) query += std::string(query.empty() ? "" : "&") + "free=true";
    return show(c, "/v1/devices" + (query.empty() ? "" : "?" + query), render_devices);
  });
  devices->add_option("--role", args_.role, "Only this role: gpu, nic, nvme, nvswitch, other");
  devices->add_flag("--free", args_.free_only, "Only devices placement may give: no VM holds them, not cleaning");
  add(*devices, "clean", "Clean a device again: reset, firmware, erase, scrub; free only if it passes (audited)",
      [this](Context& c) { return device_clean(c, args_.address); })
      ->add_option("address", args_.address, "PCI address, as the kernel writes it (0000:18:00.0)")
      ->required();
  add(*devices, "history", "Every cleaning of a device, step by step, from the evidence log",
      [this](Context& c) { return show(c, "/v1/devices/" + encode(args_.address) + "/history", render_history); })
      ->add_option("address", args_.address, "PCI address, as the kernel writes it (0000:18:00.0)")
      ->required();
  auto* cleaning = app_.add_subcommand("cleaning", "Tenants' devices out of placement until their cleaning passes");
  cleaning->require_subcommand(1);
  add(*cleaning, "list", "Devices marked for cleaning: since when, whose, the VM still holding it, the step running",
      [](Context& c) { return show(c, "/v1/cleaning", render_cleaning); });
  auto* quarantine =
      app_.add_subcommand("quarantine", "Devices kept out of placement after a failure, until an operator clears them");
  quarantine->require_subcommand(1);
  add(*quarantine, "list", "Quarantined devices: when, what failed, for which VM, and why",
      [](Context& c) { return show(c, "/v1/quarantine", render_quarantine); });
  add(*quarantine, "clear", "Put a repaired device back into placement (audited)",
      [this](Context& c) { return quarantine_clear(c, args_.address); })
      ->add_option("address", args_.address, "PCI address, as the kernel writes it (0000:18:00.0)")
      ->required();
}

void ApiCommands::add_template_commands(CLI::App& templates) {
  add(templates, "list", "The templates hostagentd creates VMs from",
      [](Context& c) { return show(c, "/v1/templates", render_templates); });
  add(templates, "show", "One template, as hostagentd loaded it",
      [this](Context& c) { return show(c, "/v1/templates/" + encode(args_.name), render_template); })
      ->add_option("name", args_.name, "Template name")
      ->required();
  add(templates, "check", "Check template files against hostagentd (its templates resolve extends:)",
      [this](Context& c) { return template_check(c, args_.files); })
      ->add_option("files", args_.files, "Template files")
      ->required();
}

void ApiCommands::add_vm_commands() {
  auto* vm = app_.add_subcommand("vm", "Create, inspect, start, stop and delete VMs");
  vm->require_subcommand(1);
  add(*vm, "list", "Every VM, managed and foreign", [](Context& c) {
    return show(
        c, "/v1/vms", [](const json::value& v) { return render_vms(v.get_object().at("vms")); }, "vms");
  });
  add(*vm, "show", "One VM: state, operation, what it holds, where its last start's time went",
      [this](Context& c) { return vm_show(c, args_.name); })
      ->add_option("name", args_.name, "VM name")
      ->required();
  auto* create = add(*vm, "create", "Create a VM from a template; waits until it runs", [this](Context& c) {
    const CreateArgs create_args{args_.name, args_.template_name, args_.request_id,    args_.boot_image,
                                 args_.macs, args_.ssh_key_file,  args_.user_data_file};
    return vm_create(c, create_args, args_.no_wait);
  });
  create->add_option("--template", args_.template_name, "Template name (hostagentctl template list)")->required();
  create->add_option("--name", args_.name, "VM name: [A-Za-z0-9_.-], at most 64")->required();
  create->add_option("--request-id", args_.request_id, "Idempotency key: the same create again is the same operation");
  create->add_option("--boot-image", args_.boot_image,
                     "Boot image, overriding the template's: a file in the daemon's images.directories");
  create->add_option("--mac", args_.macs, "MAC address of a VF, one per VF in placement order (repeat)");
  auto* keys = create->add_option("--ssh-key-file", args_.ssh_key_file, "authorized_keys file for the guest");
  auto* user_data = create->add_option("--user-data-file", args_.user_data_file, "cloud-config for the guest");
  keys->excludes(user_data);
  create->add_flag("--no-wait", args_.no_wait, "Print the operation and return at once");
  for (const auto& [verb, help] :
       std::vector<std::pair<std::string, std::string>>{{"start", "Start a VM"},
                                                        {"stop", "Stop a VM (ACPI, then forced)"},
                                                        {"reboot", "Reboot a VM"},
                                                        {"delete", "Delete a VM and release what it holds"}}) {
    add_vm_change(*vm, verb, help);
  }
  add(*vm, "xml", "libvirt's domain XML of a VM",
      [this](Context& c) { return show_text(c, vm_target(args_.name) + "/domain-xml"); })
      ->add_option("name", args_.name, "VM name")
      ->required();
  add(*vm, "nccl-topology", "The NCCL topology file rendered for a VM",
      [this](Context& c) { return show_text(c, vm_target(args_.name) + "/nccl-topology"); })
      ->add_option("name", args_.name, "VM name")
      ->required();
  auto* log = add(*vm, "console-log", "The end of a VM's serial console log", [this](Context& c) {
    return show_text(c, vm_target(args_.name) + "/console/log?tail=" + std::to_string(args_.tail));
  });
  log->add_option("name", args_.name, "VM name")->required();
  log->add_option("--tail", args_.tail, "How many lines, from the end (the daemon checks the range)");
  auto* console = add(*vm, "console", "Attach this terminal to a VM's serial console (Ctrl-] leaves; audited)",
                      [this](Context& c) { return vm_console(c, args_.name, args_.take_over); });
  console->add_option("name", args_.name, "VM name")->required();
  console->add_flag("--take-over", args_.take_over, "End the session another operator holds, and take the console");
  auto* top = add(*vm, "top", "Each VM's CPU use over an interval, memory, disk and network totals",
                  [this](Context& c) { return vm_top(c, args_.interval_seconds); });
  top->add_option("--interval", args_.interval_seconds, "Seconds between the two reads (the daemon reads every 5 s)")
      ->check(CLI::Range(5, 3600))
      ->capture_default_str();
}

void ApiCommands::add_vm_change(CLI::App& vm, const std::string& verb, const std::string& help) {
  auto* command = add(vm, verb, help,
                      [this, verb](Context& c) { return vm_change(c, verb, args_.name, args_.force, args_.no_wait); });
  command->add_option("name", args_.name, "VM name")->required();
  command->add_flag("--no-wait", args_.no_wait, "Print the operation and return at once");
  if (verb == "stop") command->add_flag("--force", args_.force, "Power off at once, without asking the guest");
}

void ApiCommands::add_operation_commands() {
  auto* operation = app_.add_subcommand("operation", "Operations in flight and recently ended");
  operation->require_subcommand(1);
  add(*operation, "list", "Operations, newest first", [](Context& c) {
    return show(
        c, "/v1/operations", [](const json::value& v) { return render_operations(v.get_object().at("operations")); },
        "operations");
  });
  add(*operation, "show", "One operation",
      [this](Context& c) { return show(c, "/v1/operations/" + encode(args_.id), render_operation); })
      ->add_option("id", args_.id, "Operation id (op-N)")
      ->required();
  add(*operation, "wait", "Wait for an operation to end; exit 1 when it failed",
      [this](Context& c) { return operation_wait(c, args_.id); })
      ->add_option("id", args_.id, "Operation id (op-N)")
      ->required();
}

void ApiCommands::add_service_commands() {
  add(app_, "events", "Follow hostagentd's events (vm, operation, device, quarantine, cleaning) until interrupted",
      events);
  add(app_, "status", "hostagentd's status: libvirt, VM counts, the last reconcile",
      [](Context& c) { return show(c, "/v1/status", render_status); });
  add(app_, "health", "Liveness and readiness; exit 1 when not ready", health);
  add(app_, "metrics", "The Prometheus metrics", [](Context& c) { return show_text(c, "/v1/metrics"); });
  completion_ = app_.add_subcommand("completion", "Print a shell completion script (bash or zsh)");
  completion_->add_option("shell", args_.shell, "bash or zsh")->required()->check(CLI::IsMember({"bash", "zsh"}));
}

std::optional<int> ApiCommands::run(std::ostream& out, std::ostream& err) {
  if (completion_->parsed()) {
    out << (args_.shell == "zsh" ? zsh_completion(app_, "hostagentctl") : bash_completion(app_, "hostagentctl"));
    return 0;
  }
  const Action* action = nullptr;
  for (const auto& [command, candidate] : commands_) {
    if (command->parsed()) action = &candidate;
  }
  if (action == nullptr) return std::nullopt;
  auto options = client_options(globals_);
  if (!options.ok()) {
    err << "hostagentctl: " << to_string(options.error().code) << ": " << options.error().message << "\n";
    return 1;
  }
  auto client = api::ApiClient::make(*options);
  if (!client.ok()) {
    err << "hostagentctl: " << to_string(client.error().code) << ": " << client.error().message << "\n";
    return 1;
  }
  Context context{**client, globals_, out, err, WaitSettings{}};
  context.wait.terminal = ::isatty(STDERR_FILENO) == 1;
  return (*action)(context);
}

}  // namespace hostagent::ctl
