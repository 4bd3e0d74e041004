// api/rest_api: RestApi, the handler and observer an HttpServer runs: parse, check the role, run,
// and afterwards audit the change and count the request.
#include "hostagent/api/rest_api.hpp"

#include <map>
#include <mutex>

#include "audit_log.hpp"
#include "event_stream.hpp"
#include "hostagent/api/problem.hpp"
#include "hostagent/api/rest_commands.hpp"
#include "hostagent/common/time_text.hpp"
#include "routes.hpp"

namespace hostagent::api {
namespace {

constexpr std::string_view kOperationsPrefix = "/v1/operations/";

class RestApiImpl final : public RestApi {
 public:
  RestApiImpl(service::VmService& service, RestApiOptions options, std::unique_ptr<detail::AuditLog> audit)
      : service_(service),
        options_(std::move(options)),
        audit_(std::move(audit)),
        events_(service_, options_.event_retained_frames, first_event_id(options_)) {
    subscription_ = service_.subscribe([this](const service::ServiceEvent& event) { metrics_.on_event(event); });
  }
  ~RestApiImpl() override { service_.unsubscribe(subscription_); }
  RestApiImpl(const RestApiImpl&) = delete;
  RestApiImpl& operator=(const RestApiImpl&) = delete;

  HttpResponse handle(const HttpRequest& request) override {
    // The server refuses a reader's changes first; the same rule again, where the routes are, with
    // the reads that need the operator too (a console).
    if (needs_operator(request) && request.identity.role != Role::operator_role) {
      return problem(403, "forbidden",
                     is_read_method(request.method)
                         ? "a VM's console lets its client type into the guest: it needs the operator role"
                         : "a reader may only read (GET); " + request.method + " needs the operator role",
                     request.target);
    }
    auto parsed = parse_request(request);
    if (const auto* error = std::get_if<RouteError>(&parsed)) return detail::route_problem(*error, request);
    const auto& command = std::get<Command>(parsed);
    detail::RouteContext context{service_, options_, metrics_, events_, vm_list_body_};
    HttpResponse response = detail::run_command(context, command, request);
    if (needs_operator(request)) remember(request, detail::audit_subject(command), response);
    return response;
  }

  void observe(const RequestRecord& record) override {
    if (record.request == nullptr) return;
    const HttpRequest& request = *record.request;
    metrics_.on_request(request.method, record.status, record.latency);
    Remembered remembered = take(request);
    // Reads are not audited (a console is: needs_operator); nor is what no known sender attempted
    // (the metrics count it).
    if (!needs_operator(request) || !record.authenticated) return;
    detail::AuditEntry entry{rfc3339(std::chrono::system_clock::now()), &request, record.status,
                             std::move(remembered.subject), std::move(remembered.operation)};
    audit_->write(detail::audit_line(entry));
  }

  Status reopen_audit_log() override { return audit_->reopen(); }

  void watch_server(const HttpServer& server) override {
    metrics_.watch_connections([&server] { return server.connection_stats(); });
  }

 private:
  static uint64_t first_event_id(const RestApiOptions& options) {
    if (options.first_event_id != 0) return options.first_event_id;
    return static_cast<uint64_t>(
        std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::system_clock::now().time_since_epoch())
            .count());
  }

  struct Remembered {
    detail::AuditSubject subject;
    std::string operation;  // from the Location of a 202
  };

  // The server passes the same request object to handle() and observe(): what a change named and
  // the operation it started wait here, keyed by it, for its audit line.
  void remember(const HttpRequest& request, detail::AuditSubject subject, const HttpResponse& response) {
    Remembered remembered{std::move(subject), ""};
    for (const auto& [name, value] : response.headers) {
      if (response.status == 202 && name == "Location" && value.starts_with(kOperationsPrefix)) {
        remembered.operation = value.substr(kOperationsPrefix.size());
      }
    }
    std::lock_guard lock(mutex_);
    remembered_[&request] = std::move(remembered);
  }

  Remembered take(const HttpRequest& request) {
    std::lock_guard lock(mutex_);
    const auto it = remembered_.find(&request);
    if (it == remembered_.end()) return {};
    Remembered found = std::move(it->second);
    remembered_.erase(it);
    return found;
  }

  service::VmService& service_;
  const RestApiOptions options_;
  std::unique_ptr<detail::AuditLog> audit_;
  detail::ServiceMetrics metrics_;
  detail::EventLog events_;
  detail::VmListBody vm_list_body_;  // GET /v1/vms, serialised once per version of the list
  uint64_t subscription_ = 0;
  std::mutex mutex_;
  std::map<const HttpRequest*, Remembered> remembered_;
};

}  // namespace

std::vector<std::string> RestApi::probe_paths() {
  return {std::string(kLivePath), std::string(kReadyPath)};
}

Result<std::unique_ptr<RestApi>> RestApi::make(service::VmService& service, RestApiOptions options) {
  HA_TRY(auto audit, detail::AuditLog::open(options.audit_log));
  return std::unique_ptr<RestApi>(new RestApiImpl(service, std::move(options), std::move(audit)));
}

}  // namespace hostagent::api
