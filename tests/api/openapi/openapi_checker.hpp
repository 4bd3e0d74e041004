// tests/api/openapi/openapi_checker: reads api/openapi.yaml (yaml-cpp) and checks JSON values and
// HTTP responses against it. It implements the subset of OpenAPI 3.0 schemas the document uses —
// $ref, type, nullable, properties, required, additionalProperties, items, enum, oneOf, anyOf,
// allOf, pattern, minimum, maximum, minItems — and says which other keywords a document uses, so a
// schema cannot silently ask for a check this code does not make. `format` and annotations are
// ignored. Every mismatch names the JSON path where it is ("$.record.holds.devices[2]").
#pragma once

#include <boost/json/value.hpp>
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "hostagent/common/result.hpp"

namespace hostagent::testing::openapi {

struct ResponseSpec {
  unsigned status = 0;
  std::map<std::string, boost::json::value> content;  // media type → schema (null when none given)
  std::vector<std::string> required_headers;          // lower-case names
};

struct OperationSpec {
  std::string path;    // the template: "/v1/vms/{name}"
  std::string method;  // upper case: "GET"
  std::map<unsigned, ResponseSpec> responses;
  std::vector<std::string> request_media_types;  // empty without a requestBody
  std::map<std::string, boost::json::value> request_schemas;
};

// A whole HTTP response, as the conformance tests see it.
struct ObservedResponse {
  unsigned status = 0;
  std::string content_type;                    // as sent, parameters included
  std::map<std::string, std::string> headers;  // lower-case names
  std::string body;
};

class OpenApiDocument {
 public:
  static Result<OpenApiDocument> load_file(const std::filesystem::path& file);
  // `source` names the text in errors.
  static Result<OpenApiDocument> parse(const std::string& yaml, const std::string& source);

  const boost::json::value& root() const { return root_; }
  const std::vector<OperationSpec>& operations() const { return operations_; }

  // The path template a concrete path matches ("/v1/vms/a" → "/v1/vms/{name}"); a literal segment
  // wins over a parameter ("/v1/templates/validate" is not "/v1/templates/{name}").
  std::optional<std::string> match_path(const std::string& path) const;
  const OperationSpec* find(const std::string& path_template, const std::string& method) const;

  // The mismatches of `value` against `schema` (empty when it conforms), each "PATH: what".
  std::vector<std::string> validate(const boost::json::value& schema, const boost::json::value& value) const;
  // The same against components/schemas/NAME.
  std::vector<std::string> validate_named(const std::string& name, const boost::json::value& value) const;

  // A response to METHOD on a concrete path: its status must be one the operation lists, its media
  // type one listed for that status, its required headers present, and a JSON body must match.
  std::vector<std::string> check_response(const std::string& method, const std::string& path,
                                          const ObservedResponse& response) const;

  // Every schema keyword the checker does not implement (nor knows to be an annotation), with where.
  std::vector<std::string> unsupported_keywords() const;
  // Every "$ref" that does not resolve, with where.
  std::vector<std::string> dangling_refs() const;

 private:
  const boost::json::value* resolve(const std::string& ref) const;
  void check(const boost::json::value& schema, const boost::json::value& value, const std::string& path,
             std::vector<std::string>& out, int depth) const;
  void check_object(const boost::json::object& schema, const boost::json::object& value, const std::string& path,
                    std::vector<std::string>& out, int depth) const;
  Status index_operations();

  boost::json::value root_;
  std::vector<OperationSpec> operations_;
};

// YAML → JSON with YAML 1.2's core schema for plain scalars (null, booleans, integers, floats);
// quoted scalars stay strings. Public for its tests.
Result<boost::json::value> yaml_to_json(const std::string& yaml, const std::string& source);

// The media type without parameters, lower case: "application/json; charset=utf-8" → "application/json".
std::string media_type(const std::string& content_type);

// api/openapi.yaml of the source tree, loaded once; a document that does not load fails the test
// that asked for it.
const OpenApiDocument& shipped_document();

// Items one per line, indented, for a failure message.
std::string joined(const std::vector<std::string>& items);

}  // namespace hostagent::testing::openapi
