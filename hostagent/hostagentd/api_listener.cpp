// hostagent/cli/api_listener: the configuration's api section to a listening server.
#include "api_listener.hpp"

#include "hostagent/common/text_file.hpp"

namespace hostagent::cli {
namespace {

void apply_limits(const config::ApiLimitsConfig& config, api::ServerLimits& limits) {
  limits.header_timeout = config.header_timeout;
  limits.request_timeout = config.request_timeout;
  limits.idle_timeout = config.idle_timeout;
  limits.max_connections = config.max_connections;
  limits.health_reserve = config.health_reserve;
  limits.max_connections_per_peer = config.max_connections_per_peer;
  limits.max_event_streams = config.max_event_streams;
}

Result<api::ServerOptions> server_options(const config::ApiConfig& config) {
  api::ServerOptions options;
  apply_limits(config.limits, options.limits);
  options.probe_paths = api::RestApi::probe_paths();
  for (const auto& text : config.listen) {
    HA_TRY(auto address, parse_listen_address(text));
    options.listen.push_back(std::move(address));
  }
  options.tls_certificate_file = config.tls.certificate.string();
  options.tls_key_file = config.tls.key.string();
  options.tls_client_ca_file = config.tls.client_ca.string();
  options.operator_common_names = config.tls.operator_common_names;
  HA_TRY(options.operator_token, read_token_file(config.token_file, "api.token_file"));
  HA_TRY(options.reader_token, read_token_file(config.reader_token_file, "api.reader_token_file"));
  return options;
}

}  // namespace

Result<std::unique_ptr<ApiListener>> ApiListener::start(const config::DaemonConfig& config, service::VmService& service,
                                                        std::map<std::filesystem::path, int> inherited) {
  HA_TRY(auto options, server_options(config.api));
  options.inherited_unix_sockets = std::move(inherited);
  api::RestApiOptions rest;
  rest.audit_log = config.api.audit_log;
  rest.template_directories = config.template_directories;
  std::unique_ptr<ApiListener> listener(new ApiListener());
  HA_TRY(listener->routes_, api::RestApi::make(service, std::move(rest)));
  auto* routes = listener->routes_.get();
  HA_TRY(listener->server_,
         api::HttpServer::start(
             std::move(options), [routes](const api::HttpRequest& request) { return routes->handle(request); },
             [routes](const api::RequestRecord& record) { routes->observe(record); }));
  routes->watch_server(*listener->server_);
  return listener;
}

ApiListener::~ApiListener() {
  if (server_) server_->stop();
}

std::vector<std::string> ApiListener::endpoints() const {
  std::vector<std::string> listed;
  for (const auto& address : server_->endpoints()) listed.push_back(hostagent::to_string(address));
  return listed;
}

}  // namespace hostagent::cli
