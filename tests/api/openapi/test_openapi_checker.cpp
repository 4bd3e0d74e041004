// The OpenAPI checker's own tests: schemas with values that must pass and values that must fail,
// so the conformance suite's silence means something.
#include <doctest/doctest.h>

#include <boost/json.hpp>

#include <algorithm>

#include "openapi_checker.hpp"
#include "test_support.hpp"

namespace hostagent::testing::openapi {
namespace {

namespace json = boost::json;

// A small document: a VM-like object with nested arrays, a nullable field, a $ref, an enum and a
// oneOf, and one operation.
constexpr const char* kDocument = R"(
openapi: 3.0.3
info: {title: t, version: "1"}
paths:
  /v1/things:
    get:
      responses:
        "200":
          description: ok
          content:
            application/json:
              schema: {type: array, items: {$ref: "#/components/schemas/Thing"}}
  /v1/things/{name}:
    get:
      responses:
        "200":
          description: ok
          content:
            application/json:
              schema: {$ref: "#/components/schemas/Thing"}
        "404":
          description: gone
          content:
            application/problem+json:
              schema: {$ref: "#/components/schemas/Problem"}
    post:
      responses:
        "202":
          description: accepted
          headers:
            Location: {required: true, schema: {type: string}}
          content:
            application/json:
              schema: {$ref: "#/components/schemas/Thing"}
  /v1/things/special:
    get:
      responses:
        "200":
          description: text
          content:
            text/plain:
              schema: {type: string}
components:
  schemas:
    Problem:
      type: object
      required: [status, code]
      properties:
        status: {type: integer}
        code: {type: string}
    Holds:
      type: object
      additionalProperties: false
      required: [devices]
      properties:
        devices: {type: array, items: {type: string, pattern: "^[0-9a-f]{4}:"}}
        hugepages_by_node: {type: object, additionalProperties: {type: integer, minimum: 0}}
    Thing:
      type: object
      additionalProperties: false
      required: [name, state, holds, error]
      properties:
        name: {type: string, minLength: 1}
        state: {type: string, enum: [running, "shut off"]}
        count: {type: integer}
        ratio: {type: number}
        managed: {type: boolean}
        holds: {$ref: "#/components/schemas/Holds"}
        error:
          nullable: true
          allOf: [{$ref: "#/components/schemas/Problem"}]
        id:
          oneOf: [{type: string}, {type: integer}]
)";

OpenApiDocument document() {
  auto loaded = OpenApiDocument::parse(kDocument, "test.yaml");
  REQUIRE_MESSAGE(loaded.ok(), (loaded.ok() ? "" : loaded.error().message));
  return std::move(loaded).value();
}

json::value good_thing() {
  return json::parse(R"({"name": "a", "state": "shut off", "count": 3, "ratio": 0.5, "managed": true,
    "holds": {"devices": ["0000:17:00.0"], "hugepages_by_node": {"0": 4}}, "error": null, "id": 7})");
}

// The mismatches of `value` against Thing, after `change` edits a copy of the good value.
template <typename Change>
std::vector<std::string> after(Change change) {
  auto value = good_thing();
  change(value.as_object());
  return document().validate_named("Thing", value);
}

// Whether any one mismatch names `text`.
bool mentions(const std::vector<std::string>& mismatches, const std::string& text) {
  return std::any_of(mismatches.begin(), mismatches.end(), [&](const std::string& m) { return contains(m, text); });
}

TEST_CASE("a conforming value has no mismatches") {
  const auto mismatches = document().validate_named("Thing", good_thing());
  CHECK_MESSAGE(mismatches.empty(), (mismatches.empty() ? "" : mismatches.front()));
}

TEST_CASE("a missing required property is reported at its path") {
  const auto mismatches = after([](json::object& o) { o.erase("state"); });
  REQUIRE(mismatches.size() == 1);
  CHECK(mismatches[0] == "$.state: required, missing");
}

TEST_CASE("a wrong type is reported with what was expected and what came") {
  const auto mismatches = after([](json::object& o) { o["count"] = "3"; });
  REQUIRE(mismatches.size() == 1);
  CHECK(mismatches[0].find("$.count: expected integer, got string") == 0);
  CHECK(!after([](json::object& o) { o["count"] = 2.5; }).empty());  // a fraction is not an integer
  CHECK(after([](json::object& o) { o["ratio"] = 2; }).empty());     // an integer is a number
  CHECK(!after([](json::object& o) { o["managed"] = 1; }).empty());
}

TEST_CASE("null passes only where the schema is nullable") {
  CHECK(mentions(after([](json::object& o) { o["name"] = nullptr; }), "$.name: expected string (not nullable)"));
  CHECK(after([](json::object& o) { o["error"] = nullptr; }).empty());
  CHECK(after([](json::object& o) { o["error"] = json::object{{"status", 500}, {"code", "internal"}}; }).empty());
  CHECK(mentions(after([](json::object& o) { o["error"] = json::object{{"status", 500}}; }), "$.error.code"));
}

TEST_CASE("an unknown property fails under additionalProperties false, naming the known ones") {
  const auto mismatches = after([](json::object& o) { o["memory"] = 1; });
  REQUIRE(mismatches.size() == 1);
  CHECK(mismatches[0].find("$.memory: not in the schema") == 0);
  CHECK(mismatches[0].find("name, state") != std::string::npos);
}

TEST_CASE("nested arrays and maps are checked element by element with their paths") {
  CHECK(mentions(after([](json::object& o) {
                   o["holds"].as_object()["devices"] = json::array{"0000:17:00.0", 5};
                 }),
                 "$.holds.devices[1]: expected string"));
  CHECK(mentions(after([](json::object& o) { o["holds"].as_object()["devices"] = json::array{"17:00.0"}; }),
                 "$.holds.devices[0]: \"17:00.0\" does not match pattern"));
  CHECK(mentions(after([](json::object& o) {
                   o["holds"].as_object()["hugepages_by_node"] = json::object{{"1", -1}};
                 }),
                 "$.holds.hugepages_by_node[\"1\"]: -1 is below minimum 0"));
  CHECK(mentions(after([](json::object& o) { o["holds"].as_object()["extra"] = true; }), "$.holds.extra"));
}

TEST_CASE("enum, minLength and oneOf constrain values") {
  CHECK(mentions(after([](json::object& o) { o["state"] = "paused"; }), "$.state: \"paused\" is not one of"));
  CHECK(mentions(after([](json::object& o) { o["name"] = ""; }), "$.name: shorter than minLength"));
  CHECK(after([](json::object& o) { o["id"] = "op-1"; }).empty());
  CHECK(mentions(after([](json::object& o) { o["id"] = true; }), "$.id: matches none of oneOf"));
}

TEST_CASE("a oneOf that more than one branch matches fails") {
  const auto doc = document();
  const auto schema = json::parse(R"({"oneOf": [{"type": "integer"}, {"type": "number"}]})");
  CHECK(doc.validate(schema, json::value(1.5)).empty());
  CHECK(mentions(doc.validate(schema, json::value(1)), "matches 2 branches of oneOf"));
}

TEST_CASE("an array at the top is checked item by item") {
  const auto doc = document();
  const auto& schema = doc.find("/v1/things", "GET")->responses.at(200).content.at("application/json");
  CHECK(doc.validate(schema, json::array{good_thing()}).empty());
  CHECK(mentions(doc.validate(schema, json::array{good_thing(), json::object{}}), "$[1].name: required, missing"));
  CHECK(mentions(doc.validate(schema, json::object{}), "$: expected array, got object"));
}

TEST_CASE("paths match templates, literal segments first") {
  const auto doc = document();
  CHECK(doc.match_path("/v1/things/a") == "/v1/things/{name}");
  CHECK(doc.match_path("/v1/things/special") == "/v1/things/special");
  CHECK(doc.match_path("/v1/things") == "/v1/things");
  CHECK_FALSE(doc.match_path("/v1/things/a/b").has_value());
  CHECK_FALSE(doc.match_path("/v1/other").has_value());
}

TEST_CASE("responses are checked for status, media type, headers and body") {
  const auto doc = document();
  const std::string body = json::serialize(good_thing());
  CHECK(doc.check_response("GET", "/v1/things/a", {200, "application/json; charset=utf-8", {}, body}).empty());
  CHECK(mentions(doc.check_response("GET", "/v1/things/a", {500, "application/problem+json", {}, "{}"}),
                 "status 500 is not documented (documented: 200 404)"));
  CHECK(mentions(doc.check_response("GET", "/v1/things/a", {404, "application/json", {}, "{}"}),
                 "media type `application/json` is not documented"));
  CHECK(mentions(doc.check_response("GET", "/v1/things/a", {404, "application/problem+json", {}, R"({"status": 404})"}),
                 "$.code: required, missing"));
  CHECK(mentions(doc.check_response("GET", "/v1/things/a", {200, "application/json", {}, "{not json"}),
                 "body is not JSON"));
  CHECK(mentions(doc.check_response("POST", "/v1/things/a", {202, "application/json", {}, body}),
                 "required header `location` missing"));
  CHECK(doc.check_response("POST", "/v1/things/a", {202, "application/json", {{"location", "/x"}}, body}).empty());
  CHECK(mentions(doc.check_response("DELETE", "/v1/things/a", {200, "", {}, ""}), "the document has no DELETE"));
  CHECK(doc.check_response("GET", "/v1/things/special", {200, "text/plain; version=0.0.4", {}, "x 1\n"}).empty());
}

TEST_CASE("plain YAML scalars resolve by the core schema and quoted ones stay strings") {
  const auto value =
      yaml_to_json("a: 1\nb: \"1\"\nc: true\nd: 'true'\ne: ~\nf: 1.5\ng: text\nh: 18446744073709551615\n", "t.yaml");
  REQUIRE(value.ok());
  const auto& o = value->as_object();
  CHECK(o.at("a").is_int64());
  CHECK(o.at("b").as_string() == "1");
  CHECK(o.at("c").as_bool());
  CHECK(o.at("d").as_string() == "true");
  CHECK(o.at("e").is_null());
  CHECK(o.at("f").as_double() == 1.5);
  CHECK(o.at("g").as_string() == "text");
  CHECK(o.at("h").is_uint64());
}

TEST_CASE("broken YAML is an error with line and column") {
  const auto value = yaml_to_json("a: [1, 2\nb: 3\n", "broken.yaml");
  REQUIRE_FALSE(value.ok());
  CHECK(value.error().message.find("broken.yaml:") == 0);
}

TEST_CASE("keywords the checker does not implement and dangling refs are found") {
  const auto doc = OpenApiDocument::parse(R"(
paths:
  /x:
    get:
      responses:
        "200":
          description: ok
          content:
            application/json:
              schema: {type: array, uniqueItems: true, items: {$ref: "#/components/schemas/Nope"}}
components:
  schemas:
    A: {type: object, properties: {b: {type: string, not: {enum: [x]}, description: fine}}}
)",
                                          "t.yaml");
  REQUIRE(doc.ok());
  const auto unsupported = doc->unsupported_keywords();
  CHECK(mentions(unsupported, "`uniqueItems`"));
  CHECK(mentions(unsupported, "$.components.schemas.A.properties.b: `not`"));
  CHECK_FALSE(mentions(unsupported, "description"));
  const auto dangling = doc->dangling_refs();
  REQUIRE(dangling.size() == 1);
  CHECK(dangling[0].find("#/components/schemas/Nope") != std::string::npos);
  CHECK(
      mentions(doc->validate(doc->find("/x", "GET")->responses.at(200).content.at("application/json"), json::array{1}),
               "does not resolve"));
}

TEST_CASE("a document with a response range the checker cannot check is refused") {
  const auto doc = OpenApiDocument::parse("paths: {/x: {get: {responses: {4XX: {description: x}}}}}\n", "t.yaml");
  REQUIRE_FALSE(doc.ok());
  CHECK(doc.error().message.find("4XX") != std::string::npos);
}

}  // namespace
}  // namespace hostagent::testing::openapi
