// common/json_fields: typed reads of one JSON object's fields.
#include "hostagent/common/json_fields.hpp"

namespace hostagent::json_fields {
namespace json = boost::json;

Result<JsonFields> JsonFields::of(const json::value& value, std::string path) {
  const auto* object = value.if_object();
  if (object == nullptr)
    return parse_failure((path.empty() ? "the document" : "field '" + path + "'") + " is not a JSON object");
  return JsonFields(object, std::move(path));
}

std::string JsonFields::path(std::string_view key) const {
  return path_.empty() ? std::string(key) : path_ + "." + std::string(key);
}

Result<const json::value*> JsonFields::field(std::string_view key) const {
  const auto* value = object_->if_contains(key);
  if (value == nullptr) return parse_failure("field '" + path(key) + "' is missing");
  return value;
}

Error JsonFields::wrong_type(std::string_view key, const char* expected) const {
  return parse_failure("field '" + path(key) + "' is not " + expected);
}

Result<std::string> JsonFields::string(std::string_view key) const {
  HA_TRY(const auto* value, field(key));
  if (!value->is_string()) return wrong_type(key, "a string");
  return std::string(value->get_string());
}

Result<bool> JsonFields::boolean(std::string_view key) const {
  HA_TRY(const auto* value, field(key));
  if (!value->is_bool()) return wrong_type(key, "true or false");
  return value->get_bool();
}

Result<uint64_t> JsonFields::unsigned_integer(std::string_view key) const {
  HA_TRY(const auto* value, field(key));
  // Boost.JSON keeps a non-negative integer as int64 when it fits, uint64 above that.
  if (value->is_uint64()) return value->get_uint64();
  if (value->is_int64() && value->get_int64() >= 0) return static_cast<uint64_t>(value->get_int64());
  if (value->is_int64())
    return parse_failure("field '" + path(key) + "' is negative: " + std::to_string(value->get_int64()));
  return wrong_type(key, "a non-negative integer");
}

Result<int64_t> JsonFields::integer(std::string_view key) const {
  HA_TRY(const auto* value, field(key));
  if (value->is_int64()) return value->get_int64();
  if (value->is_uint64()) return parse_failure("field '" + path(key) + "' is out of range");
  return wrong_type(key, "an integer");
}

Result<std::string> JsonFields::optional_string(std::string_view key) const {
  const auto* value = object_->if_contains(key);
  if (value == nullptr || value->is_null()) return std::string();
  if (!value->is_string()) return wrong_type(key, "a string or null");
  return std::string(value->get_string());
}

Result<const json::array*> JsonFields::array(std::string_view key) const {
  HA_TRY(const auto* value, field(key));
  if (!value->is_array()) return wrong_type(key, "an array");
  return &value->get_array();
}

Result<std::vector<std::string>> JsonFields::strings(std::string_view key) const {
  HA_TRY(const json::array* items, array(key));
  std::vector<std::string> out;
  for (std::size_t i = 0; i < items->size(); ++i) {
    if (!(*items)[i].is_string())
      return parse_failure("field '" + path(key) + "[" + std::to_string(i) + "]' is not a string");
    out.emplace_back((*items)[i].get_string());
  }
  return out;
}

Result<JsonFields> JsonFields::object(std::string_view key) const {
  HA_TRY(const auto* value, field(key));
  return of(*value, path(key));
}

Result<const json::object*> JsonFields::raw_object(std::string_view key) const {
  HA_TRY(const auto* value, field(key));
  if (!value->is_object()) return wrong_type(key, "an object");
  return &value->get_object();
}

Result<JsonFields> JsonFields::element(std::string_view key, std::size_t index) const {
  HA_TRY(const json::array* items, array(key));
  const std::string at = path(key) + "[" + std::to_string(index) + "]";
  if (index >= items->size()) return parse_failure("field '" + at + "' is missing");
  return of((*items)[index], at);
}

Result<std::vector<std::pair<std::string, JsonFields>>> JsonFields::objects() const {
  std::vector<std::pair<std::string, JsonFields>> out;
  out.reserve(object_->size());
  for (const auto& member : *object_) {
    HA_TRY(auto fields, of(member.value(), path(member.key())));
    out.emplace_back(std::string(member.key()), std::move(fields));
  }
  return out;
}

Result<std::vector<std::pair<std::string, int64_t>>> JsonFields::integers() const {
  std::vector<std::pair<std::string, int64_t>> out;
  out.reserve(object_->size());
  for (const auto& member : *object_) {
    HA_TRY(const auto value, integer(member.key()));
    out.emplace_back(std::string(member.key()), value);
  }
  return out;
}

Result<std::vector<std::pair<std::string, std::string>>> JsonFields::string_members() const {
  std::vector<std::pair<std::string, std::string>> out;
  out.reserve(object_->size());
  for (const auto& member : *object_) {
    HA_TRY(auto value, string(member.key()));
    out.emplace_back(std::string(member.key()), std::move(value));
  }
  return out;
}

Result<int64_t> checked_format(int64_t format, int64_t current) {
  if (format < 0) return parse_failure("format " + std::to_string(format) + " is no format hostagent writes");
  if (format > current) {
    return parse_failure("format " + std::to_string(format) + " is newer than this hostagent reads (up to format " +
                         std::to_string(current) +
                         "): a newer release wrote it; upgrade hostagent, or keep the file for that release (this "
                         "one neither changes nor removes it)");
  }
  return format;
}

Result<int64_t> format_version(const JsonFields& fields, int64_t current) {
  if (!fields.has(kFormatKey)) return 0;
  HA_TRY(const int64_t format, fields.integer(kFormatKey));
  return checked_format(format, current);
}

}  // namespace hostagent::json_fields
