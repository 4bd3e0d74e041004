// api/rest, private: each command run against the service, its result made a response. Thin: the
// service decides, these only translate.
#pragma once

#include "event_stream.hpp"
#include "hostagent/api/http_server.hpp"
#include "hostagent/api/rest_api.hpp"
#include "hostagent/api/rest_commands.hpp"
#include "service_metrics.hpp"
#include "vm_list_body.hpp"

namespace hostagent::api::detail {

struct RouteContext {
  service::VmService& service;
  const RestApiOptions& options;
  ServiceMetrics& metrics;
  EventLog& events;
  VmListBody& vm_list_body;
};

HttpResponse run_command(RouteContext& context, const Command& command, const HttpRequest& request);

// A parse error as a problem (405 with Allow).
HttpResponse route_problem(const RouteError& error, const HttpRequest& request);

// A service error as a problem; an invalid_argument whose message starts "FIELD: " names the field.
HttpResponse service_problem(const Error& error, const HttpRequest& request);

}  // namespace hostagent::api::detail
