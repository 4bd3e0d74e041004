// tests/api/openapi/openapi_checker: the OpenAPI document as JSON, its operations indexed, and the
// schema subset the document uses checked against values.
#include "openapi_checker.hpp"

#include <doctest/doctest.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <boost/json.hpp>
#include <cctype>
#include <charconv>
#include <regex>
#include <set>
#include <sstream>

#include "test_support.hpp"

namespace hostagent::testing::openapi {
namespace json = boost::json;
namespace {

constexpr int kMaxDepth = 64;  // a $ref cycle that never reaches a value stops here

const std::set<std::string> kImplemented = {
    "$ref",    "type",    "nullable", "properties", "required", "additionalProperties",
    "items",   "enum",    "oneOf",    "anyOf",      "allOf",    "pattern",
    "minimum", "maximum", "minItems", "minLength",  "maxLength"};
// Annotations: they describe, they do not constrain.
const std::set<std::string> kAnnotations = {"description", "title",     "format",     "example",     "default",
                                            "readOnly",    "writeOnly", "deprecated", "externalDocs"};

// ---- YAML → JSON -------------------------------------------------------------------------------

bool is_null_word(const std::string& s) {
  return s.empty() || s == "~" || s == "null" || s == "Null" || s == "NULL";
}

std::optional<bool> bool_word(const std::string& s) {
  if (s == "true" || s == "True" || s == "TRUE") return true;
  if (s == "false" || s == "False" || s == "FALSE") return false;
  return std::nullopt;
}

std::optional<json::value> integer_word(const std::string& s) {
  static const std::regex decimal("[-+]?[0-9]+");
  if (!std::regex_match(s, decimal)) return std::nullopt;
  const char* begin = s.data() + (s[0] == '+' ? 1 : 0);
  int64_t signed_value = 0;
  if (std::from_chars(begin, s.data() + s.size(), signed_value).ec == std::errc()) return json::value(signed_value);
  uint64_t unsigned_value = 0;
  if (std::from_chars(begin, s.data() + s.size(), unsigned_value).ec == std::errc()) return json::value(unsigned_value);
  return std::nullopt;
}

std::optional<json::value> float_word(const std::string& s) {
  static const std::regex number(R"([-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)?)");
  if (!std::regex_match(s, number)) return std::nullopt;
  return json::value(std::stod(s));
}

json::value plain_scalar(const std::string& s) {
  if (is_null_word(s)) return nullptr;
  if (auto b = bool_word(s)) return *b;
  if (auto i = integer_word(s)) return *i;
  if (auto f = float_word(s)) return *f;
  return json::value(s);
}

json::value convert(const YAML::Node& node) {
  switch (node.Type()) {
    case YAML::NodeType::Map: {
      json::object object;
      for (const auto& entry : node) object[entry.first.Scalar()] = convert(entry.second);
      return object;
    }
    case YAML::NodeType::Sequence: {
      json::array array;
      for (const auto& item : node) array.push_back(convert(item));
      return array;
    }
    case YAML::NodeType::Scalar:
      // yaml-cpp tags a quoted (non-plain) scalar "!" and a plain one "?": only plain ones resolve.
      return node.Tag() == "!" ? json::value(node.Scalar()) : plain_scalar(node.Scalar());
    case YAML::NodeType::Null:
    case YAML::NodeType::Undefined:
      return nullptr;
  }
  return nullptr;
}

// ---- helpers -----------------------------------------------------------------------------------

std::string member_path(const std::string& path, const std::string& key) {
  const bool plain = !key.empty() && !std::isdigit(static_cast<unsigned char>(key[0])) &&
                     std::all_of(key.begin(), key.end(),
                                 [](char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; });
  return plain ? path + "." + key : path + "[" + json::serialize(json::value(key)) + "]";
}

std::string kind_of(const json::value& value) {
  switch (value.kind()) {
    case json::kind::null:
      return "null";
    case json::kind::bool_:
      return "boolean";
    case json::kind::int64:
    case json::kind::uint64:
      return "integer";
    case json::kind::double_:
      return "number";
    case json::kind::string:
      return "string";
    case json::kind::array:
      return "array";
    case json::kind::object:
      return "object";
  }
  return "?";
}

bool has_type(const json::value& value, const std::string& type) {
  if (type == "integer") return value.is_int64() || value.is_uint64();
  if (type == "number") return value.is_number();
  return kind_of(value) == type;
}

double as_double(const json::value& value) {
  if (value.is_int64()) return static_cast<double>(value.as_int64());
  if (value.is_uint64()) return static_cast<double>(value.as_uint64());
  return value.as_double();
}

std::string str(const json::value& value) {
  return value.is_string() ? std::string(value.as_string()) : json::serialize(value);
}

bool flag(const json::object& object, const char* key) {
  const auto* value = object.if_contains(key);
  return value && value->is_bool() && value->as_bool();
}

std::vector<std::string> split_path(const std::string& path) {
  std::vector<std::string> segments;
  std::stringstream stream(path);
  std::string segment;
  while (std::getline(stream, segment, '/')) segments.push_back(segment);
  return segments;
}

bool is_parameter(const std::string& segment) {
  return segment.size() > 2 && segment.front() == '{' && segment.back() == '}';
}

bool json_media(const std::string& media) {
  return media == "application/json" || (media.size() > 5 && media.compare(media.size() - 5, 5, "+json") == 0);
}

// Calls visit(location, object) for every object in `value`, depth first.
template <typename Visit>
void walk(const json::value& value, const std::string& location, const Visit& visit) {
  if (value.is_object()) {
    visit(location, value.as_object());
    for (const auto& [key, member] : value.as_object()) walk(member, member_path(location, key), visit);
  } else if (value.is_array()) {
    const auto& array = value.as_array();
    for (size_t i = 0; i < array.size(); ++i) walk(array[i], location + "[" + std::to_string(i) + "]", visit);
  }
}

// Calls visit(location, schema) for a schema and every subschema in it.
template <typename Visit>
void walk_schema(const json::value& schema, const std::string& location, const Visit& visit) {
  if (!schema.is_object()) return;
  const auto& object = schema.as_object();
  visit(location, object);
  if (const auto* properties = object.if_contains("properties"); properties && properties->is_object()) {
    for (const auto& [name, sub] : properties->as_object()) {
      walk_schema(sub, member_path(location + ".properties", name), visit);
    }
  }
  for (const char* key : {"items", "additionalProperties"}) {
    if (const auto* sub = object.if_contains(key)) walk_schema(*sub, location + "." + key, visit);
  }
  for (const char* key : {"oneOf", "anyOf", "allOf"}) {
    const auto* list = object.if_contains(key);
    if (!list || !list->is_array()) continue;
    for (size_t i = 0; i < list->as_array().size(); ++i) {
      walk_schema(list->as_array()[i], location + "." + key + "[" + std::to_string(i) + "]", visit);
    }
  }
}

}  // namespace

// ---- public functions --------------------------------------------------------------------------

Result<json::value> yaml_to_json(const std::string& yaml, const std::string& source) {
  try {
    return convert(YAML::Load(yaml));
  } catch (const YAML::Exception& e) {
    return Error{ErrorCode::parse_error, source + ":" + std::to_string(e.mark.line + 1) + ":" +
                                             std::to_string(e.mark.column + 1) + ": " + e.msg};
  }
}

std::string media_type(const std::string& content_type) {
  std::string media = content_type.substr(0, content_type.find(';'));
  while (!media.empty() && std::isspace(static_cast<unsigned char>(media.back()))) media.pop_back();
  std::transform(media.begin(), media.end(), media.begin(), [](unsigned char c) { return std::tolower(c); });
  return media;
}

Result<OpenApiDocument> OpenApiDocument::load_file(const std::filesystem::path& file) {
  if (!std::filesystem::exists(file)) {
    return Error{ErrorCode::not_found, file.string() + ": no such file; the OpenAPI document lives in api/"};
  }
  return parse(read_text_file(file), file.string());
}

Result<OpenApiDocument> OpenApiDocument::parse(const std::string& yaml, const std::string& source) {
  OpenApiDocument document;
  HA_TRY(document.root_, yaml_to_json(yaml, source));
  if (!document.root_.is_object() || !document.root_.as_object().contains("paths")) {
    return Error{ErrorCode::parse_error, source + ": not an OpenAPI document (no top-level `paths`)"};
  }
  HA_TRY_STATUS(document.index_operations());
  return document;
}

const json::value* OpenApiDocument::resolve(const std::string& ref) const {
  if (ref.rfind("#/", 0) != 0) return nullptr;  // only local references: the document is one file
  const json::value* at = &root_;
  for (std::string token : split_path(ref.substr(2))) {
    for (size_t i = 0; (i = token.find('~', i)) != std::string::npos; ++i) {
      if (i + 1 >= token.size()) return nullptr;
      token.replace(i, 2, token[i + 1] == '1' ? "/" : "~");
    }
    if (!at->is_object()) return nullptr;
    at = at->as_object().if_contains(token);
    if (!at) return nullptr;
  }
  return at;
}

Status OpenApiDocument::index_operations() {
  static const std::vector<std::string> kMethods = {"get", "put", "post", "delete", "patch", "head", "options"};
  // Follows a $ref in places the document may use one (responses, request bodies).
  auto deref = [this](const json::value& value) -> const json::value& {
    if (const auto* ref = value.is_object() ? value.as_object().if_contains("$ref") : nullptr;
        ref && ref->is_string()) {
      if (const auto* target = resolve(std::string(ref->as_string()))) return *target;
    }
    return value;
  };
  for (const auto& [path, item] : root_.at("paths").as_object()) {
    if (!item.is_object()) return Error{ErrorCode::parse_error, "paths." + std::string(path) + ": not an object"};
    for (const auto& method : kMethods) {
      const auto* operation = item.as_object().if_contains(method);
      if (!operation) continue;
      OperationSpec spec;
      spec.path = path;
      spec.method = method;
      std::transform(spec.method.begin(), spec.method.end(), spec.method.begin(), ::toupper);
      const std::string where = spec.method + " " + spec.path;
      const auto* responses = operation->as_object().if_contains("responses");
      if (!responses || !responses->is_object()) return Error{ErrorCode::parse_error, where + ": no responses"};
      for (const auto& [code, response_ref] : responses->as_object()) {
        ResponseSpec response;
        if (!integer_word(std::string(code))) {
          return Error{ErrorCode::unsupported, where + ": response `" + std::string(code) +
                                                   "`: the checker needs explicit statuses (no default, no 4XX)"};
        }
        response.status = static_cast<unsigned>(std::stoul(std::string(code)));
        const auto& body = deref(response_ref);
        if (const auto* content = body.as_object().if_contains("content")) {
          for (const auto& [media, entry] : content->as_object()) {
            const auto* schema = entry.is_object() ? entry.as_object().if_contains("schema") : nullptr;
            response.content[std::string(media)] = schema ? *schema : json::value(nullptr);
          }
        }
        if (const auto* headers = body.as_object().if_contains("headers")) {
          for (const auto& [name, header] : headers->as_object()) {
            if (!flag(deref(header).as_object(), "required")) continue;
            std::string lower(name);
            std::transform(lower.begin(), lower.end(), lower.begin(), ::tolower);
            response.required_headers.push_back(lower);
          }
        }
        spec.responses[response.status] = std::move(response);
      }
      if (const auto* request = operation->as_object().if_contains("requestBody")) {
        if (const auto* content = deref(*request).as_object().if_contains("content")) {
          for (const auto& [media, entry] : content->as_object()) {
            spec.request_media_types.emplace_back(media);
            const auto* schema = entry.is_object() ? entry.as_object().if_contains("schema") : nullptr;
            spec.request_schemas[std::string(media)] = schema ? *schema : json::value(nullptr);
          }
        }
      }
      operations_.push_back(std::move(spec));
    }
  }
  return ok_status();
}

std::optional<std::string> OpenApiDocument::match_path(const std::string& path) const {
  const auto wanted = split_path(path);
  std::optional<std::string> best;
  int best_literals = -1;
  std::set<std::string> templates;
  for (const auto& operation : operations_) templates.insert(operation.path);
  for (const auto& candidate : templates) {
    const auto segments = split_path(candidate);
    if (segments.size() != wanted.size()) continue;
    int literals = 0;
    bool match = true;
    for (size_t i = 0; i < segments.size() && match; ++i) {
      if (is_parameter(segments[i])) {
        match = !wanted[i].empty();
      } else {
        match = segments[i] == wanted[i];
        ++literals;
      }
    }
    if (match && literals > best_literals) {
      best = candidate;
      best_literals = literals;
    }
  }
  return best;
}

const OperationSpec* OpenApiDocument::find(const std::string& path_template, const std::string& method) const {
  for (const auto& operation : operations_) {
    if (operation.path == path_template && operation.method == method) return &operation;
  }
  return nullptr;
}

std::vector<std::string> OpenApiDocument::validate(const json::value& schema, const json::value& value) const {
  std::vector<std::string> out;
  check(schema, value, "$", out, 0);
  return out;
}

std::vector<std::string> OpenApiDocument::validate_named(const std::string& name, const json::value& value) const {
  const json::value ref = json::object{{"$ref", "#/components/schemas/" + name}};
  return validate(ref, value);
}

void OpenApiDocument::check(const json::value& schema_value, const json::value& value, const std::string& path,
                            std::vector<std::string>& out, int depth) const {
  if (depth > kMaxDepth) {
    out.push_back(path + ": schema nesting deeper than " + std::to_string(kMaxDepth) + " (a $ref cycle?)");
    return;
  }
  if (!schema_value.is_object()) return;  // no schema: anything goes
  const auto& schema = schema_value.as_object();
  if (const auto* ref = schema.if_contains("$ref")) {
    const auto* target = ref->is_string() ? resolve(std::string(ref->as_string())) : nullptr;
    if (!target) {
      out.push_back(path + ": schema $ref " + str(*ref) + " does not resolve");
      return;
    }
    return check(*target, value, path, out, depth + 1);  // OpenAPI 3.0: a $ref's siblings are ignored
  }
  if (value.is_null() && flag(schema, "nullable")) return;
  if (const auto* all = schema.if_contains("allOf")) {
    for (const auto& sub : all->as_array()) check(sub, value, path, out, depth + 1);
  }
  for (const char* key : {"anyOf", "oneOf"}) {
    const auto* list = schema.if_contains(key);
    if (!list) continue;
    int matched = 0;
    std::vector<std::string> first_errors;
    for (const auto& sub : list->as_array()) {
      std::vector<std::string> errors;
      check(sub, value, path, errors, depth + 1);
      if (errors.empty()) ++matched;
      if (first_errors.empty() && !errors.empty()) first_errors = errors;
    }
    const bool one = std::string(key) == "oneOf";
    if (matched == 0) {
      out.push_back(path + ": matches none of " + key +
                    " (first branch: " + (first_errors.empty() ? "?" : first_errors.front()) + ")");
    } else if (one && matched > 1) {
      out.push_back(path + ": matches " + std::to_string(matched) + " branches of oneOf, not exactly one");
    }
  }
  if (const auto* type = schema.if_contains("type")) {
    if (!has_type(value, str(*type))) {
      out.push_back(path + ": expected " + str(*type) + (value.is_null() ? " (not nullable)" : "") + ", got " +
                    kind_of(value) + " " + json::serialize(value));
      return;
    }
  }
  if (const auto* allowed = schema.if_contains("enum")) {
    const auto& list = allowed->as_array();
    if (std::find(list.begin(), list.end(), value) == list.end()) {
      out.push_back(path + ": " + json::serialize(value) + " is not one of " + json::serialize(*allowed));
    }
  }
  if (value.is_string()) {
    const std::string text(value.as_string());
    if (const auto* pattern = schema.if_contains("pattern")) {
      if (!std::regex_search(text, std::regex(str(*pattern)))) {
        out.push_back(path + ": \"" + text + "\" does not match pattern " + str(*pattern));
      }
    }
    if (const auto* min = schema.if_contains("minLength"); min && text.size() < static_cast<size_t>(as_double(*min))) {
      out.push_back(path + ": shorter than minLength " + str(*min));
    }
    if (const auto* max = schema.if_contains("maxLength"); max && text.size() > static_cast<size_t>(as_double(*max))) {
      out.push_back(path + ": longer than maxLength " + str(*max));
    }
  }
  if (value.is_number()) {
    if (const auto* min = schema.if_contains("minimum"); min && as_double(value) < as_double(*min)) {
      out.push_back(path + ": " + json::serialize(value) + " is below minimum " + str(*min));
    }
    if (const auto* max = schema.if_contains("maximum"); max && as_double(value) > as_double(*max)) {
      out.push_back(path + ": " + json::serialize(value) + " is above maximum " + str(*max));
    }
  }
  if (value.is_array()) {
    const auto& array = value.as_array();
    if (const auto* min = schema.if_contains("minItems"); min && array.size() < static_cast<size_t>(as_double(*min))) {
      out.push_back(path + ": " + std::to_string(array.size()) + " items, fewer than minItems " + str(*min));
    }
    if (const auto* items = schema.if_contains("items")) {
      for (size_t i = 0; i < array.size(); ++i) {
        check(*items, array[i], path + "[" + std::to_string(i) + "]", out, depth + 1);
      }
    }
  }
  if (value.is_object()) check_object(schema, value.as_object(), path, out, depth);
}

void OpenApiDocument::check_object(const json::object& schema, const json::object& value, const std::string& path,
                                   std::vector<std::string>& out, int depth) const {
  static const json::object kNoProperties;
  const auto* properties_value = schema.if_contains("properties");
  const auto& properties = properties_value ? properties_value->as_object() : kNoProperties;
  if (const auto* required = schema.if_contains("required")) {
    for (const auto& name : required->as_array()) {
      if (!value.contains(name.as_string())) {
        out.push_back(member_path(path, std::string(name.as_string())) + ": required, missing");
      }
    }
  }
  const auto* additional = schema.if_contains("additionalProperties");
  for (const auto& [key, member] : value) {
    const std::string where = member_path(path, key);
    if (const auto* property = properties.if_contains(key)) {
      check(*property, member, where, out, depth + 1);
    } else if (additional && additional->is_bool() && !additional->as_bool()) {
      std::string known;
      for (const auto& [name, unused] : properties) known += (known.empty() ? "" : ", ") + std::string(name);
      out.push_back(where + ": not in the schema (additionalProperties: false; known: " + known + ")");
    } else if (additional && additional->is_object()) {
      check(*additional, member, where, out, depth + 1);
    }
  }
}

std::vector<std::string> OpenApiDocument::check_response(const std::string& method, const std::string& path,
                                                         const ObservedResponse& response) const {
  const std::string request = method + " " + path;
  const auto path_template = match_path(path);
  if (!path_template) return {request + ": no path in the document matches"};
  const auto* operation = find(*path_template, method);
  if (!operation) return {request + ": the document has no " + method + " for " + *path_template};
  const auto found = operation->responses.find(response.status);
  if (found == operation->responses.end()) {
    std::string listed;
    for (const auto& [status, unused] : operation->responses) listed += " " + std::to_string(status);
    return {request + ": status " + std::to_string(response.status) + " is not documented (documented:" + listed +
            "); body: " + response.body.substr(0, 300)};
  }
  const auto& spec = found->second;
  std::vector<std::string> out;
  for (const auto& header : spec.required_headers) {
    if (!response.headers.contains(header)) {
      out.push_back(request + " " + std::to_string(response.status) + ": required header `" + header + "` missing");
    }
  }
  if (spec.content.empty()) {
    if (!response.body.empty()) out.push_back(request + ": body where the document lists no content");
    return out;
  }
  const std::string media = media_type(response.content_type);
  const auto content = spec.content.find(media);
  if (content == spec.content.end()) {
    std::string listed;
    for (const auto& [name, unused] : spec.content) listed += " " + name;
    out.push_back(request + " " + std::to_string(response.status) + ": media type `" + media +
                  "` is not documented (documented:" + listed + ")");
    return out;
  }
  if (!json_media(media)) {
    check(content->second, json::value(response.body), "$", out, 0);  // text bodies: schema type string
    return out;
  }
  boost::system::error_code error;
  const auto body = json::parse(response.body, error);
  if (error) {
    out.push_back(request + " " + std::to_string(response.status) + ": body is not JSON (" + error.message() +
                  "): " + response.body.substr(0, 200));
    return out;
  }
  for (auto& mismatch : validate(content->second, body)) {
    out.push_back(request + " " + std::to_string(response.status) + ": " + mismatch);
  }
  return out;
}

std::vector<std::string> OpenApiDocument::unsupported_keywords() const {
  std::set<std::string> found;
  auto visit_schema = [&found](const std::string& location, const json::object& schema) {
    for (const auto& [key, unused] : schema) {
      const std::string name(key);
      if (!kImplemented.contains(name) && !kAnnotations.contains(name) && name.rfind("x-", 0) != 0) {
        found.insert(location + ": `" + name + "`");
      }
    }
  };
  walk(root_, "$", [&](const std::string& location, const json::object& object) {
    for (const auto& [key, member] : object) {
      if (key == "schema") walk_schema(member, location + ".schema", visit_schema);
      // The event stream's data schemas, by event name: schemas too, though OpenAPI has no place for them.
      if (key == "x-hostagent-event-schemas" && member.is_object()) {
        for (const auto& [event, schema] : member.as_object()) {
          walk_schema(schema, location + ".x-hostagent-event-schemas." + std::string(event), visit_schema);
        }
      }
    }
  });
  if (const auto* schemas = resolve("#/components/schemas")) {
    for (const auto& [name, schema] : schemas->as_object()) {
      walk_schema(schema, "$.components.schemas." + std::string(name), visit_schema);
    }
  }
  return {found.begin(), found.end()};
}

std::vector<std::string> OpenApiDocument::dangling_refs() const {
  std::vector<std::string> out;
  walk(root_, "$", [&](const std::string& location, const json::object& object) {
    const auto* ref = object.if_contains("$ref");
    if (ref && (!ref->is_string() || !resolve(std::string(ref->as_string())))) {
      out.push_back(location + ": $ref " + str(*ref));
    }
  });
  return out;
}

const OpenApiDocument& shipped_document() {
  static const OpenApiDocument loaded = [] {
    auto result = OpenApiDocument::load_file(hostagent::testing::source_dir() / "api" / "openapi.yaml");
    if (!result.ok()) FAIL("api/openapi.yaml: " << result.error().message);
    return std::move(result).value();
  }();
  return loaded;
}

std::string joined(const std::vector<std::string>& items) {
  std::string out;
  for (const auto& item : items) out += "\n  " + item;
  return out;
}

}  // namespace hostagent::testing::openapi
