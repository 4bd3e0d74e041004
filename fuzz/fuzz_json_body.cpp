// libFuzzer target: arbitrary bytes as the body of the three requests that carry one: POST /v1/vms
// (JSON), POST /v1/vms/x/stop (JSON) and POST /v1/templates/validate (YAML), through the routes'
// parse_request. The first byte picks the request and whether the media type carries a charset
// parameter; the rest is the body. Besides what the sanitizers catch, it checks that the answer is
// the route's command or a 400/415, that a create never names a VM the daemon would refuse, and
// that no JSON body with a key repeated in one object is accepted.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <variant>

#include "hostagent/api/rest_commands.hpp"
#include "hostagent/common/json_text.hpp"
#include "hostagent/common/names.hpp"

namespace {

using namespace hostagent::api;

[[noreturn]] void broken(const char* what) {
  std::fprintf(stderr, "fuzz_json_body: %s\n", what);
  std::abort();
}

struct Route {
  const char* path;
  const char* media_type;
};
constexpr Route kRoutes[] = {
    {"/v1/vms", "application/json"},
    {"/v1/vms/x/stop", "application/json"},
    {"/v1/templates/validate", "application/yaml"},
};
constexpr std::size_t kRouteCount = sizeof(kRoutes) / sizeof(kRoutes[0]);

HttpRequest request_for(uint8_t selector, std::string body) {
  const Route& route = kRoutes[selector % kRouteCount];
  HttpRequest request;
  request.method = "POST";
  request.target = route.path;
  request.path = route.path;
  std::string media_type = route.media_type;
  if ((selector / kRouteCount) % 2 == 1) media_type += "; charset=utf-8";
  request.headers["content-type"] = media_type;
  request.headers["content-length"] = std::to_string(body.size());
  request.body = std::move(body);
  request.identity = {"fuzz", Role::operator_role};
  request.remote = "unix";
  return request;
}

void check(std::size_t route, const HttpRequest& request, const ParsedRequest& parsed) {
  if (const auto* error = std::get_if<RouteError>(&parsed)) {
    if (error->status != 400 && error->status != 415) broken("a body gave a route error other than 400 or 415");
    if (error->detail.empty()) broken("a route error without a detail");
    return;
  }
  const auto& command = std::get<Command>(parsed);
  if (route != 2 && !hostagent::json_text::duplicate_key(request.body).empty()) {
    broken("a JSON body with a key repeated in one object was accepted");
  }
  if (route == 0) {
    const auto* create = std::get_if<command::CreateVm>(&command);
    if (create == nullptr) broken("POST /v1/vms gave another command");
    // The types promise these; a parse that built one around text breaking the rule would show here.
    if (!hostagent::is_name(create->request.name.str())) broken("a create accepted a VM name the rule refuses");
    if (!hostagent::is_name(create->request.template_name.str())) broken("a create accepted a bad template name");
  } else if (route == 1) {
    const auto* stop = std::get_if<command::StopVm>(&command);
    if (stop == nullptr || stop->name != "x") broken("POST /v1/vms/x/stop gave another command");
  } else {
    const auto* validate = std::get_if<command::ValidateTemplate>(&command);
    if (validate == nullptr) broken("POST /v1/templates/validate gave another command");
    if (validate->yaml != request.body) broken("validate's YAML is not the body");
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const auto request = request_for(data[0], std::string(reinterpret_cast<const char*>(data) + 1, size - 1));
  check(data[0] % kRouteCount, request, parse_request(request));
  return 0;
}
