// api/openapi.yaml on its own: it loads, uses only what the checker checks, covers every route of
// docs/api.md and no other, lists the error statuses each route can answer, and agrees with the
// examples docs/api.md shows.
#include <doctest/doctest.h>

#include <boost/json.hpp>
#include <regex>
#include <set>
#include <sstream>

#include "hostagent/api/rest_commands.hpp"
#include "hostagent/common/names.hpp"
#include "openapi_checker.hpp"
#include "test_support.hpp"

namespace hostagent::testing::openapi {
namespace {

namespace json = boost::json;

std::string api_md() {
  return read_text_file(hostagent::testing::source_dir() / "docs/api.md");
}

// "GET /v1/vms/{name}" for every route in docs/api.md's resource table; "POST /v1/vms/{name}/start,
// /stop, /reboot" counts three.
std::set<std::string> routes_in_api_md() {
  std::set<std::string> routes;
  std::istringstream lines(api_md());
  std::string line;
  const std::regex route_cell(R"(^\| `(GET|POST|PUT|PATCH|DELETE) (/v1/[^`]*)`((, `/[a-z-]+`)*))");
  const std::regex extra(R"(`(/[a-z-]+)`)");
  while (std::getline(lines, line)) {
    std::smatch match;
    if (!std::regex_search(line, match, route_cell)) continue;
    routes.insert(match[1].str() + " " + match[2].str());
    const std::string base = match[2].str().substr(0, match[2].str().rfind('/'));
    const std::string more = match[3].str();
    for (std::sregex_iterator it(more.begin(), more.end(), extra), end; it != end; ++it) {
      routes.insert(match[1].str() + " " + base + (*it)[1].str());
    }
  }
  return routes;
}

std::set<std::string> routes_in_document() {
  std::set<std::string> routes;
  for (const auto& operation : shipped_document().operations()) routes.insert(operation.method + " " + operation.path);
  return routes;
}

// The production rule (api::needs_operator) asked of the operation, its path's {names} filled in.
bool needs_operator(const OperationSpec& spec) {
  api::HttpRequest request;
  request.method = spec.method;
  request.path = std::regex_replace(spec.path, std::regex(R"(\{[a-z_]+\})"), "x");
  return api::needs_operator(request);
}

const json::object& operation_object(const OperationSpec& spec) {
  std::string method = spec.method;
  std::transform(method.begin(), method.end(), method.begin(), ::tolower);
  return shipped_document().root().at("paths").at(spec.path).at(method).as_object();
}

TEST_CASE("the document loads, every $ref resolves and it uses only keywords the checker checks") {
  const auto& doc = shipped_document();
  CHECK(doc.root().at("openapi").as_string() == "3.0.3");
  const auto dangling = doc.dangling_refs();
  CHECK_MESSAGE(dangling.empty(), "dangling $ref:" << joined(dangling));
  const auto unsupported = doc.unsupported_keywords();
  CHECK_MESSAGE(unsupported.empty(), "keywords the checker ignores:" << joined(unsupported));
}

TEST_CASE("the document has every route of docs/api.md and no other") {
  const auto from_md = routes_in_api_md();
  REQUIRE_MESSAGE(from_md.size() >= 20, "docs/api.md's resource table was not found (" << from_md.size() << " routes)");
  const auto in_document = routes_in_document();
  std::vector<std::string> missing, extra;
  std::set_difference(from_md.begin(), from_md.end(), in_document.begin(), in_document.end(),
                      std::back_inserter(missing));
  std::set_difference(in_document.begin(), in_document.end(), from_md.begin(), from_md.end(),
                      std::back_inserter(extra));
  CHECK_MESSAGE(missing.empty(), "in docs/api.md, not in api/openapi.yaml:" << joined(missing));
  CHECK_MESSAGE(extra.empty(), "in api/openapi.yaml, not in docs/api.md:" << joined(extra));
}

TEST_CASE("every operation has a unique id, a tag and the role it needs") {
  std::set<std::string> ids;
  for (const auto& spec : shipped_document().operations()) {
    CAPTURE(spec.method + " " + spec.path);
    const auto& op = operation_object(spec);
    REQUIRE(op.contains("operationId"));
    CHECK(ids.insert(std::string(op.at("operationId").as_string())).second);
    CHECK(op.contains("tags"));
    REQUIRE(op.contains("x-hostagent-role"));
    CHECK(op.at("x-hostagent-role").as_string() == (needs_operator(spec) ? "operator" : "reader"));
  }
}

TEST_CASE("every error response of every operation is a problem") {
  for (const auto& spec : shipped_document().operations()) {
    for (const auto& [status, response] : spec.responses) {
      if (status < 400) continue;
      const std::string where = spec.method + " " + spec.path + " " + std::to_string(status);
      CAPTURE(where);
      REQUIRE(response.content.size() == 1);
      REQUIRE(response.content.contains("application/problem+json"));
      const auto& schema = response.content.at("application/problem+json");
      CHECK(json::serialize(schema) == R"({"$ref":"#/components/schemas/Problem"})");
    }
  }
}

TEST_CASE("every operation lists the error statuses its kind of route can answer") {
  for (const auto& spec : shipped_document().operations()) {
    CAPTURE(spec.method + " " + spec.path);
    auto lists = [&spec](unsigned status) { return spec.responses.contains(status); };
    // Any route: a bad query parameter, TCP without credentials, a body or headers too large (the
    // server reads and limits them before it routes), a failure, 503.
    for (unsigned status : {400U, 401U, 413U, 431U, 500U, 503U}) {
      CAPTURE(status);
      CHECK(lists(status));
    }
    CHECK(lists(403) == needs_operator(spec));  // a reader asking for a change, or a console
    // A VM, device, template or operation named in the path; a create's template.
    CHECK(lists(404) ==
          (spec.path.find('{') != std::string::npos || (spec.method == "POST" && spec.path == "/v1/vms")));
    const bool has_body = !spec.request_media_types.empty();
    CHECK(lists(415) == has_body);
    const bool success = std::any_of(spec.responses.begin(), spec.responses.end(), [](const auto& entry) {
      // 101: a WebSocket's success (the console)
      return (entry.first >= 200 && entry.first < 300) || entry.first == 101;
    });
    CHECK(success);
    // Changes are operations or a drain, answered 202, but for those that touch neither libvirt
    // nor a device: a validation, and records changed at once (a quarantine cleared, a cordon,
    // an uncordon).
    const std::set<std::string> at_once{"/v1/templates/validate", "/v1/quarantine/{address}", "/v1/host/cordon",
                                        "/v1/host/uncordon"};
    if (spec.method != "GET") CHECK(lists(202) != (at_once.count(spec.path) == 1));
  }
}

TEST_CASE("the media types are the documented ones") {
  const auto& doc = shipped_document();
  auto media = [&doc](const std::string& path) {
    const auto& content = doc.find(path, "GET")->responses.at(200).content;
    return content.size() == 1 ? content.begin()->first : std::string("(several)");
  };
  CHECK(media("/v1/events") == "text/event-stream");
  CHECK(media("/v1/metrics") == "text/plain");
  CHECK(media("/v1/vms/{name}/domain-xml") == "application/xml");
  CHECK(media("/v1/vms/{name}/nccl-topology") == "application/xml");
  CHECK(media("/v1/vms") == "application/json");
  const auto* validate = doc.find("/v1/templates/validate", "POST");
  REQUIRE(validate);
  CHECK(std::find(validate->request_media_types.begin(), validate->request_media_types.end(), "application/yaml") !=
        validate->request_media_types.end());
  CHECK(doc.find("/v1/vms", "POST")->request_media_types == std::vector<std::string>{"application/json"});
}

TEST_CASE("request bodies with JSON are closed: unknown fields are refused as the server refuses them") {
  for (const auto& spec : shipped_document().operations()) {
    const auto found = spec.request_schemas.find("application/json");
    if (found == spec.request_schemas.end()) continue;
    CAPTURE(spec.method + " " + spec.path);
    const auto mismatches = shipped_document().validate(found->second, json::object{{"memory", 1}});
    CHECK(std::any_of(mismatches.begin(), mismatches.end(),
                      [](const std::string& m) { return m.find("$.memory: not in the schema") == 0; }));
  }
}

// The ```json blocks of docs/api.md, each without a leading request line ("POST /v1/vms").
std::vector<std::string> json_examples() {
  std::vector<std::string> blocks;
  const std::string text = api_md();
  const std::regex block("```json\n([^`]*)```");
  for (std::sregex_iterator it(text.begin(), text.end(), block), end; it != end; ++it) {
    std::string body = (*it)[1].str();
    if (!body.empty() && body[0] != '{') body = body.substr(body.find('\n') + 1);
    blocks.push_back(body);
  }
  return blocks;
}

TEST_CASE("docs/api.md's examples conform: the create request, its operation and the problem") {
  const auto blocks = json_examples();
  REQUIRE(blocks.size() == 3);
  const char* schemas[] = {"CreateVmRequest", "Operation", "Problem"};
  for (size_t i = 0; i < blocks.size(); ++i) {
    CAPTURE(schemas[i]);
    const auto mismatches = shipped_document().validate_named(schemas[i], json::parse(blocks[i]));
    CHECK_MESSAGE(mismatches.empty(), joined(mismatches));
  }
}

TEST_CASE("docs/api.md's vm, device and quarantine events conform to their schemas") {
  const auto& schemas =
      shipped_document().root().at("paths").at("/v1/events").at("get").at("x-hostagent-event-schemas").as_object();
  CHECK(schemas.size() == 9);  // vm, operation, device, quarantine, cleaning, maintenance, overflow, reset, end
  const std::string text = api_md();
  const std::regex event(R"(event: (vm|device|quarantine)\ndata: (\{[^\n]*\}))");
  int checked = 0;
  for (std::sregex_iterator it(text.begin(), text.end(), event), end; it != end; ++it, ++checked) {
    const std::string name = (*it)[1].str();
    CAPTURE(name);
    REQUIRE(schemas.contains(name));
    const auto mismatches = shipped_document().validate(schemas.at(name), json::parse((*it)[2].str()));
    CHECK_MESSAGE(mismatches.empty(), joined(mismatches));
    // The schema can fail: the same event without its vm does not conform.
    auto without_vm = json::parse((*it)[2].str());
    without_vm.as_object().erase("vm");
    CHECK_FALSE(shipped_document().validate(schemas.at(name), without_vm).empty());
  }
  CHECK(checked == 3);
}

// Issue 43, defect 17: the contract named names the server refuses ("-rf", ".hidden"). Every name
// pattern in the document must accept exactly what common/names' rule accepts.
TEST_CASE("every name pattern in the document is the server's name rule, no wider and no narrower") {
  const std::string document = read_text_file(hostagent::testing::source_dir() / "api/openapi.yaml");
  const std::regex pattern_line(R"re(pattern: "(\^\[A-Za-z0-9_[^"]*)")re");
  std::set<std::string> patterns;
  for (std::sregex_iterator it(document.begin(), document.end(), pattern_line), end; it != end; ++it) {
    patterns.insert((*it)[1].str());
  }
  REQUIRE(patterns.size() >= 1);
  const std::vector<std::string> samples = {"train-0", "a",       "A_b.c-9", "_x",  std::string(64, 'a'),
                                            "-rf",     ".hidden", "",        "a b", std::string(65, 'a'),
                                            "a/b",     "..",      "é",       "a\n"};
  for (const auto& text : patterns) {
    CAPTURE(text);
    const std::regex rule(text);
    for (const auto& sample : samples) {
      CAPTURE(sample);
      CHECK(std::regex_match(sample, rule) == hostagent::is_name(sample));
    }
  }
}

}  // namespace
}  // namespace hostagent::testing::openapi
