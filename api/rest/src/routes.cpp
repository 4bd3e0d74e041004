// api/rest: the commands of /v1, run against the daemon's service.
#include "routes.hpp"

#include <boost/json/parse.hpp>
#include <boost/json/serialize.hpp>
#include <map>
#include <optional>

#include "capacity.hpp"
#include "event_stream.hpp"
#include "hostagent/api/host_json.hpp"
#include "hostagent/api/problem.hpp"
#include "hostagent/api/template_json.hpp"
#include "hostagent/api/vm_json.hpp"
#include "operation_json.hpp"

namespace hostagent::api::detail {
namespace {

HttpResponse json_response(unsigned status, const boost::json::value& body) {
  HttpResponse response;
  response.status = status;
  response.body = boost::json::serialize(body);
  return response;
}

HttpResponse xml_response(std::string xml) {
  HttpResponse response;
  response.content_type = "application/xml";
  response.body = std::move(xml);
  return response;
}

// 202 with the operation and where to poll it.
HttpResponse accepted(const Result<service::OperationView>& operation, const HttpRequest& request) {
  if (!operation.ok()) return service_problem(operation.error(), request);
  HttpResponse response = json_response(202, operation_json(*operation));
  response.headers.emplace_back("Location", "/v1/operations/" + operation->id);
  return response;
}

template <typename T>
HttpResponse json_or_problem(const Result<T>& result, const HttpRequest& request) {
  if (!result.ok()) return service_problem(result.error(), request);
  return json_response(200, to_json(*result));
}

// "" when no VM holds it.
std::map<PciAddress, std::string> holders(const service::HostUsage& usage) {
  std::map<PciAddress, std::string> held_by;
  for (const auto& allocation : usage.held) {
    for (const auto& device : allocation.devices) held_by.emplace(device, allocation.vm);
  }
  return held_by;
}

template <typename View>
std::map<PciAddress, View> by_address(std::vector<View> entries) {
  std::map<PciAddress, View> out;
  for (auto& entry : entries) out.emplace(entry.address, std::move(entry));
  return out;
}

template <typename View>
const View* find_entry(const std::map<PciAddress, View>& entries, const PciAddress& address) {
  const auto it = entries.find(address);
  return it == entries.end() ? nullptr : &it->second;
}

// What the service says of devices beyond the host model, read once per request: who holds each,
// its quarantine, its cleaning and its last cleaning.
struct DeviceFacts {
  std::map<PciAddress, std::string> held_by;
  std::map<PciAddress, service::QuarantineView> quarantine;
  std::map<PciAddress, service::CleaningView> cleaning;
  std::map<PciAddress, service::CleaningRecordView> last_cleaning;

  DeviceFacts(service::VmService& service, const service::HostUsage& usage)
      : held_by(holders(usage)),
        quarantine(by_address(service.quarantined())),
        cleaning(by_address(service.cleaning())),
        last_cleaning(service.last_cleanings()) {}

  DeviceStatus of(const PciAddress& address) const {
    const auto held = held_by.find(address);
    return DeviceStatus{held == held_by.end() ? std::nullopt : std::optional<std::string>(held->second),
                        find_entry(quarantine, address), find_entry(cleaning, address),
                        find_entry(last_cleaning, address)};
  }
};

// PCI endpoints: bridges and switch ports are the tree, not devices anyone is given.
bool is_endpoint(const numa::PciFunction& f) {
  return !f.is_bridge() && f.role != numa::PciRole::switch_upstream && f.role != numa::PciRole::switch_downstream &&
         f.role != numa::PciRole::root_port;
}

// The API's side of a console session: the service's session as the server's byte channel.
class ConsoleChannel final : public ByteChannel {
 public:
  explicit ConsoleChannel(std::shared_ptr<service::ConsoleSession> session) : session_(std::move(session)) {}
  std::string take() override { return session_->take(); }
  std::size_t put(std::string_view bytes) override { return session_->put(bytes); }
  void wait(std::function<void()> wake) override { session_->wait(std::move(wake)); }
  std::optional<std::string> ended() override { return session_->ended(); }

 private:
  std::shared_ptr<service::ConsoleSession> session_;
};

HttpResponse not_found(const std::string& detail, const HttpRequest& request) {
  return service_problem(Error{ErrorCode::not_found, detail}, request);
}

struct Runner {
  RouteContext& context;
  const HttpRequest& request;

  service::VmService& service() const { return context.service; }

  HttpResponse operator()(const command::Live& /*unused*/) const {
    return json_response(200, boost::json::object{{"status", "ok"}});
  }

  HttpResponse operator()(const command::Ready& /*unused*/) const {
    const auto status = service().status();
    if (status.ready && status.libvirt_connected) return json_response(200, boost::json::object{{"status", "ready"}});
    const std::string why = !status.libvirt_connected ? "libvirtd is not connected; the daemon keeps reconnecting"
                                                      : "the daemon is reconciling its state with libvirt";
    return problem(503, "not_ready", "not ready: " + why, request.target);  // problem() adds Retry-After
  }

  HttpResponse operator()(const command::GetStatus& /*unused*/) const {
    return json_response(200, to_json(service().status()));
  }

  // ACS and ATS as config space holds them now: device preparation changes them after discovery.
  HttpResponse operator()(const command::GetHost& /*unused*/) const {
    return json_response(200, to_json(service().host_now()));
  }

  HttpResponse operator()(const command::GetCapacity& /*unused*/) const {
    const auto usage = service().usage();
    if (usage.host == nullptr) return service_problem(Error{ErrorCode::internal, "the host model is missing"}, request);
    return json_response(200, capacity_json(numa::capacity(*usage.host, usage.held, usage.policy)));
  }

  HttpResponse operator()(const command::ListDevices& list) const {
    const auto usage = service().usage();
    if (usage.host == nullptr) return service_problem(Error{ErrorCode::internal, "the host model is missing"}, request);
    const DeviceFacts facts(service(), usage);
    boost::json::array devices;
    for (const auto& f : usage.host->pci_devices) {
      if (!is_endpoint(f)) continue;
      if (!list.role.empty() && list.role != numa::to_string(f.role)) continue;
      const auto status = facts.of(f.address);
      if (list.free_only && device_state(f, status) != "free") continue;  // held, the host's, withheld
      devices.push_back(device_json(f, status));
    }
    return json_response(200, boost::json::object{{"devices", std::move(devices)}});
  }

  HttpResponse operator()(const command::GetDevice& get) const {
    const auto usage = service().usage();
    const auto* f = usage.host == nullptr ? nullptr : usage.host->find(get.address);
    if (f == nullptr || !is_endpoint(*f)) {
      return not_found("device: no PCI endpoint at " + get.address.to_string() + " on this host", request);
    }
    return json_response(200, device_json(*f, DeviceFacts(service(), usage).of(get.address)));
  }

  HttpResponse operator()(const command::GetMaintenance& /*unused*/) const {
    return json_response(200, to_json(service().maintenance()));
  }
  HttpResponse operator()(const command::Cordon& cordon) const {
    return json_or_problem(service().cordon(cordon.reason, request.identity.principal), request);
  }
  // 202: the drain is under way. Its stops are operations on their VMs' queues, and its progress
  // the maintenance's (GET /v1/host/maintenance, maintenance events).
  HttpResponse operator()(const command::Drain& drain) const {
    auto drained = service().drain(drain.reason, drain.grace, request.identity.principal);
    if (!drained.ok()) return service_problem(drained.error(), request);
    return json_response(202, to_json(*drained));
  }
  HttpResponse operator()(const command::Uncordon& /*unused*/) const {
    return json_or_problem(service().uncordon(request.identity.principal), request);
  }

  HttpResponse operator()(const command::ListQuarantine& /*unused*/) const {
    boost::json::array devices;
    for (const auto& entry : service().quarantined()) devices.push_back(quarantine_json(entry));
    return json_response(200, boost::json::object{{"devices", std::move(devices)}});
  }

  HttpResponse operator()(const command::ClearQuarantine& clear) const {
    auto cleared = service().clear_quarantine(clear.address, request.identity.principal);
    if (!cleared.ok()) return service_problem(cleared.error(), request);
    return json_response(200, quarantine_json(*cleared));
  }

  HttpResponse operator()(const command::ListCleaning& /*unused*/) const {
    boost::json::array devices;
    for (const auto& entry : service().cleaning()) devices.push_back(cleaning_json(entry));
    return json_response(200, boost::json::object{{"devices", std::move(devices)}});
  }

  // 202: the cleaning is under way; its steps and outcome come as cleaning events, then in the
  // device's history.
  HttpResponse operator()(const command::CleanDevice& clean) const {
    auto begun = service().clean_device(clean.address, request.identity.principal);
    if (!begun.ok()) return service_problem(begun.error(), request);
    return json_response(202, cleaning_json(*begun));
  }

  HttpResponse operator()(const command::GetDeviceHistory& get) const {
    auto history = service().device_history(get.address);
    if (!history.ok()) return service_problem(history.error(), request);
    return json_response(200, history_json(*history));
  }

  HttpResponse operator()(const command::ListTemplates& /*unused*/) const {
    boost::json::array templates;
    for (const auto& [name, shape] : service().templates()) templates.push_back(to_json(shape));
    return json_response(200, boost::json::object{{"templates", std::move(templates)}});
  }

  HttpResponse operator()(const command::GetTemplate& get) const {
    const auto& templates = service().templates();
    const auto it = templates.find(get.name);
    if (it == templates.end()) return not_found("template: no template named '" + get.name.str() + "'", request);
    return json_response(200, to_json(it->second));
  }

  HttpResponse operator()(const command::ValidateTemplate& validate) const;

  HttpResponse operator()(const command::ListVms& /*unused*/) const {
    HttpResponse response;
    response.status = 200;
    response.body = context.vm_list_body.body_of(service().list_vms());
    return response;
  }

  HttpResponse operator()(const command::GetVm& get) const {
    return json_or_problem(service().get_vm(get.name), request);
  }
  // The service refuses at once what it can tell (fields, an unknown template, a name in use).
  HttpResponse operator()(const command::CreateVm& create) const {
    return accepted(service().begin_create(create.request), request);
  }
  HttpResponse operator()(const command::StartVm& start) const {
    return accepted(service().begin_start(start.name), request);
  }
  HttpResponse operator()(const command::StopVm& stop) const {
    return accepted(service().begin_stop(stop.name, stop.force), request);
  }
  HttpResponse operator()(const command::RebootVm& reboot) const {
    return accepted(service().begin_reboot(reboot.name), request);
  }
  HttpResponse operator()(const command::DeleteVm& del) const {
    return accepted(service().begin_delete(del.name), request);
  }

  HttpResponse operator()(const command::GetDomainXml& get) const {
    auto xml = service().domain_xml(get.name);
    if (!xml.ok()) return service_problem(xml.error(), request);
    return xml_response(std::move(xml).value());
  }

  HttpResponse operator()(const command::GetNcclTopology& get) const {
    auto xml = service().nccl_topology(get.name);
    if (!xml.ok()) return service_problem(xml.error(), request);
    return xml_response(std::move(xml).value());
  }

  // The service's figures of every VM (one libvirt call per kVmStatsMaxAge), this one's picked.
  HttpResponse operator()(const command::GetVmStats& get) const {
    auto all = service().vm_stats();
    if (!all.ok()) return service_problem(all.error(), request);
    for (const auto& vm : *all) {
      if (vm.vm == get.name.str()) return json_response(200, to_json(vm));
    }
    return not_found("name: no VM named " + text::quoted(get.name.str()) + " that hostagent made", request);
  }

  // Text as the guest wrote it (any bytes); X-Console-Log-Bytes: the log's size, for a reader
  // that follows it.
  HttpResponse operator()(const command::GetConsoleLog& get) const {
    auto log = service().console_log(get.name, get.tail);
    if (!log.ok()) return service_problem(log.error(), request);
    HttpResponse response;
    response.content_type = "text/plain";  // no charset: a guest's console writes any bytes
    response.body = std::move(log->text);
    response.headers.emplace_back("X-Console-Log-Bytes", std::to_string(log->file_bytes));
    return response;
  }

  // 101: the server answers the handshake and joins the socket to the session.
  HttpResponse operator()(const command::OpenConsole& open) const {
    auto session = service().open_console(open.name, open.take_over, request.identity.principal);
    if (!session.ok()) return service_problem(session.error(), request);
    HttpResponse response;
    response.status = 101;
    response.content_type.clear();
    response.channel = std::make_shared<ConsoleChannel>(std::move(session).value());
    return response;
  }

  HttpResponse operator()(const command::GetVmStarts& get) const {
    auto starts = service().vm_starts(get.name);
    if (!starts.ok()) return service_problem(starts.error(), request);
    boost::json::array out;
    for (const auto& start : *starts) out.push_back(operation_json(start));
    return json_response(200, boost::json::object{{"vm", get.name.str()}, {"starts", std::move(out)}});
  }

  HttpResponse operator()(const command::ListOperations& /*unused*/) const {
    boost::json::array operations;
    for (const auto& operation : service().operations()) operations.push_back(operation_json(operation));
    return json_response(200, boost::json::object{{"operations", std::move(operations)}});
  }

  HttpResponse operator()(const command::GetOperation& get) const {
    auto operation = service().operation(get.id);
    if (!operation.ok()) return service_problem(operation.error(), request);
    return json_response(200, operation_json(*operation));
  }

  HttpResponse operator()(const command::StreamEvents& stream) const {
    HttpResponse response;
    response.content_type = "text/event-stream";
    response.events = context.events.open(context.options.event_queue_frames, stream.last_event_id);
    return response;
  }

  HttpResponse operator()(const command::GetMetrics& /*unused*/) const {
    HttpResponse response;
    response.content_type = "text/plain; version=0.0.4; charset=utf-8";
    response.body = context.metrics.render(service());
    return response;
  }
};

std::vector<std::string> lines(const std::string& text) {
  std::vector<std::string> out;
  std::size_t start = 0;
  while (start <= text.size()) {
    const std::size_t end = std::min(text.find('\n', start), text.size());
    if (end > start) out.push_back(text.substr(start, end - start));
    start = end + 1;
  }
  return out;
}

// `extends: NAME` in a template under validation: NAME.yaml from the configured directories, the
// operator's (later) ones first, as load_template_dirs lets a later directory override; the client
// sees file names, not the host's directories.
vmtemplates::ParentLookup parent_lookup(const std::vector<std::filesystem::path>& directories) {
  return vmtemplates::directory_lookup({directories.rbegin(), directories.rend()},
                                       vmtemplates::ParentSource::file_name);
}

HttpResponse Runner::operator()(const command::ValidateTemplate& validate) const {
  auto shape =
      vmtemplates::parse_template(validate.yaml, "request", parent_lookup(context.options.template_directories));
  if (shape.ok()) return json_response(200, boost::json::object{{"valid", true}, {"template", to_json(*shape)}});
  const auto& error = shape.error();
  if (error.code != ErrorCode::invalid_argument && error.code != ErrorCode::parse_error &&
      error.code != ErrorCode::not_found) {
    return service_problem(error, request);
  }
  const auto errors = lines(error.message);
  HttpResponse response = problem(422, "invalid_template",
                                  "the template is invalid (" + std::to_string(errors.size()) +
                                      (errors.size() == 1 ? " error" : " errors") +
                                      "): " + (errors.empty() ? error.message : errors.front()),
                                  request.target);
  boost::system::error_code ec;
  auto body = boost::json::parse(response.body, ec);
  if (!ec && body.is_object()) {
    boost::json::array list;
    for (const auto& line : errors) list.emplace_back(line);
    body.as_object()["errors"] = std::move(list);
    response.body = boost::json::serialize(body);
  }
  return response;
}

}  // namespace

HttpResponse run_command(RouteContext& context, const Command& command, const HttpRequest& request) {
  return std::visit(Runner{context, request}, command);
}

HttpResponse route_problem(const RouteError& error, const HttpRequest& request) {
  HttpResponse response = problem(error.status, error.code, error.detail, request.target, error.field);
  if (!error.allow.empty()) response.headers.emplace_back("Allow", error.allow);
  // RFC 9110 15.5.22: a 426 names the protocol to upgrade to; RFC 6455 4.4, the version spoken.
  if (error.status == 426) {
    response.headers.emplace_back("Upgrade", "websocket");
    response.headers.emplace_back("Sec-WebSocket-Version", "13");
  }
  return response;
}

HttpResponse service_problem(const Error& error, const HttpRequest& request) {
  return problem(error, request.target);
}

}  // namespace hostagent::api::detail
