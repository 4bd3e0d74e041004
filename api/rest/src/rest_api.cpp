// api/rest_api: RestApi, the handler and observer an HttpServer runs: parse, check the role, run,
// and afterwards audit the change and count the request.
#include "hostagent/api/rest_api.hpp"

#include <map>
#include <mutex>

#include "audit_log.hpp"
#include "hostagent/api/problem.hpp"
#include "hostagent/api/rest_commands.hpp"
#include "hostagent/common/time_text.hpp"
#include "routes.hpp"

namespace hostagent::api {
namespace {

constexpr std::string_view kOperationsPrefix = "/v1/operations/";

class RestApiImpl final : public RestApi {
 public:
  RestApiImpl(daemon::VmService& service, RestApiOptions options, std::unique_ptr<detail::AuditLog> audit)
      : service_(service), options_(std::move(options)), audit_(std::move(audit)) {
    subscription_ = service_.subscribe([this](const daemon::ServiceEvent& event) { metrics_.on_event(event); });
  }
  ~RestApiImpl() override { service_.unsubscribe(subscription_); }
  RestApiImpl(const RestApiImpl&) = delete;
  RestApiImpl& operator=(const RestApiImpl&) = delete;

  HttpResponse handle(const HttpRequest& request) override {
    // The server refuses a reader's changes first; the same rule again, where the routes are.
    if (!is_read_method(request.method) && request.identity.role != Role::operator_role) {
      return problem(403, "forbidden", "a reader may only read (GET); " + request.method + " needs the operator role",
                     request.target);
    }
    auto parsed = parse_request(request);
    if (const auto* error = std::get_if<RouteError>(&parsed)) return detail::route_problem(*error, request);
    detail::RouteContext context{service_, options_, metrics_};
    HttpResponse response = detail::run_command(context, std::get<Command>(parsed), request);
    if (response.status == 202 && request.method != "GET") remember_operation(request, response);
    return response;
  }

  void observe(const RequestRecord& record) override {
    if (record.request == nullptr) return;
    const HttpRequest& request = *record.request;
    metrics_.on_request(request.method, record.status, record.latency);
    std::string operation = take_operation(request);
    if (is_read_method(request.method)) return;  // reads are not audited
    detail::AuditEntry entry{rfc3339(std::chrono::system_clock::now()), &request, record.status, std::move(operation)};
    audit_->write(detail::audit_line(entry));
  }

 private:
  // The server passes the same request object to handle() and observe(): the operation a change
  // started waits here, keyed by it, for its audit line.
  void remember_operation(const HttpRequest& request, const HttpResponse& response) {
    for (const auto& [name, value] : response.headers) {
      if (name != "Location" || value.rfind(kOperationsPrefix, 0) != 0) continue;
      std::lock_guard lock(mutex_);
      operations_[&request] = value.substr(kOperationsPrefix.size());
    }
  }

  std::string take_operation(const HttpRequest& request) {
    std::lock_guard lock(mutex_);
    const auto it = operations_.find(&request);
    if (it == operations_.end()) return "";
    std::string id = std::move(it->second);
    operations_.erase(it);
    return id;
  }

  daemon::VmService& service_;
  const RestApiOptions options_;
  std::unique_ptr<detail::AuditLog> audit_;
  detail::ServiceMetrics metrics_;
  uint64_t subscription_ = 0;
  std::mutex mutex_;
  std::map<const HttpRequest*, std::string> operations_;
};

}  // namespace

Result<std::unique_ptr<RestApi>> RestApi::make(daemon::VmService& service, RestApiOptions options) {
  HA_TRY(auto audit, detail::AuditLog::open(options.audit_log));
  return std::unique_ptr<RestApi>(new RestApiImpl(service, std::move(options), std::move(audit)));
}

}  // namespace hostagent::api
