// api/problem_events: reading what the server answers: problems (RFC 9457) into Errors, and the
// text/event-stream format into events.
#include <boost/json/parse.hpp>
#include <map>

#include "hostagent/api/api_client.hpp"

namespace hostagent::api {
namespace {

std::string string_member(const boost::json::object& object, const char* key) {
  const auto* value = object.if_contains(key);
  return value != nullptr && value->is_string() ? std::string(value->as_string()) : std::string();
}

// The HTTP layer's own codes (api/problem.hpp) have no ErrorCode; each maps to the nearest one.
ErrorCode error_code_named(const std::string& code, unsigned status) {
  static const std::map<std::string, ErrorCode> codes = {
      {"invalid_argument", ErrorCode::invalid_argument},
      {"not_found", ErrorCode::not_found},
      {"parse_error", ErrorCode::parse_error},
      {"io_error", ErrorCode::io_error},
      {"unsupported", ErrorCode::unsupported},
      {"conflict", ErrorCode::conflict},
      {"does_not_fit", ErrorCode::does_not_fit},
      {"unavailable", ErrorCode::unavailable},
      {"internal", ErrorCode::internal},
      {"too_many_connections", ErrorCode::unavailable},
      {"not_ready", ErrorCode::unavailable},
      {"method_not_allowed", ErrorCode::unsupported},
      {"upgrade_required", ErrorCode::unsupported},
  };
  if (const auto it = codes.find(code); it != codes.end()) return it->second;
  if (status == 404) return ErrorCode::not_found;
  if (status == 409) return ErrorCode::conflict;
  if (status == 503) return ErrorCode::unavailable;
  if (status >= 500) return ErrorCode::internal;
  return ErrorCode::invalid_argument;  // the request was refused as it stands
}

// One frame's lines (without their line ends) into an event; nullopt for a comment-only frame.
std::optional<ServerEvent> parse_frame(const std::string& frame) {
  ServerEvent event;
  bool has_data = false;
  std::size_t start = 0;
  while (start <= frame.size()) {
    auto end = frame.find('\n', start);
    if (end == std::string::npos) end = frame.size();
    std::string line = frame.substr(start, end - start);
    start = end + 1;
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.empty() || line.front() == ':') continue;
    const auto colon = line.find(':');
    const std::string field = line.substr(0, colon);
    std::string value = colon == std::string::npos ? "" : line.substr(colon + 1);
    if (!value.empty() && value.front() == ' ') value.erase(0, 1);
    if (field == "data") {
      event.data += (has_data ? "\n" : "") + value;
      has_data = true;
    } else if (field == "event") {
      event.event = value;
    } else if (field == "id") {
      event.id = value;
    }
  }
  if (!has_data) return std::nullopt;
  if (event.event.empty()) event.event = "message";
  return event;
}

// The end of the first frame (the blank line after it) and the length of the separator.
std::pair<std::size_t, std::size_t> frame_end(const std::string& buffer) {
  const auto lf = buffer.find("\n\n");
  const auto crlf = buffer.find("\r\n\r\n");
  if (crlf != std::string::npos && (lf == std::string::npos || crlf < lf)) return {crlf, 4};
  return {lf, 2};
}

}  // namespace

std::optional<Problem> parse_problem(const std::string& body) {
  boost::system::error_code ec;
  auto value = boost::json::parse(body, ec);
  if (ec || !value.is_object()) return std::nullopt;
  const auto& object = value.as_object();
  const auto* status = object.if_contains("status");
  if (status == nullptr || !status->is_number() || !object.contains("detail")) return std::nullopt;
  Problem problem;
  problem.status = static_cast<unsigned>(status->to_number<double>());
  problem.type = string_member(object, "type");
  problem.title = string_member(object, "title");
  problem.detail = string_member(object, "detail");
  problem.instance = string_member(object, "instance");
  problem.code = string_member(object, "code");
  problem.field = string_member(object, "field");
  problem.json = std::move(value);
  return problem;
}

Error problem_error(const Problem& problem) {
  std::string message = problem.detail.empty() ? problem.title : problem.detail;
  if (!problem.field.empty() && message.find(problem.field) == std::string::npos) {
    message += " (field: " + problem.field + ")";
  }
  return {error_code_named(problem.code, problem.status), message};
}

std::vector<ServerEvent> take_server_events(std::string& buffer) {
  std::vector<ServerEvent> events;
  for (auto [end, separator] = frame_end(buffer); end != std::string::npos;
       std::tie(end, separator) = frame_end(buffer)) {
    if (auto event = parse_frame(buffer.substr(0, end))) events.push_back(std::move(*event));
    buffer.erase(0, end + separator);
  }
  return events;
}

}  // namespace hostagent::api
