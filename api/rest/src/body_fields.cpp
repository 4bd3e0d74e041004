// api/rest: typed JSON body fields and create's field checks.
#include "body_fields.hpp"

#include "hostagent/common/names.hpp"
#include "hostagent/common/paths.hpp"
#include "hostagent/common/text.hpp"

#include <boost/json/serialize.hpp>

#include <algorithm>

namespace hostagent::api::detail {
namespace {

RouteError bad(const std::string& field, const std::string& detail) {
  return RouteError{400, "invalid_argument", "body." + detail, field, ""};
}

RouteError wrong_type(const std::string& field, const boost::json::value& found, const std::string& expected) {
  return bad(field, field + ": found " + describe(found) + ", expected " + expected);
}

bool printable(const std::string& text) {
  return std::none_of(text.begin(), text.end(), [](char c) {
    const auto byte = static_cast<unsigned char>(c);
    return byte < 0x20 || byte == 0x7f;
  });
}

}  // namespace

std::string describe(const boost::json::value& value) {
  switch (value.kind()) {
    case boost::json::kind::null:
      return "null";
    case boost::json::kind::bool_:
      return value.get_bool() ? "true" : "false";
    case boost::json::kind::int64:
    case boost::json::kind::uint64:
    case boost::json::kind::double_:
      return "a number";
    case boost::json::kind::string:
      return "a string";
    case boost::json::kind::array:
      return "an array";
    case boost::json::kind::object:
      return "an object";
  }
  return "a value";
}

std::optional<RouteError> BodyFields::check_unknown() const {
  for (const auto& entry : body_) {
    const std::string_view key = entry.key();
    if (std::find(accepted_.begin(), accepted_.end(), key) != accepted_.end()) continue;
    std::string list;
    for (const auto& a : accepted_) list += (list.empty() ? "" : ", ") + std::string(a);
    // The key is the client's: printable ASCII only in the detail, as a path segment would be.
    std::string shown;
    for (const char c : key.substr(0, 64)) shown += (c >= 0x20 && c < 0x7f) ? c : '?';
    return bad(shown, shown + ": unknown field; " +
                          (list.empty() ? std::string("this request takes no fields") : "the fields are " + list));
  }
  return std::nullopt;
}

std::optional<RouteError> BodyFields::text(std::string_view key, std::string& out, bool required) const {
  const std::string field(key);
  const auto* value = body_.if_contains(key);
  if (value == nullptr || value->is_null()) {
    if (required) return bad(field, field + ": missing; it is required");
    return std::nullopt;
  }
  if (!value->is_string()) return wrong_type(field, *value, "a string");
  out = std::string(value->get_string());
  return std::nullopt;
}

std::optional<RouteError> BodyFields::texts(std::string_view key, std::vector<std::string>& out) const {
  const std::string field(key);
  const auto* value = body_.if_contains(key);
  if (value == nullptr || value->is_null()) return std::nullopt;
  if (!value->is_array()) return wrong_type(field, *value, "an array of strings");
  const auto& array = value->get_array();
  std::vector<std::string> items;
  for (std::size_t i = 0; i < array.size(); ++i) {
    if (!array[i].is_string()) return wrong_type(field + "[" + std::to_string(i) + "]", array[i], "a string");
    items.emplace_back(array[i].get_string());
  }
  out = std::move(items);
  return std::nullopt;
}

std::optional<RouteError> BodyFields::boolean(std::string_view key, bool& out) const {
  const std::string field(key);
  const auto* value = body_.if_contains(key);
  if (value == nullptr || value->is_null()) return std::nullopt;
  if (!value->is_bool()) return wrong_type(field, *value, "true or false");
  out = value->get_bool();
  return std::nullopt;
}

std::optional<RouteError> BodyFields::integer(std::string_view key, int64_t& out, int64_t min, int64_t max) const {
  const std::string field(key);
  const auto* value = body_.if_contains(key);
  if (value == nullptr || value->is_null()) return std::nullopt;
  const std::string expected = "a whole number from " + std::to_string(min) + " to " + std::to_string(max);
  if (value->is_int64() && value->get_int64() >= min && value->get_int64() <= max) {
    out = value->get_int64();
    return std::nullopt;
  }
  if (value->is_uint64() || value->is_int64() || value->is_double()) {
    return bad(field, field + ": found " + boost::json::serialize(*value) + ", expected " + expected);
  }
  return wrong_type(field, *value, expected);
}

std::optional<RouteError> BodyFields::placement_claim(std::string_view key, fleet::ProviderResources& out) const {
  const std::string field = std::string(key) + ".allocations";
  const auto* value = body_.if_contains(key);
  if (value == nullptr || value->is_null()) return std::nullopt;
  if (!value->is_object()) return wrong_type(std::string(key), *value, "an object with \"allocations\"");
  // Every member is read or refused, as at the body's top: a field the daemon ignored would be a
  // setting accepted and not applied.
  for (const auto& member : value->get_object()) {
    if (member.key() != "allocations") {
      const std::string at = std::string(key) + "." + std::string(member.key().substr(0, 64));
      return bad(at, at + ": unknown field; placement holds \"allocations\" alone");
    }
  }
  const auto* allocations = value->get_object().if_contains("allocations");
  if (allocations == nullptr || !allocations->is_object() || allocations->get_object().empty()) {
    return bad(field, field + ": expected an object of provider UUIDs, each {\"resources\": {CLASS: AMOUNT}}");
  }
  fleet::ProviderResources claim;
  for (const auto& [provider, held] : allocations->get_object()) {
    const std::string at = field + "." + std::string(provider.substr(0, 36));
    const auto uuid = Uuid::parse(provider, field);
    if (!uuid.ok()) return bad(field, field + ": a key is not " + std::string(kUuidRule));
    // One provider, one key, whichever case each was written in.
    if (claim.count(uuid->str()) != 0) return bad(at, at + ": names a provider another key names too");
    const auto* resources = held.is_object() ? held.get_object().if_contains("resources") : nullptr;
    if (resources == nullptr || !resources->is_object() || resources->get_object().empty() ||
        held.get_object().size() != 1) {
      return bad(at, at + ": expected {\"resources\": {CLASS: AMOUNT}} and nothing beside it");
    }
    for (const auto& [rc, amount] : resources->get_object()) {
      if (!fleet::is_placement_name(rc))
        return bad(at, at + ": a resource class is not upper-case letters, digits and '_'");
      if (!amount.is_int64() || amount.get_int64() < 1 || amount.get_int64() > (1LL << 31)) {
        return bad(at, at + ".resources." + std::string(rc) + ": expected a whole number from 1");
      }
      claim[uuid->str()][std::string(rc)] = amount.get_int64();
    }
  }
  out = std::move(claim);
  return std::nullopt;
}

std::optional<RouteError> check_request_id(const std::string& request_id) {
  // "" is a create without one.
  if (request_id.empty() || is_request_id(request_id)) return std::nullopt;
  return bad("request_id", "request_id: " + std::string(kRequestIdRule));
}

std::optional<RouteError> check_boot_image(const std::string& path) {
  if (path.empty()) return std::nullopt;
  // The path rule is common/paths' (the daemon's --exec applies the same); the rest keeps the
  // request's text to one printable line of bounded size.
  if (!absolute_path_problem(path) && printable(path) && path.size() <= 4096) return std::nullopt;
  return bad("boot_image", "boot_image: must be an absolute path on the host without '..' or control characters");
}

std::optional<RouteError> check_maintenance_reason(const std::string& reason) {
  const std::string why = text::xml_text_problem(reason, text::XmlText::one_line);
  if (!reason.empty() && reason.size() <= service::kMaxMaintenanceReasonBytes && why.empty()) return std::nullopt;
  return bad("reason", "reason: expected why the host goes into maintenance, one line of 1 to " +
                           std::to_string(service::kMaxMaintenanceReasonBytes) + " bytes of UTF-8" +
                           (why.empty() ? std::string() : " (it " + why + ")"));
}

std::optional<RouteError> check_one_line(const std::string& field, const std::string& text) {
  if (!text.empty() && text.size() <= 16384 && printable(text)) return std::nullopt;
  return bad(field, field + ": expected one non-empty line (an authorized_keys entry) without control characters");
}

}  // namespace hostagent::api::detail
