// api/rest_commands: what each request of /v1 asks, as a typed command. parse_request is pure (no
// service, no clock, no I/O) and total: every byte sequence gives a command or a RouteError, never
// an exception or an abort, because a libFuzzer target drives it with arbitrary requests.
//
// Parse errors carry their own HTTP status, since routing (404, 405) and media types (415) are
// decided here, before any service error can arise; the routes turn a RouteError into a problem
// through api/problem with `code`, `field` and, for 405, the Allow header.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "hostagent/api/http_server.hpp"
#include "hostagent/common/pci_address.hpp"
#include "hostagent/service/vm_service.hpp"

namespace hostagent::api {

// The health probes: cheap, and served even on a connection in the server's health reserve.
inline constexpr std::string_view kLivePath = "/v1/health/live";
inline constexpr std::string_view kReadyPath = "/v1/health/ready";

namespace command {

struct Live {};
struct Ready {};
struct GetStatus {};
struct GetHost {};
struct GetCapacity {};
struct GetMaintenance {};
struct Cordon {
  std::string reason;  // checked: one line, 1 to service::kMaxMaintenanceReasonBytes
};
struct Drain {
  std::string reason;
  std::chrono::seconds grace = service::kDefaultDrainGrace;  // 1 s to service::kMaxDrainGrace
};
struct Uncordon {};
struct ListDevices {
  std::string role;  // "" for every role, else a numa::PciRole name ("gpu", "nic", ...)
  bool free_only = false;
};
struct GetDevice {
  PciAddress address;
};
struct ListQuarantine {};
struct ClearQuarantine {
  PciAddress address;
};
struct ListCleaning {};
struct CleanDevice {
  PciAddress address;
};
struct GetDeviceHistory {
  PciAddress address;
};
struct ListTemplates {};
struct GetTemplate {
  TemplateName name;
};
struct ValidateTemplate {
  std::string yaml;
};
struct ListVms {};
struct GetVm {
  VmName name;
};
struct CreateVm {
  service::CreateVmRequest request;
};
struct StartVm {
  VmName name;
};
struct StopVm {
  VmName name;
  bool force = false;
};
struct RebootVm {
  VmName name;
};
struct DeleteVm {
  VmName name;
};
struct GetDomainXml {
  VmName name;
};
struct GetNcclTopology {
  VmName name;
};
struct GetVmStarts {
  VmName name;
};
struct GetVmStats {
  VmName name;
};
struct GetConsoleLog {
  VmName name;
  std::size_t tail = 100;  // lines, 1 to service::kMaxConsoleTailLines
};
// GET /v1/vms/{name}/console with a WebSocket upgrade: the VM's serial console, interactive.
struct OpenConsole {
  VmName name;
  bool take_over = false;  // ?take_over=true: end the session that holds the console and take it
};
struct ListOperations {};
struct GetOperation {
  std::string id;
};
struct StreamEvents {
  std::optional<uint64_t> last_event_id;  // Last-Event-ID: resume after it
};
struct GetMetrics {};

}  // namespace command

using Command =
    std::variant<command::Live, command::Ready, command::GetStatus, command::GetHost, command::GetCapacity,
                 command::GetMaintenance, command::Cordon, command::Drain, command::Uncordon, command::ListDevices,
                 command::GetDevice, command::ListQuarantine, command::ClearQuarantine, command::ListCleaning,
                 command::CleanDevice, command::GetDeviceHistory, command::ListTemplates, command::GetTemplate,
                 command::ValidateTemplate, command::ListVms, command::GetVm, command::CreateVm, command::StartVm,
                 command::StopVm, command::RebootVm, command::DeleteVm, command::GetDomainXml, command::GetNcclTopology,
                 command::GetVmStarts, command::GetVmStats, command::GetConsoleLog, command::OpenConsole,
                 command::ListOperations, command::GetOperation, command::StreamEvents, command::GetMetrics>;

// Why a request names no command. `code` is a problem code (api/problem.hpp): invalid_argument
// (400), not_found (404), method_not_allowed (405, with `allow`), unsupported_media_type (415).
struct RouteError {
  unsigned status = 400;
  std::string code = "invalid_argument";
  std::string detail;  // for the operator: what is wrong and what is accepted
  std::string field;   // the body field, query parameter or path segment at fault; "" for none
  std::string allow;   // 405: the methods the path accepts, "GET, POST"
};

// Either the command or why there is none.
using ParsedRequest = std::variant<Command, RouteError>;

// Whether a request needs the operator role: every change (is_read_method's rule), and a VM's
// console, which changes nothing the server keeps but lets its client type into the guest. The one
// owner of that rule: the routes refuse a reader by it, and the audit log records by it.
bool needs_operator(const HttpRequest& request);

// Routes by path (404 for none), then method (405), then checks the media type of a body (415:
// application/json for JSON bodies, application/yaml for validate), then parses and checks the
// body, path segments and query strictly (400): broken JSON, unknown fields (the detail lists the
// accepted ones), wrong types, missing required fields and bad names each name the field.
ParsedRequest parse_request(const HttpRequest& request);

}  // namespace hostagent::api
