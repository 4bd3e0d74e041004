// hostagent/cli/api_listener: the REST API as hostagentd serves it: the configuration's api section
// turned into the server's options (token files read here, once), the routes over the service, and
// the server that listens, on sockets systemd passed (socket activation) where it did. Stopped (and
// the unix sockets it made removed) when destroyed.
#pragma once

#include <filesystem>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "hostagent/api/http_server.hpp"
#include "hostagent/api/rest_api.hpp"
#include "hostagent/common/result.hpp"
#include "hostagent/config/daemon_config.hpp"
#include "hostagent/service/vm_service.hpp"

namespace hostagent::cli {

class ApiListener {
 public:
  // Listens on config.api.listen; the service outlives the listener. A unix address whose path is
  // in `inherited` (path -> fd, matched by systemd::inherited_sockets) is served on that fd, which
  // the listener then owns, instead of being bound.
  static Result<std::unique_ptr<ApiListener>> start(const config::DaemonConfig& config, service::VmService& service,
                                                    std::map<std::filesystem::path, int> inherited = {});
  ~ApiListener();
  ApiListener(const ApiListener&) = delete;
  ApiListener& operator=(const ApiListener&) = delete;

  // "unix:/run/hostagent/hostagent.sock", "tcp://127.0.0.1:8443": where it listens, for the log.
  std::vector<std::string> endpoints() const;
  // api.audit_log opened again, for SIGHUP after logrotate renamed it.
  Status reopen_audit_log() { return routes_->reopen_audit_log(); }

 private:
  ApiListener() = default;
  // The routes go after the server: the server stops (no handler running) before they are destroyed.
  std::unique_ptr<api::RestApi> routes_;
  std::unique_ptr<api::HttpServer> server_;
};

}  // namespace hostagent::cli
