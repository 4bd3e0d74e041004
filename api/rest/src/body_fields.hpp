// api/rest, private: typed reads of a JSON request body's fields, each failure a 400 RouteError that
// names the field, says what was found and what is expected; and the checks of create's fields.
#pragma once

#include <boost/json/object.hpp>
#include <boost/json/value.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "hostagent/api/rest_commands.hpp"
#include "hostagent/fleet/provider_tree.hpp"

namespace hostagent::api::detail {

// What a JSON value is, for "found ...": "a number", "a string", "an array", ...
std::string describe(const boost::json::value& value);

class BodyFields {
 public:
  BodyFields(const boost::json::object& body, std::vector<std::string_view> accepted)
      : body_(body), accepted_(std::move(accepted)) {}

  // The first field that is not accepted, with the accepted ones listed.
  std::optional<RouteError> check_unknown() const;
  // A null or absent optional field leaves `out` as it is; a required one must be a string.
  std::optional<RouteError> text(std::string_view key, std::string& out, bool required) const;
  std::optional<RouteError> texts(std::string_view key, std::vector<std::string>& out) const;
  std::optional<RouteError> boolean(std::string_view key, bool& out) const;
  // A whole number from min to max; a null or absent field leaves `out` as it is.
  std::optional<RouteError> integer(std::string_view key, int64_t& out, int64_t min, int64_t max) const;
  // {"allocations": {PROVIDER_UUID: {"resources": {CLASS: AMOUNT}}}}: what Placement granted, as
  // its allocation candidates and GET /allocations/{consumer} write it.
  std::optional<RouteError> placement_claim(std::string_view key, fleet::ProviderResources& out) const;

 private:
  const boost::json::object& body_;
  std::vector<std::string_view> accepted_;
};

// Printable ASCII without spaces, at most 128 bytes: it is logged and compared, never interpreted.
std::optional<RouteError> check_request_id(const std::string& request_id);
// "" or an absolute path without a ".." component or control characters.
std::optional<RouteError> check_boot_image(const std::string& path);
// Why a host goes into maintenance: 1 to service::kMaxMaintenanceReasonBytes of UTF-8, one line.
std::optional<RouteError> check_maintenance_reason(const std::string& reason);
// One non-empty line of text (an authorized_keys line).
std::optional<RouteError> check_one_line(const std::string& field, const std::string& text);

}  // namespace hostagent::api::detail
