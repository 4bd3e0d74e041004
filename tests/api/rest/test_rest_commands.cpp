// parse_request: routing, media types and strict JSON bodies, without a service.
#include <doctest/doctest.h>

#include "hostagent/api/rest_commands.hpp"

namespace hostagent::api {
namespace {

HttpRequest make(const std::string& method, const std::string& path, const std::string& body = "",
                 const std::string& content_type = "application/json") {
  HttpRequest request;
  request.method = method;
  request.path = path;
  request.target = path;
  request.body = body;
  if (!content_type.empty()) request.headers["content-type"] = content_type;
  request.identity.role = Role::operator_role;
  return request;
}

HttpRequest with_query(HttpRequest request, const std::string& key, const std::string& value) {
  request.query[key] = value;
  return request;
}

template <typename T>
T command_of(const HttpRequest& request) {
  auto parsed = parse_request(request);
  if (const auto* error = std::get_if<RouteError>(&parsed)) FAIL("unexpected error: ", error->detail);
  const auto& command = std::get<Command>(parsed);
  REQUIRE(std::holds_alternative<T>(command));
  return std::get<T>(command);
}

RouteError error_of(const HttpRequest& request) {
  auto parsed = parse_request(request);
  REQUIRE(std::holds_alternative<RouteError>(parsed));
  return std::get<RouteError>(parsed);
}

}  // namespace

TEST_CASE("parse_request routes every resource of docs/api.md to its command") {
  CHECK(std::holds_alternative<command::Live>(std::get<Command>(parse_request(make("GET", "/v1/health/live")))));
  command_of<command::Ready>(make("GET", "/v1/health/ready"));
  command_of<command::GetStatus>(make("GET", "/v1/status"));
  command_of<command::GetHost>(make("GET", "/v1/host"));
  command_of<command::GetCapacity>(make("GET", "/v1/host/capacity"));
  command_of<command::GetMaintenance>(make("GET", "/v1/host/maintenance"));
  CHECK(command_of<command::Cordon>(make("POST", "/v1/host/cordon", R"({"reason":"r"})")).reason == "r");
  CHECK(command_of<command::Drain>(make("POST", "/v1/host/drain", R"({"reason":"r"})")).reason == "r");
  command_of<command::Uncordon>(make("POST", "/v1/host/uncordon", "", ""));
  command_of<command::ListDevices>(make("GET", "/v1/devices"));
  CHECK(command_of<command::GetDevice>(make("GET", "/v1/devices/0000:17:00.0")).address.to_string() == "0000:17:00.0");
  command_of<command::ListTemplates>(make("GET", "/v1/templates"));
  CHECK(command_of<command::GetTemplate>(make("GET", "/v1/templates/gx3-16x128x1h100")).name == "gx3-16x128x1h100");
  CHECK(command_of<command::ValidateTemplate>(make("POST", "/v1/templates/validate", "name: x\n", "application/yaml"))
            .yaml == "name: x\n");
  command_of<command::ListVms>(make("GET", "/v1/vms"));
  CHECK(command_of<command::GetVm>(make("GET", "/v1/vms/train-0")).name == "train-0");
  CHECK(command_of<command::StartVm>(make("POST", "/v1/vms/train-0/start")).name == "train-0");
  CHECK(command_of<command::RebootVm>(make("POST", "/v1/vms/train-0/reboot")).name == "train-0");
  CHECK(command_of<command::DeleteVm>(make("DELETE", "/v1/vms/train-0")).name == "train-0");
  CHECK(command_of<command::GetDomainXml>(make("GET", "/v1/vms/a.b_c-1/domain-xml")).name == "a.b_c-1");
  CHECK(command_of<command::GetNcclTopology>(make("GET", "/v1/vms/v/nccl-topology")).name == "v");
  CHECK(command_of<command::GetVmStats>(make("GET", "/v1/vms/v/stats")).name == "v");
  CHECK(command_of<command::GetConsoleLog>(make("GET", "/v1/vms/v/console/log")).tail == 100);
  CHECK(command_of<command::GetConsoleLog>(with_query(make("GET", "/v1/vms/v/console/log"), "tail", "10000")).tail ==
        10000);
  command_of<command::ListOperations>(make("GET", "/v1/operations"));
  CHECK(command_of<command::GetOperation>(make("GET", "/v1/operations/op-12")).id == "op-12");
  command_of<command::StreamEvents>(make("GET", "/v1/events"));
  command_of<command::GetMetrics>(make("GET", "/v1/metrics"));
}

TEST_CASE("parse_request reads a create with every field") {
  const auto create = command_of<command::CreateVm>(
      make("POST", "/v1/vms",
           R"({"name":"train-0","template":"gx3d-160x1792x8h100","request_id":"7f1c-1","boot_image":"/img/u.qcow2",)"
           R"("macs":["02:00:00:00:00:01","02:00:00:00:00:0A"],"ssh_authorized_keys":["ssh-ed25519 AAAA k"]})",
           "application/json; charset=utf-8"));
  CHECK(create.request.name == "train-0");
  CHECK(create.request.template_name == "gx3d-160x1792x8h100");
  CHECK(create.request.request_id == "7f1c-1");
  CHECK(create.request.boot_image == "/img/u.qcow2");
  CHECK(create.request.macs == std::vector<MacAddress>{"02:00:00:00:00:01", "02:00:00:00:00:0a"});  // one case
  CHECK(create.request.ssh_authorized_keys == std::vector<std::string>{"ssh-ed25519 AAAA k"});
  CHECK(create.request.user_data.empty());

  const auto claimed = command_of<command::CreateVm>(
      make("POST", "/v1/vms",
           R"({"name":"train-1","template":"t","uuid":"6F1C2A9E-0B7D-4A55-9C3E-1D2E3F405162","placement":)"
           R"({"allocations":{"0B5C1D2E-3F40-8152-8637-48596A7B8C9D":{"resources":{"PGPU":1,"SRIOV_NET_VF":1}},)"
           R"("1b5c1d2e-3f40-8152-8637-48596a7b8c9d":{"resources":{"VCPU":16,"MEMORY_MB":131072}}}}})"));
  // UUIDs in either case, kept in lower case (common/names Uuid): one UUID, one text.
  CHECK(claimed.request.uuid == "6f1c2a9e-0b7d-4a55-9c3e-1d2e3f405162");
  CHECK(claimed.request.claim ==
        fleet::ProviderResources{{"0b5c1d2e-3f40-8152-8637-48596a7b8c9d", {{"PGPU", 1}, {"SRIOV_NET_VF", 1}}},
                                 {"1b5c1d2e-3f40-8152-8637-48596a7b8c9d", {{"VCPU", 16}, {"MEMORY_MB", 131072}}}});

  const auto minimal = command_of<command::CreateVm>(
      make("POST", "/v1/vms", R"({"name":"a","template":"t","request_id":null,"user_data":"#cloud-config\n"})"));
  CHECK(minimal.request.request_id.empty());
  CHECK(minimal.request.user_data == "#cloud-config\n");
}

TEST_CASE("parse_request reads stop's force and takes empty or empty-object bodies on start") {
  CHECK_FALSE(command_of<command::StopVm>(make("POST", "/v1/vms/v/stop", "", "")).force);
  CHECK(command_of<command::StopVm>(make("POST", "/v1/vms/v/stop", R"({"force":true})")).force);
  CHECK_FALSE(command_of<command::StopVm>(make("POST", "/v1/vms/v/stop", R"({"force":false})")).force);
  CHECK(command_of<command::StartVm>(make("POST", "/v1/vms/v/start", "{}")).name == "v");
  const auto error = error_of(make("POST", "/v1/vms/v/stop", R"({"force":"yes"})"));
  CHECK(error.status == 400);
  CHECK(error.field == "force");
  CHECK(error.detail.find("expected true or false") != std::string::npos);
  const auto unknown = error_of(make("POST", "/v1/vms/v/start", R"({"force":true})"));
  CHECK(unknown.field == "force");
  CHECK(unknown.detail.find("takes no fields") != std::string::npos);
}

TEST_CASE("parse_request reads a maintenance's reason and a drain's grace, and names the field it refuses") {
  CHECK(command_of<command::Cordon>(make("POST", "/v1/host/cordon", R"({"reason":"PSU swap, INC-4411"})")).reason ==
        "PSU swap, INC-4411");
  const auto drain = command_of<command::Drain>(make("POST", "/v1/host/drain", R"({"reason":"r"})"));
  CHECK(drain.grace == service::kDefaultDrainGrace);
  CHECK(command_of<command::Drain>(make("POST", "/v1/host/drain", R"({"reason":"r","grace_seconds":86400})")).grace ==
        std::chrono::seconds(86400));
  CHECK(command_of<command::Drain>(make("POST", "/v1/host/drain", R"({"reason":"r","grace_seconds":1})")).grace ==
        std::chrono::seconds(1));
  command_of<command::Uncordon>(make("POST", "/v1/host/uncordon", "{}"));
  struct Refused {
    std::string path, body, field, words;
  };
  const std::vector<Refused> refused{
      {"/v1/host/cordon", "{}", "reason", "missing; it is required"},
      {"/v1/host/cordon", R"({"reason":""})", "reason", "1 to 256 bytes"},
      {"/v1/host/cordon", R"({"reason":")" + std::string(257, 'x') + R"("})", "reason", "1 to 256 bytes"},
      {"/v1/host/cordon", R"({"reason":"two\nlines"})", "reason", "one line"},
      {"/v1/host/cordon", R"({"reason":"r","force":true})", "force", "reason"},
      {"/v1/host/drain", R"({"reason":"r","grace_seconds":0})", "grace_seconds", "from 1 to 86400"},
      {"/v1/host/drain", R"({"reason":"r","grace_seconds":86401})", "grace_seconds", "from 1 to 86400"},
      {"/v1/host/drain", R"({"reason":"r","grace_seconds":1.5})", "grace_seconds", "a whole number"},
      {"/v1/host/drain", R"({"reason":"r","grace_seconds":"60"})", "grace_seconds", "a whole number"},
      {"/v1/host/drain", R"({"grace_seconds":60})", "reason", "missing; it is required"},
      {"/v1/host/uncordon", R"({"reason":"r"})", "reason", "takes no fields"},
  };
  for (const auto& r : refused) {
    CAPTURE(r.body);
    const auto error = error_of(make("POST", r.path, r.body));
    CHECK(error.status == 400);
    CHECK(error.field == r.field);
    CHECK_MESSAGE(error.detail.find(r.words) != std::string::npos, error.detail);
  }
  CHECK(error_of(make("POST", "/v1/host/cordon", "", "")).status == 415);  // a reason is required: a body too
}

TEST_CASE("parse_request answers 404 for unknown paths and 405 with Allow for a wrong method") {
  for (const char* path : {"/", "", "/v1", "/v2/vms", "/v1/vms/", "/v1/vms/a/b", "/v1/nothing", "/v1//vms",
                           "/v1/vms/a/start/now", "/V1/vms"}) {
    CAPTURE(path);
    const auto error = error_of(make("GET", path));
    CHECK(error.status == 404);
    CHECK(error.code == "not_found");
  }
  const auto put = error_of(make("PUT", "/v1/vms"));
  CHECK(put.status == 405);
  CHECK(put.code == "method_not_allowed");
  CHECK(put.allow == "GET, HEAD, POST");
  CHECK(error_of(make("GET", "/v1/vms/v/start")).allow == "POST");
  CHECK(error_of(make("POST", "/v1/vms/v")).allow == "GET, HEAD, DELETE");
  CHECK(error_of(make("DELETE", "/v1/host")).allow == "GET, HEAD");
  CHECK(error_of(make("POST", "/v1/templates/t")).allow == "GET, HEAD");
  // HEAD reads what GET reads (RFC 9110 9.3.2).
  command_of<command::ListVms>(make("HEAD", "/v1/vms"));
  // Last-Event-ID becomes the stream's resume point; none, none.
  auto resume = make("GET", "/v1/events");
  CHECK_FALSE(command_of<command::StreamEvents>(resume).last_event_id);
  resume.headers["last-event-id"] = "1733212345678901";
  CHECK(command_of<command::StreamEvents>(resume).last_event_id == 1733212345678901U);
  for (const char* bad_id : {"", "-1", "+1", "1 ", "18446744073709551616", "0x10"}) {
    CAPTURE(bad_id);
    resume.headers["last-event-id"] = bad_id;
    CHECK(error_of(resume).field == "Last-Event-ID");
  }
  CHECK(command_of<command::GetVm>(make("HEAD", "/v1/vms/v")).name.str() == "v");
  // GET of /v1/templates/validate is a template named "validate": the service answers 404.
  CHECK(command_of<command::GetTemplate>(make("GET", "/v1/templates/validate")).name == "validate");
}

TEST_CASE("parse_request answers 415 for a body in another media type") {
  for (const char* type : {"", "text/plain", "application/yaml", "application/jsonx"}) {
    CAPTURE(type);
    const auto error = error_of(make("POST", "/v1/vms", R"({"name":"a","template":"t"})", type));
    CHECK(error.status == 415);
    CHECK(error.code == "unsupported_media_type");
  }
  CHECK(error_of(make("POST", "/v1/templates/validate", "name: x", "application/json")).status == 415);
  CHECK(error_of(make("POST", "/v1/vms/v/stop", R"({"force":true})", "text/plain")).status == 415);
  command_of<command::ValidateTemplate>(make("POST", "/v1/templates/validate", "name: x", "Application/X-YAML"));
}

TEST_CASE("parse_request names the field of a bad create body") {
  struct Case {
    const char* body;
    const char* field;
    const char* words;
  };
  const Case cases[] = {
      {"{", "body", "not valid JSON"},
      {"", "body", "not valid JSON"},
      {"[1]", "body", "found an array, expected a JSON object"},
      {R"({"name":"a","template":"t"} x)", "body", "not valid JSON"},
      {R"({"name":"a","template":"t","memory":1})", "memory", "unknown field; the fields are name, template"},
      // The last would win in boost::json, the first in another reader: refused, whichever.
      {R"({"name":"a","template":"t","name":"b"})", "name", "appears twice in one object"},
      {R"({"template":"t"})", "name", "missing"},
      {R"({"name":"a"})", "template", "missing"},
      {R"({"name":null,"template":"t"})", "name", "missing"},
      {R"({"name":5,"template":"t"})", "name", "found a number, expected a string"},
      {R"({"name":"a","template":true})", "template", "found true, expected a string"},
      {R"({"name":"a","template":"t","macs":"02:00:00:00:00:01"})", "macs", "expected an array of strings"},
      {R"({"name":"a","template":"t","macs":["02:00:00:00:00:01",3]})", "macs[1]", "expected a string"},
      {R"({"name":"a","template":"t","macs":["02:00:00:00:00"]})", "macs[0]", "not a MAC address"},
      {R"({"name":"../etc","template":"t"})", "name", "is not a VM name"},
      {R"({"name":".hidden","template":"t"})", "name", "is not a VM name"},
      {R"({"name":"","template":"t"})", "name", "is not a VM name"},
      {R"({"name":"a","template":"x/y"})", "template", "is not a template name"},
      {R"({"name":"a","template":"t","boot_image":"relative.img"})", "boot_image", "absolute path"},
      {R"({"name":"a","template":"t","boot_image":"/a/../etc/shadow"})", "boot_image", "absolute path"},
      {R"({"name":"a","template":"t","request_id":"has space"})", "request_id", "printable"},
      {R"({"name":"a","template":"t","ssh_authorized_keys":["a\nb"]})", "ssh_authorized_keys[0]", "one non-empty line"},
      {R"({"name":"a","template":"t","ssh_authorized_keys":["k"],"user_data":"u"})", "user_data", "not both"},
      {R"({"name":"a","template":"t","user_data":"#cloud-config\u0000runcmd"})", "user_data", "NUL"},
      {R"({"name":"-rf","template":"t"})", "name", "is not a VM name"},
      {R"({"name":"a","template":"t","uuid":"6f1c2a9e-0b7d-4a55-9c3e-1d2e3f40516"})", "uuid", "is not a UUID, 32 hex"},
      {R"({"name":"a","template":"t","macs":["01:00:5e:00:00:01"]})", "macs[0]", "is a multicast address"},
      {R"({"name":"a","template":"t","macs":["00:00:00:00:00:00"]})", "macs[0]", "is the all-zero address"},
      {R"({"name":"a","template":"t","uuid":"6f1c2a9e-0b7d-4a55-9c3e-1d2e3f405162","placement":{"allocations":)"
       R"({"6f1c2a9e-0b7d-4a55-9c3e-1d2e3f405162":{"resources":{"PGPU":1}},)"
       R"("6F1C2A9E-0B7D-4A55-9C3E-1D2E3F405162":{"resources":{"PGPU":1}}}}})",
       "placement.allocations.6F1C2A9E-0B7D-4A55-9C3E-1D2E3F405162", "names a provider another key names too"},
      {R"({"name":"a","template":"t","placement":{"allocations":{"6f1c2a9e-0b7d-4a55-9c3e-1d2e3f405162":)"
       R"({"resources":{"PGPU":1}}}}})",
       "uuid", "needs the UUID of the consumer"},
      {R"({"name":"a","template":"t","uuid":"6f1c2a9e-0b7d-4a55-9c3e-1d2e3f405162","placement":{"allocations":{}}})",
       "placement.allocations", "expected an object of provider UUIDs"},
      {R"({"name":"a","template":"t","uuid":"6f1c2a9e-0b7d-4a55-9c3e-1d2e3f405162","placement":{"allocations":)"
       R"({"not-a-uuid":{"resources":{"PGPU":1}}}}})",
       "placement.allocations", "a key is not a UUID"},
      {R"({"name":"a","template":"t","uuid":"6f1c2a9e-0b7d-4a55-9c3e-1d2e3f405162","placement":{"allocations":)"
       R"({"6f1c2a9e-0b7d-4a55-9c3e-1d2e3f405162":{"resources":{"pgpu; drop":1}}}}})",
       "placement.allocations.6f1c2a9e-0b7d-4a55-9c3e-1d2e3f405162", "a resource class is not upper-case"},
      {R"({"name":"a","template":"t","uuid":"6f1c2a9e-0b7d-4a55-9c3e-1d2e3f405162","placement":{"allocations":)"
       R"({"6f1c2a9e-0b7d-4a55-9c3e-1d2e3f405162":{"resources":{"PGPU":0}}}}})",
       "placement.allocations.6f1c2a9e-0b7d-4a55-9c3e-1d2e3f405162", "expected a whole number from 1"},
      // Issue 43, defect 13: nothing inside placement is ignored.
      {R"({"name":"a","template":"t","uuid":"6f1c2a9e-0b7d-4a55-9c3e-1d2e3f405162","placement":{"allocations":)"
       R"({"6f1c2a9e-0b7d-4a55-9c3e-1d2e3f405162":{"resources":{"PGPU":1}}},"consumer_generation":3}})",
       "placement.consumer_generation", "unknown field; placement holds \"allocations\" alone"},
      {R"({"name":"a","template":"t","uuid":"6f1c2a9e-0b7d-4a55-9c3e-1d2e3f405162","placement":{"allocations":)"
       R"({"6f1c2a9e-0b7d-4a55-9c3e-1d2e3f405162":{"resources":{"PGPU":1},"generation":5}}}})",
       "placement.allocations.6f1c2a9e-0b7d-4a55-9c3e-1d2e3f405162", "and nothing beside it"},
  };
  for (const auto& c : cases) {
    CAPTURE(c.body);
    const auto error = error_of(make("POST", "/v1/vms", c.body));
    CHECK(error.status == 400);
    CHECK(error.code == "invalid_argument");
    CHECK(error.field == c.field);
    CHECK_MESSAGE(error.detail.find(c.words) != std::string::npos, error.detail);
  }
  const std::string name65(65, 'a');
  CHECK(error_of(make("POST", "/v1/vms", R"({"name":")" + name65 + R"(","template":"t"})")).field == "name");
}

TEST_CASE("parse_request checks path segments and query parameters") {
  const auto bad_name = error_of(make("GET", "/v1/vms/a%20b"));
  CHECK(bad_name.status == 400);
  CHECK(bad_name.field == "name");
  const auto decoded = error_of(make("GET", std::string("/v1/vms/a\x01z")));
  CHECK(decoded.detail.find("\\x01") != std::string::npos);  // control bytes never reach the detail raw
  CHECK(error_of(make("GET", "/v1/devices/17:00.0")).field == "address");
  CHECK(error_of(make("GET", "/v1/operations/op 1")).field == "id");
  for (const std::string tail : {"0", "10001", "ten", "", "-1", "5x"}) {
    CAPTURE(tail);
    const auto refused = error_of(with_query(make("GET", "/v1/vms/v/console/log"), "tail", tail));
    CHECK(refused.field == "tail");
    CHECK(refused.detail.find("from 1 to 10000") != std::string::npos);
  }
  CHECK(error_of(with_query(make("GET", "/v1/vms/v/console/log"), "lines", "5")).field == "lines");
  CHECK(error_of(make("GET", "/v1/templates/..")).field == "name");

  auto devices = make("GET", "/v1/devices");
  devices.query = {{"role", "gpu"}, {"free", "true"}};
  const auto list = command_of<command::ListDevices>(devices);
  CHECK(list.role == "gpu");
  CHECK(list.free_only);
  devices.query = {{"role", "gpus"}};
  CHECK(error_of(devices).field == "role");
  devices.query = {{"free", "yes"}};
  CHECK(error_of(devices).field == "free");
  devices.query = {{"sort", "address"}};
  const auto unknown = error_of(devices);
  CHECK(unknown.field == "sort");
  CHECK(unknown.detail.find("the parameters are role, free") != std::string::npos);
  auto vms = make("GET", "/v1/vms");
  vms.query = {{"state", "running"}};
  CHECK(error_of(vms).detail.find("takes none") != std::string::npos);
}

TEST_CASE("parse_request survives hostile bodies without throwing") {
  const std::string deep = std::string(10000, '[') + std::string(10000, ']');
  const std::string bad_utf8 = "{\"name\":\"\xff\xfe\",\"template\":\"t\"}";
  const std::string nul = std::string("{\"name\":\"a\0b\",\"template\":\"t\"}", 29);
  for (const auto& body : {deep, bad_utf8, nul, std::string("{\"name\":\"a\",\"name\":\"b\",\"template\":\"t\"}"),
                           std::string("1e999999"), std::string("\"\\ud800\"")}) {
    CAPTURE(body.substr(0, 40));
    auto parsed = parse_request(make("POST", "/v1/vms", body));
    if (const auto* error = std::get_if<RouteError>(&parsed)) CHECK(error->status == 400);
  }
}

}  // namespace hostagent::api
