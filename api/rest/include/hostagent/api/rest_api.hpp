// api/rest_api: the routes of /v1. Each request becomes a typed command (parse_request: pure, no
// service, fuzzed), the command runs against the daemon's service, and its result becomes the
// response; errors become problems through api/problem's one table. Also the audit log of every
// change and the request metrics.
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "hostagent/api/http_server.hpp"
#include "hostagent/common/result.hpp"
#include "hostagent/service/vm_service.hpp"

namespace hostagent::api {

struct RestApiOptions {
  std::filesystem::path audit_log;                          // JSON lines, appended; "" logs audit lines to stderr only
  std::vector<std::filesystem::path> template_directories;  // for validate's `extends` lookups
  std::size_t event_queue_frames = 1024;                    // per event-stream client; beyond, its oldest are dropped
  std::size_t event_retained_frames = 1024;  // the last events kept for a client that resumes with Last-Event-ID
  // The first event's id; 0: the time the RestApi is made, in microseconds since the epoch.
  uint64_t first_event_id = 0;
};

class RestApi {
 public:
  // The service outlives the RestApi.
  static Result<std::unique_ptr<RestApi>> make(service::VmService& service, RestApiOptions options);
  virtual ~RestApi() = default;
  // The paths the server serves on probation (ServerOptions::probe_paths): the health probes.
  static std::vector<std::string> probe_paths();

  virtual HttpResponse handle(const HttpRequest& request) = 0;  // an HttpServer's RequestHandler
  virtual void observe(const RequestRecord& record) = 0;        // its RequestObserver
  // The server it answers for, whose connection budget /v1/metrics then shows; it outlives the
  // RestApi's use of it (stop the server before destroying it).
  virtual void watch_server(const HttpServer& server) = 0;
  // Opens api.audit_log again (after logrotate renamed it: hostagentd does this on SIGHUP). On
  // failure lines keep going to the file that was open, and the error names the path.
  virtual Status reopen_audit_log() = 0;
};

}  // namespace hostagent::api
