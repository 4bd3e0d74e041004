// api/http request_conversion: the one place Beast's parsed request becomes an HttpRequest and a
// parser error becomes a status, shared by parse_http_request and the server's sessions.
#pragma once

#include <boost/beast/http.hpp>
#include <boost/system/error_code.hpp>
#include <optional>

#include "hostagent/api/http_parse.hpp"

namespace hostagent::api::detail {

namespace http = boost::beast::http;
using BeastRequest = http::request<http::string_body>;
using RequestParser = http::request_parser<http::string_body>;

void apply_limits(RequestParser& parser, const ServerLimits& limits);

// A Beast parse error as the answer to it: body_limit 413, header_limit 431, the rest 400.
// `header_done` tells a full buffer while reading the body (413) from one in the headers (431).
RequestRejection rejection_for(const boost::system::error_code& error, bool header_done, const ServerLimits& limits);

// How the body is framed, checked once the header is read, before any body byte is: a
// Transfer-Encoding whose last coding is not chunked leaves the body's length unknown, so the
// request is refused with 400 and the connection closed (RFC 9112 6.3: else the body would be read
// as the next request, with this connection's identity); chunked after another coding (gzip,
// chunked) is 501, as a coding the server does not decode (RFC 9110 15.6.2). nullopt when fine.
std::optional<RequestRejection> framing_rejection(const BeastRequest& header);

// A header still being read (`bytes` from its first byte on, the end perhaps not yet there) that
// continues a line onto the next (obs-fold: CRLF then a space or tab, RFC 9112 5.2) or puts
// whitespace before its first field (RFC 9112 2.2): 400. Beast would join such lines with a space,
// so a proxy in front that reads them otherwise would see another header than the server does.
std::optional<RequestRejection> folding_rejection(std::string_view bytes);

// Every check of a request's header before its body is read: the framing above, then exactly one
// Host (none is fine for HTTP/1.0). nullopt when fine.
std::optional<RequestRejection> header_rejection(const BeastRequest& header);

// Method, target (decoded), lower-cased headers (repeats joined with ", ", RFC 9110 5.3) and body.
Result<HttpRequest> to_http_request(const BeastRequest& request, RequestRejection* rejection);

}  // namespace hostagent::api::detail
