// api/openapi.yaml against the real server: the REST suite's fixture (a VmService on test:/// and
// an HttpServer on a unix socket) is asked every path and method the document has, and every
// answer — successes and the errors that can be provoked — must have a documented status, media
// type, required headers and a body its schema accepts. Routes the server has and the document
// lacks, and the reverse, fail too.
#include <doctest/doctest.h>

#include <boost/json.hpp>
#include <chrono>
#include <regex>
#include <set>
#include <sstream>
#include <thread>

#include "api_fixture.hpp"
#include "openapi_checker.hpp"
#include "test_support.hpp"

namespace hostagent::testing::openapi {
namespace {

namespace json = boost::json;

std::string lower(std::string text) {
  std::transform(text.begin(), text.end(), text.begin(), [](unsigned char c) { return std::tolower(c); });
  return text;
}

std::string path_of(const std::string& target) {
  return target.substr(0, target.find('?'));
}

// A small template the simulated host can hold, for creates.
constexpr const char* kTemplate = "gx3-16x128x1h100";

ObservedResponse observed(const ApiResponse& reply) {
  ObservedResponse out;
  out.status = reply.status;
  out.content_type = reply.content_type;
  for (const auto& [name, value] : reply.headers) out.headers[lower(name)] = value;
  out.body = reply.body;
  return out;
}

// Talks to the server through the fixture and checks every answer against the document; remembers
// which documented operations answered with success, for the coverage check.
class Client {
 public:
  Client() { fixture_.start(); }

  // Over the unix socket (an operator), or over TCP with a bearer token.
  ObservedResponse send(const std::string& method, const std::string& target, const std::string& body = "",
                        const std::string& content_type = "application/json", const std::string& token = "") {
    return observed(fixture_.request(method, target, body, body.empty() ? "" : content_type, token));
  }

  // Sends, checks against the document, and returns the response.
  ObservedResponse checked(const std::string& method, const std::string& target, const std::string& body = "",
                           const std::string& content_type = "application/json") {
    auto response = send(method, target, body, content_type);
    const auto mismatches = shipped_document().check_response(method, path_of(target), response);
    CHECK_MESSAGE(mismatches.empty(), method << " " << target << ":" << joined(mismatches));
    if (response.status < 300) {
      if (const auto path = shipped_document().match_path(path_of(target))) succeeded_.insert(method + " " + *path);
    }
    return response;
  }

  // Expects `status`, checked as above; returns the body parsed.
  json::value expect(unsigned status, const std::string& method, const std::string& target,
                     const std::string& body = "", const std::string& content_type = "application/json") {
    const auto response = checked(method, target, body, content_type);
    CHECK_MESSAGE(response.status == status,
                  method << " " << target << ": " << response.status << " " << response.body.substr(0, 400));
    if (media_type(response.content_type).find("json") == std::string::npos) return json::value(response.body);
    boost::system::error_code ec;
    auto parsed = json::parse(response.body, ec);
    return ec ? json::value(nullptr) : parsed;
  }

  // Polls an operation until it ends; every poll is checked too.
  json::value wait_for(const std::string& id) {
    for (int attempt = 0; attempt < 600; ++attempt) {
      auto operation = expect(200, "GET", "/v1/operations/" + id);
      const auto* state = operation.is_object() ? operation.as_object().if_contains("state") : nullptr;
      if (!state) return operation;
      if (*state == "succeeded" || *state == "failed") return operation;
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    FAIL("operation " << id << " did not end within 30 s");
    return nullptr;
  }

  const std::set<std::string>& succeeded() const { return succeeded_; }
  std::string boot_image() { return fixture_.daemon().request("boot", kTemplate).boot_image; }
  ApiFixture& fixture() { return fixture_; }

 private:
  ApiFixture fixture_;
  std::set<std::string> succeeded_;
};

std::string field(const json::value& value, const char* name) {
  const auto* member = value.is_object() ? value.as_object().if_contains(name) : nullptr;
  return member && member->is_string() ? std::string(member->as_string()) : std::string();
}

std::string shipped_template(const std::string& name) {
  return read_text_file(hostagent::testing::shipped_templates_dir() / (name + ".yaml"));
}

std::string create_body(const std::string& name, const std::string& request_id, const std::string& boot_image) {
  json::object body{{"name", name}, {"template", kTemplate}, {"request_id", request_id}};
  if (!boot_image.empty()) body["boot_image"] = boot_image;
  return json::serialize(body);
}

// Creates a VM and waits for the create; returns its operation as it ended.
json::value create_vm(Client& client, const std::string& name) {
  const auto accepted = client.expect(202, "POST", "/v1/vms", create_body(name, "req-" + name, client.boot_image()));
  REQUIRE_MESSAGE(!field(accepted, "id").empty(), json::serialize(accepted));
  auto ended = client.wait_for(field(accepted, "id"));
  REQUIRE_MESSAGE(field(ended, "state") == "succeeded", json::serialize(ended));
  return ended;
}

// A create whose GPU the kernel would not bind (the fixture's preparer told so): the GPU is
// quarantined. Returns its address, from GET /v1/quarantine.
std::string quarantine_a_gpu(Client& client, const std::string& name) {
  {
    std::lock_guard lock(client.fixture().daemon().devices()->mutex);
    client.fixture().daemon().devices()->fault_first_device = true;
  }
  const auto accepted = client.expect(202, "POST", "/v1/vms", create_body(name, "req-" + name, client.boot_image()));
  CHECK(field(client.wait_for(field(accepted, "id")), "state") == "failed");
  const auto listed = client.expect(200, "GET", "/v1/quarantine");
  const auto& devices = listed.as_object().at("devices").as_array();
  REQUIRE(devices.size() == 1);
  return field(devices.front(), "address");
}

TEST_CASE("the read-only routes answer as the document says") {
  Client client;
  client.expect(200, "GET", "/v1/health/live");
  client.expect(200, "GET", "/v1/health/ready");
  client.expect(200, "GET", "/v1/status");
  const auto host = client.expect(200, "GET", "/v1/host");
  CHECK(host.as_object().at("pci_devices").as_array().size() > 0);
  client.expect(200, "GET", "/v1/host/capacity");
  const auto devices = client.expect(200, "GET", "/v1/devices");
  REQUIRE(!devices.as_object().at("devices").as_array().empty());
  client.expect(200, "GET", "/v1/devices?role=gpu&free=true");
  const auto first = field(devices.as_object().at("devices").as_array().front(), "address");
  client.expect(200, "GET", "/v1/devices/" + first);
  client.expect(200, "GET", "/v1/devices/" + first + "/history");
  client.expect(200, "GET", "/v1/cleaning");
  const auto templates = client.expect(200, "GET", "/v1/templates");
  REQUIRE(!templates.as_object().at("templates").as_array().empty());
  client.expect(200, "GET", "/v1/templates/" + std::string(kTemplate));
  client.expect(200, "GET", "/v1/vms");
  client.expect(200, "GET", "/v1/operations");
  const auto metrics = client.checked("GET", "/v1/metrics");
  CHECK(metrics.status == 200);
  CHECK(metrics.body.find("hostagent_") != std::string::npos);
}

TEST_CASE("template validation answers 200 with the template, 422 with every error, 415 for JSON") {
  Client client;
  client.expect(200, "POST", "/v1/templates/validate", shipped_template(kTemplate), "application/yaml");
  const auto invalid =
      client.expect(422, "POST", "/v1/templates/validate", "name: x\nvcpus: lots\n", "application/yaml");
  CHECK(field(invalid, "code") == "invalid_template");
  const auto unsupported = client.expect(415, "POST", "/v1/templates/validate", "{}", "application/json");
  CHECK(field(unsupported, "code") == "unsupported_media_type");
}

TEST_CASE("a VM's whole life answers as the document says") {
  Client client;
  const auto created = create_vm(client, "oas-life");
  CHECK(field(created, "kind") == "create");
  const auto vm = client.expect(200, "GET", "/v1/vms/oas-life");
  CHECK(vm.as_object().contains("record"));
  const auto xml = client.expect(200, "GET", "/v1/vms/oas-life/domain-xml");
  CHECK(xml.as_string().find("<domain") != std::string::npos);
  const auto nccl = client.expect(200, "GET", "/v1/vms/oas-life/nccl-topology");
  CHECK(nccl.as_string().find("<system") != std::string::npos);
  const auto devices = client.expect(200, "GET", "/v1/devices?free=false");
  client.expect(200, "GET", "/v1/host/capacity");

  for (const auto& [action, body] : std::vector<std::pair<std::string, std::string>>{
           {"stop", R"({"force": true})"}, {"start", ""}, {"reboot", ""}, {"stop", ""}}) {
    const std::string what = action;  // CAPTURE's lambda cannot capture a structured binding
    CAPTURE(what);
    const auto operation = client.expect(202, "POST", "/v1/vms/oas-life/" + action, body);
    CHECK(field(operation, "kind") == action);
    client.wait_for(field(operation, "id"));
  }
  // The create and the start, newest first, each with its timeline.
  const auto starts = client.expect(200, "GET", "/v1/vms/oas-life/starts");
  const auto& kept = starts.as_object().at("starts").as_array();
  REQUIRE(kept.size() == 2);
  CHECK(field(kept.at(0), "kind") == "start");
  CHECK(field(kept.at(1), "kind") == "create");
  CHECK_FALSE(kept.at(1).as_object().at("timeline").as_array().empty());
  const auto deleting = client.expect(202, "DELETE", "/v1/vms/oas-life");
  CHECK(field(client.wait_for(field(deleting, "id")), "state") == "succeeded");
  client.expect(404, "GET", "/v1/vms/oas-life/starts");
  client.expect(200, "GET", "/v1/operations");
  client.expect(404, "GET", "/v1/vms/oas-life");
}

TEST_CASE("a failed operation's error is a problem the document describes") {
  Client client;
  // No boot image on the simulated host: the template's own path does not exist, so the create
  // fails after it was accepted (or is refused at once; both are documented answers).
  const auto response = client.checked("POST", "/v1/vms", create_body("oas-fails", "req-fails", "/nonexistent/x.raw"));
  if (response.status != 202) {
    CHECK(response.status >= 400);
    return;
  }
  const auto ended = client.wait_for(field(json::parse(response.body), "id"));
  CHECK(field(ended, "state") == "failed");
  CHECK(ended.as_object().at("error").is_object());
}

TEST_CASE("documented errors: 404 for unknown things, with problem bodies") {
  Client client;
  client.expect(404, "GET", "/v1/vms/no-such-vm");
  client.expect(404, "GET", "/v1/vms/no-such-vm/domain-xml");
  client.expect(404, "GET", "/v1/vms/no-such-vm/nccl-topology");
  client.expect(404, "GET", "/v1/vms/no-such-vm/starts");
  client.expect(404, "POST", "/v1/vms/no-such-vm/start");
  client.expect(404, "POST", "/v1/vms/no-such-vm/stop");
  client.expect(404, "POST", "/v1/vms/no-such-vm/reboot");
  client.expect(404, "DELETE", "/v1/vms/no-such-vm");
  client.expect(404, "GET", "/v1/operations/op-999999");
  client.expect(404, "GET", "/v1/templates/no-such-template");
  client.expect(404, "GET", "/v1/devices/0000:ff:1f.7");
  client.expect(404, "GET", "/v1/devices/0000:ff:1f.7/history");
  client.expect(404, "POST", "/v1/devices/0000:ff:1f.7/clean");
  const auto unknown_template = client.expect(
      404, "POST", "/v1/vms", R"({"name": "oas-x", "template": "no-such-template", "request_id": "req-no-template"})");
  CHECK(field(unknown_template, "code") == "not_found");
  // A path the API does not have: no operation to check against, so the problem schema directly.
  const auto missing = client.send("GET", "/v1/no-such-resource");
  CHECK(missing.status == 404);
  CHECK(media_type(missing.content_type) == "application/problem+json");
  const auto mismatches = shipped_document().validate_named("Problem", json::parse(missing.body));
  CHECK_MESSAGE(mismatches.empty(), joined(mismatches));
}

TEST_CASE("documented errors: 400 names the field") {
  Client client;
  struct Case {
    std::string method, target, body, field;
  };
  const std::vector<Case> cases = {
      {"POST", "/v1/vms", R"({"name": "a", "template": "t", "memory": 1})", "memory"},
      {"POST", "/v1/vms", R"({"name": 5, "template": "t"})", "name"},
      {"POST", "/v1/vms", R"({"template": "t"})", "name"},
      {"POST", "/v1/vms", R"({"name": "a", "template": "t", "macs": ["zz"]})", "macs[0]"},
      {"POST", "/v1/vms", "{not json", "body"},
      {"POST", "/v1/vms", "[1, 2]", "body"},
      {"POST", "/v1/vms/oas-x/stop", R"({"force": "yes"})", "force"},
      {"POST", "/v1/vms/oas-x/start", R"({"now": true})", "now"},
      {"DELETE", "/v1/vms/oas-x", R"({"purge": true})", "purge"},
      {"GET", "/v1/vms?state=running", "", "state"},
      {"GET", "/v1/devices?role=toaster", "", "role"},
      {"GET", "/v1/devices?free=maybe", "", "free"},
      {"GET", "/v1/devices/not-an-address", "", "address"},
      {"GET", "/v1/devices/not-an-address/history", "", "address"},
      {"POST", "/v1/devices/not-an-address/clean", "", "address"},
      {"POST", "/v1/devices/0000:00:00.0/clean", R"({"now": true})", "now"},
      {"GET", "/v1/vms/.hidden", "", "name"},
  };
  for (const auto& c : cases) {
    CAPTURE(c.method + " " + c.target + " " + c.body);
    const auto problem = client.expect(400, c.method, c.target, c.body);
    CHECK(field(problem, "code") == "invalid_argument");
    CHECK(field(problem, "field") == c.field);
  }
}

TEST_CASE("documented errors: 415 for a body that is not JSON, 409 for a conflicting replay") {
  Client client;
  const auto media = client.expect(415, "POST", "/v1/vms", R"({"name": "a", "template": "t"})", "text/plain");
  CHECK(field(media, "field") == "Content-Type");
  client.expect(415, "POST", "/v1/vms/oas-x/stop", R"({"force": true})", "application/x-www-form-urlencoded");

  const std::string image = client.boot_image();
  const auto first = client.expect(202, "POST", "/v1/vms", create_body("oas-replay", "req-replay", image));
  const auto again = client.expect(202, "POST", "/v1/vms", create_body("oas-replay", "req-replay", image));
  CHECK(field(again, "id") == field(first, "id"));
  const auto conflict = client.expect(409, "POST", "/v1/vms", create_body("oas-other", "req-replay", image));
  CHECK(field(conflict, "code") == "conflict");
  client.wait_for(field(first, "id"));
}

TEST_CASE("documented errors over TCP: 401 without a token, 403 for a reader's change") {
  Client client;
  ClientRequest bare;
  bare.target = "/v1/vms";
  const auto unauthenticated = observed(client.fixture().tcp_request(bare));
  CHECK(unauthenticated.status == 401);
  auto mismatches = shipped_document().check_response("GET", "/v1/vms", unauthenticated);
  CHECK_MESSAGE(mismatches.empty(), joined(mismatches));

  const auto reader_get = client.send("GET", "/v1/status", "", "", ApiFixture::kReaderToken);
  CHECK(reader_get.status == 200);
  mismatches = shipped_document().check_response("GET", "/v1/status", reader_get);
  CHECK_MESSAGE(mismatches.empty(), joined(mismatches));

  for (const auto& [method, target] : std::vector<std::pair<std::string, std::string>>{
           {"POST", "/v1/vms"}, {"DELETE", "/v1/vms/oas-x"}, {"POST", "/v1/vms/oas-x/stop"}}) {
    const std::string request = method + " " + target;  // CAPTURE's lambda cannot capture a binding
    CAPTURE(request);
    const auto forbidden =
        client.send(method, target, create_body("oas-x", "r", ""), "application/json", ApiFixture::kReaderToken);
    CHECK(forbidden.status == 403);
    mismatches = shipped_document().check_response(method, target, forbidden);
    CHECK_MESSAGE(mismatches.empty(), joined(mismatches));
  }
}

TEST_CASE("405 answers with Allow and a problem, as x-hostagent-method-not-allowed says") {
  Client client;
  const auto& spec = shipped_document().root().at("x-hostagent-method-not-allowed").as_object();
  const auto& schema = spec.at("content").at("application/problem+json").at("schema");
  for (const auto& [method, target] : std::vector<std::pair<std::string, std::string>>{
           {"PUT", "/v1/vms"}, {"DELETE", "/v1/host"}, {"POST", "/v1/vms/oas-x/domain-xml"}, {"PATCH", "/v1/events"}}) {
    const std::string request = method + " " + target;  // CAPTURE's lambda cannot capture a binding
    CAPTURE(request);
    const auto response = client.send(method, target);
    CHECK(response.status == 405);
    CHECK(media_type(response.content_type) == "application/problem+json");
    CHECK(response.headers.contains("allow"));
    const auto mismatches = shipped_document().validate(schema, json::parse(response.body));
    CHECK_MESSAGE(mismatches.empty(), joined(mismatches));
  }
}

// The paths of the document with their parameters filled in.
std::string instantiate(const std::string& path_template) {
  static const std::vector<std::pair<std::string, std::string>> kValues = {
      {"{name}", "oas-probe"}, {"{address}", "0000:00:00.0"}, {"{id}", "op-1"}};
  std::string path = path_template;
  for (const auto& [parameter, value] : kValues) {
    for (size_t at; (at = path.find(parameter)) != std::string::npos;) path.replace(at, parameter.size(), value);
  }
  return path;
}

// Whether the document has METHOD for some path template that the concrete path matches.
bool documented_for(const std::map<std::string, std::set<std::string>>& documented, const std::string& concrete,
                    const std::string& method) {
  const std::regex parameter(R"(\{[^}/]+\})");
  for (const auto& [path_template, methods] : documented) {
    const std::regex pattern("^" + std::regex_replace(path_template, parameter, "[^/]+") + "$");
    if (methods.contains(method) && std::regex_match(concrete, pattern)) return true;
  }
  return false;
}

std::set<std::string> split_allow(const std::string& allow) {
  std::set<std::string> methods;
  std::regex token("[A-Z]+");
  for (std::sregex_iterator it(allow.begin(), allow.end(), token), end; it != end; ++it) methods.insert(it->str());
  return methods;
}

TEST_CASE("every documented path is served with exactly the documented methods") {
  Client client;
  std::map<std::string, std::set<std::string>> documented;
  for (const auto& operation : shipped_document().operations()) documented[operation.path].insert(operation.method);
  std::vector<std::string> problems;
  for (const auto& [path_template, methods] : documented) {
    // A method no route takes: the server answers 405 with every method the path has, or 404 when
    // it does not know the path at all.
    const auto response = client.send("TRACE", instantiate(path_template));
    if (response.status == 404) {
      problems.push_back(path_template + ": documented, but the server has no such path (404)");
      continue;
    }
    if (response.status != 405 || !response.headers.contains("allow")) {
      problems.push_back(path_template + ": TRACE answered " + std::to_string(response.status) +
                         ", not 405 with Allow");
      continue;
    }
    const auto served = split_allow(response.headers.at("allow"));
    for (const auto& method : methods) {
      if (!served.contains(method)) problems.push_back(method + " " + path_template + ": documented, not served");
    }
    // Allow lists every route the concrete path matches: /v1/templates/validate is also
    // /v1/templates/{name}, whose GET the document has.
    const std::string concrete = instantiate(path_template);
    for (const auto& method : served) {
      // HEAD is GET without the body wherever GET is served, as the document's description says.
      const std::string read = method == "HEAD" ? "GET" : method;
      if (!documented_for(documented, concrete, read)) {
        problems.push_back(method + " " + concrete + ": served, not documented");
      }
    }
  }
  CHECK_MESSAGE(problems.empty(), joined(problems));
}

// The server's route table, read from its source: parse_request keeps it private. A route there is
// "/v1/vms/{}" with a method; the document's parameters become {} to compare.
std::set<std::string> routes_in_server_source() {
  const auto source = read_text_file(hostagent::testing::source_dir() / "api/rest/src/rest_commands.cpp");
  const std::regex route(R"re(\{"(/v1/[^"]*)", "([A-Z]+)",)re");
  std::set<std::string> routes;
  for (std::sregex_iterator it(source.begin(), source.end(), route), end; it != end; ++it) {
    routes.insert((*it)[2].str() + " " + (*it)[1].str());
  }
  return routes;
}

TEST_CASE("every route the server has is documented") {
  const auto served = routes_in_server_source();
  REQUIRE_MESSAGE(served.size() >= 20,
                  "the route table of api/rest/src/rest_commands.cpp was not found; "
                  "update routes_in_server_source() to its new form");
  std::set<std::string> documented;
  const std::regex parameter(R"(\{[^}]+\})");
  for (const auto& operation : shipped_document().operations()) {
    documented.insert(operation.method + " " + std::regex_replace(operation.path, parameter, "{}"));
  }
  std::vector<std::string> undocumented, unserved;
  std::set_difference(served.begin(), served.end(), documented.begin(), documented.end(),
                      std::back_inserter(undocumented));
  std::set_difference(documented.begin(), documented.end(), served.begin(), served.end(), std::back_inserter(unserved));
  CHECK_MESSAGE(undocumented.empty(), "served, not in api/openapi.yaml:" << joined(undocumented));
  CHECK_MESSAGE(unserved.empty(), "in api/openapi.yaml, not in the server's route table:" << joined(unserved));
}

struct Frame {
  std::string event, data;
};

Frame parse_frame(const std::string& text) {
  Frame frame;
  std::istringstream lines(text);
  std::string line;
  while (std::getline(lines, line)) {
    if (line.rfind("event: ", 0) == 0) frame.event = line.substr(7);
    if (line.rfind("data: ", 0) == 0) frame.data = line.substr(6);
  }
  return frame;
}

// The frames of an event stream's text that are complete (followed by a blank line).
std::vector<std::string> complete_frames(const std::string& text) {
  std::vector<std::string> frames;
  size_t start = 0;
  for (size_t end; (end = text.find("\n\n", start)) != std::string::npos; start = end + 2) {
    frames.push_back(text.substr(start, end - start));
  }
  return frames;
}

// The stream's head as a response the document can check (it never ends, so it has no body here).
ObservedResponse stream_head(const EventStreamReader& reader) {
  ObservedResponse head;
  head.status = reader.status();
  head.content_type = reader.content_type();
  return head;
}

TEST_CASE("the event stream is text/event-stream and every event's data matches its schema") {
  Client client;
  auto reader = EventStreamReader::open(client.fixture().socket_path());
  REQUIRE_MESSAGE(reader.ok(), reader.error().message);
  const auto head = stream_head(**reader);
  const auto mismatches = shipped_document().check_response("GET", "/v1/events", head);
  CHECK_MESSAGE(mismatches.empty(), joined(mismatches));
  CHECK(head.status == 200);

  create_vm(client, "oas-events");
  client.wait_for(field(client.expect(202, "DELETE", "/v1/vms/oas-events"), "id"));
  const auto gpu = quarantine_a_gpu(client, "oas-faulted");
  client.expect(200, "DELETE", "/v1/quarantine/" + gpu);
  client.expect(202, "POST", "/v1/devices/" + gpu + "/clean");
  client.expect(200, "POST", "/v1/host/cordon", R"({"reason":"oas events"})");
  client.expect(200, "POST", "/v1/host/uncordon");

  // Until a whole frame of each kind has come: a frame's event line can arrive before its data.
  const auto text = (*reader)->read_until(
      [](const std::string& so_far) {
        std::multiset<std::string> events;
        for (const auto& frame : complete_frames(so_far)) events.insert(parse_frame(frame).event);
        return events.count("vm") != 0 && events.count("operation") != 0 && events.count("device") != 0 &&
               events.count("quarantine") == 2 &&  // quarantined, then cleared
               events.count("cleaning") != 0 && events.count("maintenance") == 2;
      },
      std::chrono::seconds(30));
  const auto& schemas =
      shipped_document().root().at("paths").at("/v1/events").at("get").at("x-hostagent-event-schemas").as_object();
  std::set<std::string> seen;
  for (const auto& text_frame : complete_frames(text)) {
    if (text_frame.empty() || text_frame[0] == ':') continue;  // a comment: keepalive
    const Frame frame = parse_frame(text_frame);
    CAPTURE(text_frame);
    REQUIRE(schemas.contains(frame.event));
    const auto errors = shipped_document().validate(schemas.at(frame.event), json::parse(frame.data));
    CHECK_MESSAGE(errors.empty(), joined(errors));
    seen.insert(frame.event);
  }
  CHECK(seen == std::set<std::string>{"vm", "operation", "device", "quarantine", "cleaning", "maintenance"});
}

TEST_CASE("every documented operation was answered with success somewhere in this suite") {
  // The same requests as the cases above, in one run, so the coverage is of this process.
  Client client;
  client.expect(200, "GET", "/v1/health/live");
  client.expect(200, "GET", "/v1/health/ready");
  client.expect(200, "GET", "/v1/status");
  client.expect(200, "GET", "/v1/host");
  client.expect(200, "GET", "/v1/host/capacity");
  const auto devices = client.expect(200, "GET", "/v1/devices");
  client.expect(200, "GET", "/v1/devices/" + field(devices.as_object().at("devices").as_array().front(), "address"));
  client.expect(200, "GET", "/v1/templates");
  client.expect(200, "GET", "/v1/templates/" + std::string(kTemplate));
  client.expect(200, "POST", "/v1/templates/validate", shipped_template(kTemplate), "application/yaml");
  create_vm(client, "oas-cover");
  client.expect(200, "GET", "/v1/vms");
  const auto vm = client.expect(200, "GET", "/v1/vms/oas-cover");
  // A device a VM holds is cleaned when the VM lets it go, not before.
  const auto& held = vm.as_object().at("record").at("holds").at("devices").as_array();
  REQUIRE_FALSE(held.empty());
  const auto conflict = client.expect(409, "POST", "/v1/devices/" + std::string(held.front().as_string()) + "/clean");
  CHECK(field(conflict, "code") == "conflict");
  client.expect(200, "GET", "/v1/vms/oas-cover/domain-xml");
  client.expect(200, "GET", "/v1/vms/oas-cover/nccl-topology");
  client.expect(200, "GET", "/v1/vms/oas-cover/stats");
  client.expect(404, "GET", "/v1/vms/no-such-vm/stats");
  client.expect(200, "GET", "/v1/vms/oas-cover/console/log?tail=20");
  client.expect(400, "GET", "/v1/vms/oas-cover/console/log?tail=0");
  client.expect(404, "GET", "/v1/vms/no-such-vm/console/log");
  // The console without the upgrade is 426 as documented; its 101 needs a driver with consoles (see
  // below).
  client.expect(426, "GET", "/v1/vms/oas-cover/console");
  for (const char* action : {"stop", "start", "reboot"}) {
    client.wait_for(field(client.expect(202, "POST", std::string("/v1/vms/oas-cover/") + action), "id"));
  }
  client.expect(200, "GET", "/v1/vms/oas-cover/starts");
  const auto deleting = client.expect(202, "DELETE", "/v1/vms/oas-cover");
  client.expect(200, "GET", "/v1/operations/" + field(deleting, "id"));
  client.wait_for(field(deleting, "id"));
  client.expect(200, "GET", "/v1/operations");
  client.expect(200, "GET", "/v1/metrics");
  // Maintenance: a cordon refuses a create, a drain is begun (202) and refuses a cordon, the
  // uncordon takes creates again.
  client.expect(200, "GET", "/v1/host/maintenance");
  client.expect(400, "POST", "/v1/host/cordon", "{}");
  client.expect(200, "POST", "/v1/host/cordon", R"({"reason":"oas cover"})");
  client.expect(409, "POST", "/v1/vms", create_body("oas-cordoned", "req-oas-cordoned", client.boot_image()));
  client.expect(400, "POST", "/v1/host/drain", R"({"reason":"oas drain","grace_seconds":0})");
  client.expect(202, "POST", "/v1/host/drain", R"({"reason":"oas drain","grace_seconds":5})");
  client.expect(409, "POST", "/v1/host/cordon", R"({"reason":"oas again"})");
  client.expect(200, "POST", "/v1/host/uncordon");
  const auto gpu = quarantine_a_gpu(client, "oas-faulted");
  client.expect(200, "GET", "/v1/devices/" + gpu);
  client.expect(200, "DELETE", "/v1/quarantine/" + gpu);
  client.expect(404, "DELETE", "/v1/quarantine/" + gpu);
  client.expect(202, "POST", "/v1/devices/" + gpu + "/clean");
  client.expect(200, "GET", "/v1/cleaning");
  client.expect(200, "GET", "/v1/devices/" + gpu + "/history");
  client.expect(200, "GET", "/v1/devices/" + gpu);
  // The event stream's head, read from the socket (it never ends on its own).
  auto reader = EventStreamReader::open(client.fixture().socket_path());
  REQUIRE_MESSAGE(reader.ok(), reader.error().message);
  const auto head = stream_head(**reader);
  CHECK(head.status == 200);
  CHECK(media_type(head.content_type) == "text/event-stream");

  std::vector<std::string> missed;
  for (const auto& operation : shipped_document().operations()) {
    const std::string key = operation.method + " " + operation.path;
    const bool events_served = key == "GET /v1/events" && head.status == 200;
    // libvirt's test driver has no consoles: the console's 101 is shown against a real libvirtd
    // (daemon_libvirtd_tests) and over the fake service (api_routes_tests).
    const bool needs_console = key == "GET /v1/vms/{name}/console";
    if (!events_served && !needs_console && !client.succeeded().contains(key)) missed.push_back(key);
  }
  CHECK_MESSAGE(missed.empty(), "documented operations never answered with success:" << joined(missed));
}

}  // namespace
}  // namespace hostagent::testing::openapi
