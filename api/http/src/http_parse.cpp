// api/http_parse: request bytes to HttpRequest (Beast's parser with the server's limits) and the
// target's decoding (Boost.URL). Every check here is one the server applies to every request.
#include "hostagent/api/http_parse.hpp"

#include <algorithm>
#include <cctype>
#include <utility>
#include <vector>

#include <boost/url/parse.hpp>
#include <boost/url/url_view.hpp>

#include "hostagent/common/text.hpp"
#include "request_conversion.hpp"

namespace hostagent::api {
namespace {

namespace http = boost::beast::http;

Error invalid(std::string message) {
  return Error{ErrorCode::invalid_argument, std::move(message)};
}

Error reject(RequestRejection* out, RequestRejection rejection) {
  Error error = invalid(rejection.detail);
  if (out != nullptr) *out = std::move(rejection);
  return error;
}

std::string lower(std::string_view text) {
  std::string out(text);
  std::transform(out.begin(), out.end(), out.begin(), [](unsigned char c) { return std::tolower(c); });
  return out;
}

// A decoded segment that would change what the path means, or smuggle a NUL into a name.
Status check_segment(const std::string& segment, std::string_view target) {
  if (segment.find('\0') != std::string::npos) {
    return invalid("request target '" + std::string(target) + "': a path segment holds a NUL (%00)");
  }
  if (segment.find('/') != std::string::npos) {
    return invalid("request target '" + std::string(target) + "': a path segment holds an encoded '/' (%2F)");
  }
  if (segment == "." || segment == "..") {
    return invalid("request target '" + std::string(target) + "': dot segments ('.', '..') are not accepted");
  }
  return ok_status();
}

}  // namespace

Result<DecodedTarget> decode_target(std::string_view target) {
  // origin-form only (RFC 9112 3.2.1): "/path?query"; absolute-form is for proxies.
  auto parsed = boost::urls::parse_origin_form(target);
  if (!parsed) {
    return invalid("request target '" + std::string(target) +
                   "': not a valid origin-form target (a path starting with '/', percent-encoding as %XX)");
  }
  const boost::urls::url_view& url = *parsed;
  DecodedTarget out;
  for (const std::string segment : url.segments()) {
    HA_TRY_STATUS(check_segment(segment, target));
  }
  out.path = url.path();
  if (out.path.empty()) out.path = "/";
  for (const auto& param : url.params()) {
    std::string key = param.key;
    std::string value = param.value;
    if (key.find('\0') != std::string::npos || value.find('\0') != std::string::npos) {
      return invalid("request target '" + std::string(target) + "': a query parameter holds a NUL (%00)");
    }
    out.query[std::move(key)] = std::move(value);
  }
  return out;
}

namespace detail {

void apply_limits(RequestParser& parser, const ServerLimits& limits) {
  // Beast's header_limit counts the request line and the fields, as max_header_bytes means.
  parser.header_limit(static_cast<std::uint32_t>(std::min<std::size_t>(limits.max_header_bytes, UINT32_MAX)));
  parser.body_limit(static_cast<std::uint64_t>(limits.max_body_bytes));
}

RequestRejection rejection_for(const boost::system::error_code& error, bool header_done, const ServerLimits& limits) {
  if (error == http::error::body_limit || (error == http::error::buffer_overflow && header_done)) {
    return {413, "payload_too_large",
            "the request body is above the limit of " + std::to_string(limits.max_body_bytes) + " bytes"};
  }
  if (error == http::error::header_limit || error == http::error::buffer_overflow) {
    return {
        431, "header_too_large",
        "the request line and headers are above the limit of " + std::to_string(limits.max_header_bytes) + " bytes"};
  }
  return {400, "invalid_argument", "malformed HTTP request: " + error.message()};
}

std::optional<RequestRejection> framing_rejection(const BeastRequest& header) {
  std::vector<std::string> codings;  // every Transfer-Encoding field, in order (RFC 9110 5.3)
  for (const auto& field : header) {
    if (field.name() != http::field::transfer_encoding) continue;
    std::string_view list = field.value();
    while (!list.empty()) {
      const auto comma = list.find(',');
      std::string coding = lower(list.substr(0, comma));
      coding = coding.substr(0, coding.find(';'));  // a coding's parameters name no other coding
      const auto first = coding.find_first_not_of(" \t");
      const auto last = coding.find_last_not_of(" \t");
      if (first != std::string::npos) codings.push_back(coding.substr(first, last - first + 1));
      list = comma == std::string_view::npos ? std::string_view() : list.substr(comma + 1);
    }
  }
  if (codings.empty()) return std::nullopt;
  std::string named;
  for (const auto& c : codings) named += (named.empty() ? "" : ", ") + c;
  if (codings.back() != "chunked") {
    return RequestRejection{400, "invalid_argument",
                            "Transfer-Encoding " + text::quoted(named) +
                                " does not end in chunked, so the body's length is unknown: send the body chunked, "
                                "or with Content-Length"};
  }
  if (codings.size() > 1) {
    return RequestRejection{501, "not_implemented",
                            "Transfer-Encoding " + text::quoted(named) +
                                ": the server decodes no coding but chunked; send the body unencoded"};
  }
  return std::nullopt;
}

// Only up to the blank line: a body may hold CRLF SP freely.
std::optional<RequestRejection> folding_rejection(std::string_view bytes) {
  const auto end = bytes.find("\r\n\r\n");
  const std::string_view header = bytes.substr(0, end == std::string_view::npos ? bytes.size() : end + 2);
  for (auto at = header.find("\r\n"); at != std::string_view::npos; at = header.find("\r\n", at + 2)) {
    if (at + 2 < header.size() && (header[at + 2] == ' ' || header[at + 2] == '\t')) {
      return RequestRejection{400, "invalid_argument",
                              "a header line begins with whitespace (obs-fold, RFC 9112 5.2): write each field on "
                              "one line"};
    }
  }
  return std::nullopt;
}

// RFC 9112 3.2: "A server MUST respond with a 400 (Bad Request) status code to any HTTP/1.1
// request message that lacks a Host header field and to any request message that contains more
// than one Host header field line". Two Hosts are two answers to "which server": a proxy in front
// may route by the one the server ignores.
static std::optional<RequestRejection> host_rejection(const BeastRequest& header) {
  const std::size_t hosts = header.count(http::field::host);
  if (hosts > 1) {
    return RequestRejection{400, "invalid_argument",
                            "the request has " + std::to_string(hosts) + " Host headers; send exactly one"};
  }
  if (hosts == 0 && header.version() >= 11) {
    return RequestRejection{400, "invalid_argument",
                            "an HTTP/1.1 request must carry a Host header (RFC 9112 3.2); send Host: localhost"};
  }
  return std::nullopt;
}

std::optional<RequestRejection> header_rejection(const BeastRequest& header) {
  if (auto refused = framing_rejection(header)) return refused;
  return host_rejection(header);
}

Result<HttpRequest> to_http_request(const BeastRequest& request, RequestRejection* rejection) {
  HttpRequest out;
  out.method = std::string(request.method_string());
  out.target = std::string(request.target());
  auto target = decode_target(out.target);
  if (!target) return reject(rejection, {400, "invalid_argument", target.error().message});
  out.path = std::move(target->path);
  out.query = std::move(target->query);
  for (const auto& field : request) {
    std::string name = lower(field.name_string());
    auto [it, inserted] = out.headers.try_emplace(std::move(name), std::string(field.value()));
    if (!inserted) it->second.append(", ").append(field.value());
  }
  out.body = request.body();
  return out;
}

}  // namespace detail

Result<HttpRequest> parse_http_request(std::string_view raw, const ServerLimits& limits, RequestRejection* rejection) {
  detail::RequestParser parser;
  detail::apply_limits(parser, limits);
  parser.eager(true);
  boost::system::error_code error;
  if (auto folded = detail::folding_rejection(raw)) return reject(rejection, std::move(*folded));
  while (!parser.is_done() && !raw.empty()) {
    const std::size_t used = parser.put(boost::asio::buffer(raw.data(), raw.size()), error);
    if (error == http::error::need_more) {
      error = {};
      if (used == 0) break;
    }
    if (error) return reject(rejection, detail::rejection_for(error, parser.is_header_done(), limits));
    raw.remove_prefix(used);
    if (parser.is_header_done()) {
      if (auto refused = detail::header_rejection(parser.get())) return reject(rejection, std::move(*refused));
    }
  }
  if (!parser.is_done()) {
    return reject(rejection, {400, "invalid_argument",
                              parser.is_header_done() ? "incomplete request: the body ended early"
                                                      : "incomplete request: the headers do not end (CRLF CRLF)"});
  }
  return detail::to_http_request(parser.get(), rejection);
}

}  // namespace hostagent::api
