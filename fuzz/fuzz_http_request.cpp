// libFuzzer target: arbitrary bytes as a request off the wire. They go through the server's own
// parser (parse_http_request) and, when they parse, through the routes' (parse_request): the two
// pure functions every request the daemon reads passes through. Besides what the sanitizers catch,
// it checks what the headers promise: a rejection is 400, 413, 431 or 501 with its problem code; a parsed
// request has lower-case header names, a body within the limit and a target that decodes to its path
// and query, and its header no folded line (obs-fold) and, on HTTP/1.1, a Host; a route error is 400,
// 404, 405 (with Allow) or 415.
#include <cctype>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>
#include <variant>

#include "hostagent/api/http_parse.hpp"
#include "hostagent/api/rest_commands.hpp"

namespace {

using namespace hostagent::api;

[[noreturn]] void broken(const char* what) {
  std::fprintf(stderr, "fuzz_http_request: %s\n", what);
  std::abort();
}

// Smaller than the server's defaults (16 KiB of headers, 1 MiB of body) so inputs of a few KiB
// reach both limits; the code that checks them is the same.
ServerLimits fuzz_limits() {
  ServerLimits limits;
  limits.max_header_bytes = 2048;
  limits.max_body_bytes = 4096;
  return limits;
}

void check_rejection(const RequestRejection& rejection) {
  const bool known = (rejection.status == 400 && rejection.code == "invalid_argument") ||
                     (rejection.status == 413 && rejection.code == "payload_too_large") ||
                     (rejection.status == 431 && rejection.code == "header_too_large") ||
                     (rejection.status == 501 && rejection.code == "not_implemented");
  if (!known) {
    broken(
        "a rejection outside 400 invalid_argument, 413 payload_too_large, 431 header_too_large, "
        "501 not_implemented");
  }
  if (rejection.detail.empty()) broken("a rejection without a detail");
}

void check_request(const HttpRequest& request, const ServerLimits& limits) {
  if (request.body.size() > limits.max_body_bytes) broken("a body above the limit parsed");
  for (const auto& [name, value] : request.headers) {
    for (const char c : name) {
      if (std::isupper(static_cast<unsigned char>(c)) != 0) broken("a header name not in lower case");
    }
  }
  const auto decoded = decode_target(request.target);
  if (!decoded.ok()) broken("a parsed request whose target does not decode");
  if (decoded->path != request.path || decoded->query != request.query)
    broken("path or query differ from the target's");
}

// What the framing promises of a request that parsed, checked on its raw bytes: no header line
// that begins with whitespace, and a Host field when the request line says HTTP/1.1.
void check_framing(std::string_view raw, const HttpRequest& request) {
  const auto end = raw.find("\r\n\r\n");
  const std::string_view header = raw.substr(0, end == std::string_view::npos ? raw.size() : end);
  if (header.find("\r\n ") != std::string_view::npos || header.find("\r\n\t") != std::string_view::npos) {
    broken("a request with a folded header line parsed");
  }
  const std::string_view request_line = header.substr(0, header.find("\r\n"));
  if (request_line.ends_with("HTTP/1.1") && !request.headers.contains("host")) {
    broken("an HTTP/1.1 request without Host parsed");
  }
}

void check_route(const ParsedRequest& parsed) {
  const auto* error = std::get_if<RouteError>(&parsed);
  if (error == nullptr) return;
  const unsigned status = error->status;
  if (status != 400 && status != 404 && status != 405 && status != 415) broken("a route error outside 400/404/405/415");
  if (status == 405 && error->allow.empty()) broken("405 without Allow");
  if (error->detail.empty()) broken("a route error without a detail");
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const ServerLimits limits = fuzz_limits();
  const std::string_view raw(reinterpret_cast<const char*>(data), size);
  RequestRejection rejection;
  const auto request = parse_http_request(raw, limits, &rejection);
  if (!request.ok()) {
    if (request.error().code != hostagent::ErrorCode::invalid_argument) broken("a parse error not invalid_argument");
    check_rejection(rejection);
    return 0;
  }
  check_request(*request, limits);
  check_framing(raw, *request);
  check_route(parse_request(*request));
  return 0;
}
