// api/problem: the one table from error codes to HTTP statuses, and RFC 9457 problem details
// (application/problem+json) for every error the API answers.
#include "hostagent/api/problem.hpp"

#include <cctype>

#include <boost/json.hpp>

#include "hostagent/common/text.hpp"

namespace hostagent::api {
namespace {

namespace json = boost::json;

// "too_many_connections" -> "too-many-connections": the type URI's last segment.
std::string slug(const std::string& code) {
  std::string out = code;
  for (char& c : out) {
    if (c == '_') c = '-';
  }
  return out;
}

// "too_many_connections" -> "Too many connections": a short summary that is the same for every
// occurrence of the type, as RFC 9457 3.1.3 asks of the title.
std::string title(const std::string& code) {
  std::string out = code;
  for (char& c : out) {
    if (c == '_') c = ' ';
  }
  if (!out.empty()) out[0] = static_cast<char>(std::toupper(static_cast<unsigned char>(out[0])));
  return out;
}

json::object problem_object(unsigned status, const std::string& code, const std::string& detail,
                            const std::string& instance, const std::string& field) {
  json::object body;
  body["type"] = "https://hostagent.dev/problems/" + slug(code);
  body["title"] = title(code);
  body["status"] = status;
  // Both may echo a request's bytes (a target's %FF decodes to one): a JSON text must be UTF-8.
  body["detail"] = text::valid_utf8(detail);
  body["instance"] = text::valid_utf8(instance);
  body["code"] = code;
  if (!field.empty()) body["field"] = text::valid_utf8(field);
  return body;
}

// Only the caller's input has fields: an error of the environment never names one. A conflict
// names the request's field that another VM already has (its name, UUID or a MAC).
std::string field_of(const Error& error) {
  return error.code == ErrorCode::invalid_argument || error.code == ErrorCode::conflict ? error.field : "";
}

}  // namespace

unsigned http_status(ErrorCode code) {
  switch (code) {
    case ErrorCode::invalid_argument:
      return 400;
    case ErrorCode::not_found:
      return 404;
    case ErrorCode::conflict:
    case ErrorCode::does_not_fit:
      return 409;
    case ErrorCode::unsupported:
      return 501;
    case ErrorCode::unavailable:
      return 503;
    case ErrorCode::parse_error:
    case ErrorCode::io_error:
    case ErrorCode::internal:
      return 500;
  }
  return 500;
}

HttpResponse problem(unsigned status, const std::string& code, const std::string& detail, const std::string& instance,
                     const std::string& field) {
  HttpResponse response;
  response.status = status;
  response.content_type = "application/problem+json";
  response.body = json::serialize(problem_object(status, code, detail, instance, field));
  // RFC 9110 11.6.1: a 401 carries the challenge. 503s are transient (libvirtd away, not ready,
  // too many connections): tell the client when to come back rather than have it spin.
  if (status == 401) response.headers.emplace_back("WWW-Authenticate", "Bearer realm=\"hostagent\"");
  if (status == 503) response.headers.emplace_back("Retry-After", "5");
  return response;
}

HttpResponse problem(const Error& error, const std::string& instance) {
  return problem(http_status(error.code), to_string(error.code), error.message, instance, field_of(error));
}

std::string problem_json(const Error& error, const std::string& instance) {
  return json::serialize(
      problem_object(http_status(error.code), to_string(error.code), error.message, instance, field_of(error)));
}

}  // namespace hostagent::api
