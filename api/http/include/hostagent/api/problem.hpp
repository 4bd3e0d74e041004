// api/problem: errors as RFC 9457 problem details (application/problem+json). The one table from
// error codes to HTTP statuses lives in problem.cpp; everything that answers an error (the server's
// own limits and authentication, the routes) builds it here.
#pragma once

#include <string>

#include "hostagent/api/http_server.hpp"
#include "hostagent/common/result.hpp"

namespace hostagent::api {

// The status for a service error: invalid_argument 400, not_found 404, conflict and does_not_fit
// 409, unsupported 501, unavailable 503, the rest 500.
unsigned http_status(ErrorCode code);

// {"type": "https://hostagent.dev/problems/<slug>", "title", "status", "detail", "instance",
//  "code", "field" (when given)}. `code` is the ErrorCode's name or, for the HTTP layer's own
// problems, one of: unauthenticated, forbidden, method_not_allowed, payload_too_large,
// unsupported_media_type, invalid_template, header_too_large, too_many_connections, not_ready,
// not_implemented, request_timeout, upgrade_required.
HttpResponse problem(unsigned status, const std::string& code, const std::string& detail, const std::string& instance,
                     const std::string& field = "");
// With the error's field when it is an invalid argument.
HttpResponse problem(const Error& error, const std::string& instance);

// The same body as a JSON value's text, for an operation's error.
std::string problem_json(const Error& error, const std::string& instance);

}  // namespace hostagent::api
