// api/http_parse: raw request bytes to an HttpRequest, with the server's limits. Pure (no sockets,
// no threads), so the libFuzzer target and the unit tests drive exactly the code the server runs
// on every request it reads.
#pragma once

#include <string>
#include <string_view>

#include "hostagent/api/http_server.hpp"
#include "hostagent/common/result.hpp"

namespace hostagent::api {

// Why a request is not served, as the server answers it: the HTTP status and the problem's code.
//   400 invalid_argument     malformed HTTP, a bad target (invalid percent-encoding, a NUL, an
//                            encoded '/', a "." or ".." segment), an incomplete request
//   413 payload_too_large    the body is above limits.max_body_bytes
//   431 header_too_large     the request line and headers are above limits.max_header_bytes
struct RequestRejection {
  unsigned status = 400;
  std::string code = "invalid_argument";
  std::string detail;
};

// Parses one request from `raw` (bytes after the first complete message are ignored: pipelining).
// On failure the Error is ErrorCode::invalid_argument with the detail as its message, and
// `rejection` (when given) says the status and problem code to answer with. identity and remote are
// left empty: they are the connection's, not the bytes'.
Result<HttpRequest> parse_http_request(std::string_view raw, const ServerLimits& limits,
                                       RequestRejection* rejection = nullptr);

// The target's parts: path percent-decoded (checked as above), query decoded (a repeated key keeps
// the last value). invalid_argument naming what is wrong.
struct DecodedTarget {
  std::string path;
  std::map<std::string, std::string> query;
};
Result<DecodedTarget> decode_target(std::string_view target);

}  // namespace hostagent::api
