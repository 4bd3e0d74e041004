// api/rest_commands: routing and strict request parsing, from an HttpRequest to a Command. Pure and
// total (fuzzed): Boost.JSON is driven through its error_code overloads, so nothing here throws on
// input.
#include "hostagent/api/rest_commands.hpp"
#include "hostagent/common/text.hpp"

#include <algorithm>
#include <array>
#include <boost/json/value.hpp>
#include <cctype>
#include <charconv>
#include <optional>
#include <string_view>

#include "body_fields.hpp"
#include "hostagent/common/hardware_ids.hpp"
#include "hostagent/common/json_text.hpp"
#include "hostagent/common/names.hpp"

namespace hostagent::api {
namespace {

using Params = std::vector<std::string>;  // the path's {} segments, in order
using Builder = ParsedRequest (*)(const HttpRequest&, const Params&);

RouteError bad(std::string field, std::string detail) {
  return RouteError{400, "invalid_argument", std::move(detail), std::move(field), ""};
}

// Text as its checked type (a VM or template name, a MAC), built here once: what the service is
// given cannot have skipped the rule. Else the refusal, naming the field.
template <class T>
std::variant<T, RouteError> checked(std::string_view text, const std::string& field) {
  auto value = T::parse(text, field);
  if (!value.ok()) return bad(value.error().field, value.error().message);
  return std::move(value).value();
}

// "application/json; charset=utf-8" -> "application/json"
std::string media_type(const HttpRequest& request) {
  const auto it = request.headers.find("content-type");
  if (it == request.headers.end()) return "";
  std::string type = it->second.substr(0, it->second.find(';'));
  type.erase(std::remove_if(type.begin(), type.end(), [](char c) { return c == ' ' || c == '\t'; }), type.end());
  std::transform(type.begin(), type.end(), type.begin(),
                 [](char c) { return c >= 'A' && c <= 'Z' ? static_cast<char>(c - 'A' + 'a') : c; });
  return type;
}

std::optional<RouteError> require_media_type(const HttpRequest& request,
                                             const std::vector<std::string_view>& accepted) {
  const std::string type = media_type(request);
  if (std::find(accepted.begin(), accepted.end(), type) != accepted.end()) return std::nullopt;
  std::string list;
  for (const auto& a : accepted) list += (list.empty() ? "" : " or ") + std::string(a);
  return RouteError{
      415, "unsupported_media_type",
      "Content-Type: found " + (type.empty() ? std::string("none") : text::quoted(type)) + ", expected " + list,
      "Content-Type", ""};
}

// The body as a JSON object. An empty body is an empty object when `optional_body`: start, stop,
// reboot and delete need none.
std::variant<boost::json::object, RouteError> json_body(const HttpRequest& request, bool optional_body) {
  if (request.body.empty() && optional_body) return boost::json::object{};
  if (auto error = require_media_type(request, {"application/json"})) return std::move(*error);
  auto parsed = json_text::parse(request.body);
  if (!parsed.ok()) {
    const Error& error = parsed.error();
    if (!error.field.empty()) return bad(error.field, "body: " + error.message);  // a key sent twice
    return bad("body", "body: " + error.message + "; send a JSON object");
  }
  boost::json::value value = std::move(parsed).value();
  if (!value.is_object()) {
    return bad("body", "body: found " + detail::describe(value) + ", expected a JSON object");
  }
  return std::move(value.as_object());
}

std::optional<RouteError> no_query(const HttpRequest& request, const std::vector<std::string_view>& accepted = {}) {
  for (const auto& [key, value] : request.query) {
    if (std::find(accepted.begin(), accepted.end(), key) != accepted.end()) continue;
    std::string list;
    for (const auto& a : accepted) list += (list.empty() ? "" : ", ") + std::string(a);
    return bad(key, "query parameter " + text::quoted(key) + ": unknown; " +
                        (accepted.empty() ? std::string("this path takes none") : "the parameters are " + list));
  }
  return std::nullopt;
}

template <typename T>
ParsedRequest plain(const HttpRequest& request, const Params& /*params*/) {
  if (auto error = no_query(request)) return std::move(*error);
  return Command{T{}};
}

// GET routes that name one VM in the path.
template <typename T>
ParsedRequest named_vm(const HttpRequest& request, const Params& params) {
  if (auto error = no_query(request)) return std::move(*error);
  auto name = checked<VmName>(params.at(0), "name");
  if (auto* error = std::get_if<RouteError>(&name)) return std::move(*error);
  return Command{T{std::get<VmName>(std::move(name))}};
}

// POST/DELETE routes on one VM whose body, when there is one, is an object with `fields` only.
template <typename T>
ParsedRequest vm_change(const HttpRequest& request, const Params& params) {
  if (auto error = no_query(request)) return std::move(*error);
  auto name = checked<VmName>(params.at(0), "name");
  if (auto* error = std::get_if<RouteError>(&name)) return std::move(*error);
  auto body = json_body(request, true);
  if (auto* error = std::get_if<RouteError>(&body)) return std::move(*error);
  detail::BodyFields fields(std::get<boost::json::object>(body), {});
  if (auto error = fields.check_unknown()) return std::move(*error);
  return Command{T{std::get<VmName>(std::move(name))}};
}

ParsedRequest stop_vm(const HttpRequest& request, const Params& params) {
  if (auto error = no_query(request)) return std::move(*error);
  auto name = checked<VmName>(params.at(0), "name");
  if (auto* error = std::get_if<RouteError>(&name)) return std::move(*error);
  auto body = json_body(request, true);
  if (auto* error = std::get_if<RouteError>(&body)) return std::move(*error);
  detail::BodyFields fields(std::get<boost::json::object>(body), {"force"});
  command::StopVm stop{std::get<VmName>(std::move(name)), false};
  if (auto error = fields.check_unknown()) return std::move(*error);
  if (auto error = fields.boolean("force", stop.force)) return std::move(*error);
  return Command{std::move(stop)};
}

// {"reason": "..."}: cordon's body.
ParsedRequest cordon(const HttpRequest& request, const Params& /*params*/) {
  if (auto error = no_query(request)) return std::move(*error);
  auto body = json_body(request, false);
  if (auto* error = std::get_if<RouteError>(&body)) return std::move(*error);
  detail::BodyFields fields(std::get<boost::json::object>(body), {"reason"});
  command::Cordon cordon;
  if (auto error = fields.check_unknown()) return std::move(*error);
  if (auto error = fields.text("reason", cordon.reason, true)) return std::move(*error);
  if (auto error = detail::check_maintenance_reason(cordon.reason)) return std::move(*error);
  return Command{std::move(cordon)};
}

// {"reason": "...", "grace_seconds": N}: drain's body.
ParsedRequest drain(const HttpRequest& request, const Params& /*params*/) {
  if (auto error = no_query(request)) return std::move(*error);
  auto body = json_body(request, false);
  if (auto* error = std::get_if<RouteError>(&body)) return std::move(*error);
  detail::BodyFields fields(std::get<boost::json::object>(body), {"reason", "grace_seconds"});
  command::Drain drain;
  int64_t grace = drain.grace.count();
  if (auto error = fields.check_unknown()) return std::move(*error);
  if (auto error = fields.text("reason", drain.reason, true)) return std::move(*error);
  if (auto error = detail::check_maintenance_reason(drain.reason)) return std::move(*error);
  if (auto error = fields.integer("grace_seconds", grace, 1, service::kMaxDrainGrace.count())) {
    return std::move(*error);
  }
  drain.grace = std::chrono::seconds(grace);
  return Command{std::move(drain)};
}

// No body, or {}: what uncordon is told is only who asked.
ParsedRequest uncordon(const HttpRequest& request, const Params& /*params*/) {
  if (auto error = no_query(request)) return std::move(*error);
  auto body = json_body(request, true);
  if (auto* error = std::get_if<RouteError>(&body)) return std::move(*error);
  if (auto error = detail::BodyFields(std::get<boost::json::object>(body), {}).check_unknown()) {
    return std::move(*error);
  }
  return Command{command::Uncordon{}};
}

// A create's body as it came, before its names and MACs are built from it.
struct CreateText {
  std::string name, template_name, request_id, boot_image, user_data, uuid;
  std::vector<std::string> macs, ssh_authorized_keys;
  fleet::ProviderResources claim;
};

std::optional<RouteError> check_guest_access(const CreateText& create) {
  for (std::size_t i = 0; i < create.ssh_authorized_keys.size(); ++i) {
    const std::string field = "ssh_authorized_keys[" + std::to_string(i) + "]";
    if (auto error = detail::check_one_line(field, create.ssh_authorized_keys[i])) return error;
  }
  if (!create.ssh_authorized_keys.empty() && !create.user_data.empty()) {
    return bad("user_data",
               "user_data: give ssh_authorized_keys or user_data, not both; put the keys in your user data");
  }
  // A JSON string is text, and so is the user data it can carry (cloud-config, a script): a NUL
  // ("\u0000") in it is no character cloud-init reads, and would cut it short where C reads it.
  if (const auto nul = create.user_data.find('\0'); nul != std::string::npos) {
    return bad("user_data", "user_data: holds a NUL (\\u0000) at byte " + std::to_string(nul) +
                                "; send the user data as text (cloud-config or a script)");
  }
  return std::nullopt;
}

// The checked request, or the first refusal in the order the fields are listed.
std::variant<service::CreateVmRequest, RouteError> create_request(CreateText create) {
  auto name = checked<VmName>(create.name, "name");
  if (auto* error = std::get_if<RouteError>(&name)) return std::move(*error);
  auto template_name = checked<TemplateName>(create.template_name, "template");
  if (auto* error = std::get_if<RouteError>(&template_name)) return std::move(*error);
  if (auto error = detail::check_request_id(create.request_id)) return std::move(*error);
  if (auto error = detail::check_boot_image(create.boot_image)) return std::move(*error);
  std::vector<MacAddress> macs;
  for (std::size_t i = 0; i < create.macs.size(); ++i) {
    auto mac = checked<MacAddress>(create.macs[i], "macs[" + std::to_string(i) + "]");
    if (auto* error = std::get_if<RouteError>(&mac)) return std::move(*error);
    macs.push_back(std::get<MacAddress>(std::move(mac)));
  }
  if (auto error = check_guest_access(create)) return std::move(*error);
  std::optional<Uuid> uuid;
  if (!create.uuid.empty()) {
    auto parsed = checked<Uuid>(create.uuid, "uuid");
    if (auto* error = std::get_if<RouteError>(&parsed)) return std::move(*error);
    uuid = std::get<Uuid>(std::move(parsed));
  }
  if (!create.claim.empty() && !uuid) {
    return bad("uuid", "uuid: a create with placement needs the UUID of the consumer that claimed it");
  }
  return service::CreateVmRequest{.name = std::get<VmName>(std::move(name)),
                                  .template_name = std::get<TemplateName>(std::move(template_name)),
                                  .request_id = std::move(create.request_id),
                                  .boot_image = std::move(create.boot_image),
                                  .macs = std::move(macs),
                                  .ssh_authorized_keys = std::move(create.ssh_authorized_keys),
                                  .user_data = std::move(create.user_data),
                                  .uuid = std::move(uuid),
                                  .claim = std::move(create.claim)};
}

ParsedRequest create_vm(const HttpRequest& request, const Params& /*params*/) {
  if (auto error = no_query(request)) return std::move(*error);
  auto body = json_body(request, false);
  if (auto* error = std::get_if<RouteError>(&body)) return std::move(*error);
  detail::BodyFields fields(std::get<boost::json::object>(body),
                            {"name", "template", "request_id", "boot_image", "macs", "ssh_authorized_keys", "user_data",
                             "uuid", "placement"});
  if (auto error = fields.check_unknown()) return std::move(*error);
  CreateText create;
  for (auto error :
       {fields.text("name", create.name, true), fields.text("template", create.template_name, true),
        fields.text("request_id", create.request_id, false), fields.text("boot_image", create.boot_image, false),
        fields.texts("macs", create.macs), fields.texts("ssh_authorized_keys", create.ssh_authorized_keys),
        fields.text("user_data", create.user_data, false), fields.text("uuid", create.uuid, false),
        fields.placement_claim("placement", create.claim)}) {
    if (error) return std::move(*error);
  }
  auto checked_request = create_request(std::move(create));
  if (auto* error = std::get_if<RouteError>(&checked_request)) return std::move(*error);
  return Command{command::CreateVm{std::get<service::CreateVmRequest>(std::move(checked_request))}};
}

ParsedRequest list_devices(const HttpRequest& request, const Params& /*params*/) {
  static constexpr std::array<std::string_view, 8> kRoles = {
      "gpu", "nvswitch", "nic", "nvme", "switch-upstream", "switch-downstream", "root-port", "other"};
  if (auto error = no_query(request, {"role", "free"})) return std::move(*error);
  command::ListDevices list;
  if (const auto it = request.query.find("role"); it != request.query.end()) {
    if (std::find(kRoles.begin(), kRoles.end(), it->second) == kRoles.end()) {
      return bad("role", "query parameter role: found " + text::quoted(it->second) +
                             ", expected gpu, nvswitch, nic, nvme, switch-upstream, switch-downstream, root-port "
                             "or other");
    }
    list.role = it->second;
  }
  if (const auto it = request.query.find("free"); it != request.query.end()) {
    if (it->second != "true" && it->second != "false") {
      return bad("free", "query parameter free: found " + text::quoted(it->second) + ", expected true or false");
    }
    list.free_only = it->second == "true";
  }
  return Command{std::move(list)};
}

std::variant<PciAddress, RouteError> device_address(const std::string& text) {
  auto address = PciAddress::parse(text);
  if (!address.ok()) {
    return bad("address", "address: " + text::quoted(text) +
                              " is not a PCI address: use the kernel's form, domain:bus:device.function "
                              "(0000:17:00.0)");
  }
  return *address;
}

// A command on the device the path names: its address in the kernel's form.
template <typename C>
ParsedRequest on_device(const HttpRequest& request, const Params& params) {
  if (auto error = no_query(request)) return std::move(*error);
  auto address = device_address(params.at(0));
  if (auto* error = std::get_if<RouteError>(&address)) return std::move(*error);
  return Command{C{std::get<PciAddress>(address)}};
}

// A POST on the device the path names whose body, when there is one, is an empty object: as a
// VM's start, so that a field the route does not take is refused rather than ignored.
template <typename C>
ParsedRequest device_change(const HttpRequest& request, const Params& params) {
  if (auto error = no_query(request)) return std::move(*error);
  auto address = device_address(params.at(0));
  if (auto* error = std::get_if<RouteError>(&address)) return std::move(*error);
  auto body = json_body(request, true);
  if (auto* error = std::get_if<RouteError>(&body)) return std::move(*error);
  detail::BodyFields fields(std::get<boost::json::object>(body), {});
  if (auto error = fields.check_unknown()) return std::move(*error);
  return Command{C{std::get<PciAddress>(address)}};
}

ParsedRequest get_template(const HttpRequest& request, const Params& params) {
  if (auto error = no_query(request)) return std::move(*error);
  auto name = checked<TemplateName>(params.at(0), "name");
  if (auto* error = std::get_if<RouteError>(&name)) return std::move(*error);
  return Command{command::GetTemplate{std::get<TemplateName>(std::move(name))}};
}

ParsedRequest validate_template(const HttpRequest& request, const Params& /*params*/) {
  if (auto error = no_query(request)) return std::move(*error);
  if (auto error = require_media_type(request, {"application/yaml", "application/x-yaml", "text/yaml"})) {
    return std::move(*error);
  }
  return Command{command::ValidateTemplate{request.body}};
}

// ?tail=N: the last N lines of the VM's console log.
ParsedRequest get_console_log(const HttpRequest& request, const Params& params) {
  if (auto error = no_query(request, {"tail"})) return std::move(*error);
  auto name = checked<VmName>(params.at(0), "name");
  if (auto* error = std::get_if<RouteError>(&name)) return std::move(*error);
  command::GetConsoleLog get{std::get<VmName>(std::move(name))};
  if (const auto it = request.query.find("tail"); it != request.query.end()) {
    const std::string& text = it->second;
    std::size_t lines = 0;
    const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), lines);
    if (text.empty() || error != std::errc() || end != text.data() + text.size() || lines < 1 ||
        lines > service::kMaxConsoleTailLines) {
      return bad("tail", "query parameter tail: found " + text::quoted(text) +
                             ", expected a whole number of lines from 1 to " +
                             std::to_string(service::kMaxConsoleTailLines));
    }
    get.tail = lines;
  }
  return Command{std::move(get)};
}

// A header's comma-separated tokens (RFC 9110 5.6.1), compared without case.
bool has_token(const HttpRequest& request, const std::string& header, std::string_view token) {
  const auto it = request.headers.find(header);
  if (it == request.headers.end()) return false;
  std::size_t start = 0;
  const std::string& value = it->second;
  while (start <= value.size()) {
    const std::size_t comma = std::min(value.find(',', start), value.size());
    std::string_view item(value.data() + start, comma - start);
    while (!item.empty() && (item.front() == ' ' || item.front() == '\t')) item.remove_prefix(1);
    while (!item.empty() && (item.back() == ' ' || item.back() == '\t')) item.remove_suffix(1);
    if (item.size() == token.size() && std::equal(item.begin(), item.end(), token.begin(), [](char a, char b) {
          return std::tolower(static_cast<unsigned char>(a)) == std::tolower(static_cast<unsigned char>(b));
        })) {
      return true;
    }
    start = comma + 1;
  }
  return false;
}

// The opening handshake RFC 6455 4.1 asks of a client: GET, Upgrade: websocket, Connection:
// upgrade, version 13 and a key.
bool websocket_upgrade(const HttpRequest& request) {
  const auto key = request.headers.find("sec-websocket-key");
  const auto version = request.headers.find("sec-websocket-version");
  return request.method == "GET" && has_token(request, "upgrade", "websocket") &&
         has_token(request, "connection", "upgrade") && key != request.headers.end() && !key->second.empty() &&
         version != request.headers.end() && version->second == "13";
}

// A console is a WebSocket; ?take_over=true ends the session that holds it.
ParsedRequest open_console(const HttpRequest& request, const Params& params) {
  if (auto error = no_query(request, {"take_over"})) return std::move(*error);
  auto name = checked<VmName>(params.at(0), "name");
  if (auto* error = std::get_if<RouteError>(&name)) return std::move(*error);
  command::OpenConsole open{std::get<VmName>(std::move(name))};
  if (const auto it = request.query.find("take_over"); it != request.query.end()) {
    if (it->second != "true" && it->second != "false") {
      return bad("take_over",
                 "query parameter take_over: found " + text::quoted(it->second) + ", expected true or false");
    }
    open.take_over = it->second == "true";
  }
  if (!websocket_upgrade(request)) {
    return RouteError{426, "upgrade_required",
                      "a VM's console is a WebSocket: send GET with Upgrade: websocket, Connection: upgrade, "
                      "Sec-WebSocket-Version: 13 and a Sec-WebSocket-Key (RFC 6455), as `hostagentctl vm console` does",
                      "", ""};
  }
  return Command{std::move(open)};
}

ParsedRequest get_operation(const HttpRequest& request, const Params& params) {
  if (auto error = no_query(request)) return std::move(*error);
  if (!is_name(params.at(0))) {
    return bad("id", "id: " + text::quoted(params.at(0)) + " is not an operation id (op-N)");
  }
  return Command{command::GetOperation{params.at(0)}};
}

// Last-Event-ID (the SSE spec: the id of the last event the client saw): this API's ids are decimal.
ParsedRequest stream_events(const HttpRequest& request, const Params& /*params*/) {
  if (auto error = no_query(request)) return std::move(*error);
  command::StreamEvents stream;
  const auto header = request.headers.find("last-event-id");
  if (header != request.headers.end()) {
    const std::string& text = header->second;
    uint64_t id = 0;
    const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), id);
    if (text.empty() || error != std::errc() || end != text.data() + text.size()) {
      return bad("Last-Event-ID", "Last-Event-ID: " + text::quoted(text) +
                                      " is not an event id; send the decimal id of the last event received");
    }
    stream.last_event_id = id;
  }
  return Command{stream};
}

struct Route {
  std::string_view pattern;  // "{}" is one non-empty segment
  std::string_view method;
  Builder build;
};

// Literal segments before {} where both match: /v1/templates/validate is tried before /v1/templates/{}.
constexpr auto kRoutes = std::to_array<Route>({
    {"/v1/health/live", "GET", plain<command::Live>},
    {"/v1/health/ready", "GET", plain<command::Ready>},
    {"/v1/status", "GET", plain<command::GetStatus>},
    {"/v1/host", "GET", plain<command::GetHost>},
    {"/v1/host/capacity", "GET", plain<command::GetCapacity>},
    {"/v1/host/maintenance", "GET", plain<command::GetMaintenance>},
    {"/v1/host/cordon", "POST", cordon},
    {"/v1/host/drain", "POST", drain},
    {"/v1/host/uncordon", "POST", uncordon},
    {"/v1/devices", "GET", list_devices},
    {"/v1/devices/{}", "GET", on_device<command::GetDevice>},
    {"/v1/devices/{}/clean", "POST", device_change<command::CleanDevice>},
    {"/v1/devices/{}/history", "GET", on_device<command::GetDeviceHistory>},
    {"/v1/cleaning", "GET", plain<command::ListCleaning>},
    {"/v1/quarantine", "GET", plain<command::ListQuarantine>},
    {"/v1/quarantine/{}", "DELETE", on_device<command::ClearQuarantine>},
    {"/v1/templates", "GET", plain<command::ListTemplates>},
    {"/v1/templates/validate", "POST", validate_template},
    {"/v1/templates/{}", "GET", get_template},
    {"/v1/vms", "GET", plain<command::ListVms>},
    {"/v1/vms", "POST", create_vm},
    {"/v1/vms/{}", "GET", named_vm<command::GetVm>},
    {"/v1/vms/{}", "DELETE", vm_change<command::DeleteVm>},
    {"/v1/vms/{}/start", "POST", vm_change<command::StartVm>},
    {"/v1/vms/{}/stop", "POST", stop_vm},
    {"/v1/vms/{}/reboot", "POST", vm_change<command::RebootVm>},
    {"/v1/vms/{}/domain-xml", "GET", named_vm<command::GetDomainXml>},
    {"/v1/vms/{}/nccl-topology", "GET", named_vm<command::GetNcclTopology>},
    {"/v1/vms/{}/starts", "GET", named_vm<command::GetVmStarts>},
    {"/v1/vms/{}/stats", "GET", named_vm<command::GetVmStats>},
    {"/v1/vms/{}/console", "GET", open_console},
    {"/v1/vms/{}/console/log", "GET", get_console_log},
    {"/v1/operations", "GET", plain<command::ListOperations>},
    {"/v1/operations/{}", "GET", get_operation},
    {"/v1/events", "GET", stream_events},
    {"/v1/metrics", "GET", plain<command::GetMetrics>},
});
// The table is written out (the OpenAPI suite reads it from this file); the probes the server
// serves on probation are these two routes.
static_assert(kRoutes[0].pattern == kLivePath && kRoutes[1].pattern == kReadyPath);

std::vector<std::string_view> split(std::string_view path) {
  std::vector<std::string_view> segments;
  std::size_t start = 0;
  while (true) {
    const std::size_t slash = path.find('/', start);
    segments.push_back(path.substr(start, slash == std::string_view::npos ? std::string_view::npos : slash - start));
    if (slash == std::string_view::npos) return segments;
    start = slash + 1;
  }
}

std::optional<Params> match(std::string_view pattern, const std::vector<std::string_view>& segments) {
  const auto parts = split(pattern);
  if (parts.size() != segments.size()) return std::nullopt;
  Params params;
  for (std::size_t i = 0; i < parts.size(); ++i) {
    if (parts[i] == "{}") {
      if (segments[i].empty()) return std::nullopt;
      params.emplace_back(segments[i]);
    } else if (parts[i] != segments[i]) {
      return std::nullopt;
    }
  }
  return params;
}

}  // namespace

bool needs_operator(const HttpRequest& request) {
  if (!is_read_method(request.method)) return true;
  return match("/v1/vms/{}/console", split(request.path)).has_value();
}

ParsedRequest parse_request(const HttpRequest& request) {
  const auto segments = split(request.path);
  std::string allow;
  for (const auto& route : kRoutes) {
    auto params = match(route.pattern, segments);
    if (!params) continue;
    // HEAD is GET without the body (RFC 9110 9.3.2), on every resource GET reads; the server sends
    // the headers a GET would, Content-Length included.
    const bool head_of_get = request.method == "HEAD" && route.method == "GET";
    if (route.method == request.method || head_of_get) return route.build(request, *params);
    for (const std::string_view method : {route.method, route.method == "GET" ? "HEAD" : std::string_view()}) {
      if (!method.empty() && allow.find(method) == std::string::npos) {
        allow += (allow.empty() ? "" : ", ") + std::string(method);
      }
    }
  }
  if (!allow.empty()) {
    return RouteError{
        405, "method_not_allowed",
        text::quoted(request.method) + " is not allowed on " + text::quoted(request.path) + "; allowed: " + allow, "",
        allow};
  }
  return RouteError{404, "not_found",
                    "no resource at " + text::quoted(request.path) + "; the API's resources are listed at docs/api.md",
                    "", ""};
}

}  // namespace hostagent::api
