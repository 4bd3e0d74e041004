// parse_http_request: raw bytes to HttpRequest with the limits, as the server and the fuzzer see it.
#include <doctest/doctest.h>

#include "hostagent/api/http_parse.hpp"

namespace hostagent::api {
namespace {

RequestRejection rejected(const std::string& raw, const ServerLimits& limits = {}) {
  RequestRejection rejection;
  rejection.status = 0;
  const auto parsed = parse_http_request(raw, limits, &rejection);
  REQUIRE_FALSE(parsed.ok());
  CHECK(parsed.error().code == ErrorCode::invalid_argument);
  CHECK(parsed.error().message == rejection.detail);
  return rejection;
}

TEST_CASE("a request's method, target, decoded path and query, lower-cased headers and body") {
  const auto parsed = parse_http_request(
      "POST /v1/vms/train%2D0/start?force=true&note=a%20b HTTP/1.1\r\nHost: x\r\nContent-Type: "
      "application/json\r\nX-Request-ID: r1\r\nContent-Length: 2\r\n\r\n{}",
      ServerLimits{});
  REQUIRE_MESSAGE(parsed.ok(), (parsed.ok() ? std::string() : parsed.error().message));
  CHECK(parsed->method == "POST");
  CHECK(parsed->target == "/v1/vms/train%2D0/start?force=true&note=a%20b");
  CHECK(parsed->path == "/v1/vms/train-0/start");
  CHECK(parsed->query == std::map<std::string, std::string>{{"force", "true"}, {"note", "a b"}});
  CHECK(parsed->headers.at("content-type") == "application/json");
  CHECK(parsed->headers.at("x-request-id") == "r1");
  CHECK(parsed->body == "{}");
  CHECK(parsed->identity.principal.empty());
}

TEST_CASE("a repeated query key keeps the last value and repeated headers are joined") {
  const auto parsed =
      parse_http_request("GET /v1/devices?role=gpu&role=nic HTTP/1.1\r\nHost: x\r\nAccept: a\r\naccept: b\r\n\r\n", {});
  REQUIRE(parsed.ok());
  CHECK(parsed->query.at("role") == "nic");
  CHECK(parsed->headers.at("accept") == "a, b");
}

TEST_CASE("a chunked body is decoded") {
  const auto parsed = parse_http_request(
      "POST /x HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n2\r\nde\r\n0\r\n\r\n", {});
  REQUIRE_MESSAGE(parsed.ok(), (parsed.ok() ? std::string() : parsed.error().message));
  CHECK(parsed->body == "abcde");
}

// RFC 9112 6.3: a request whose last transfer coding is not chunked has no knowable length; read as
// bodiless, its body would be the next request. RFC 9110 15.6.2: a coding the server does not decode is 501.
TEST_CASE("a Transfer-Encoding that does not end in chunked is 400, and chunked after another coding 501") {
  const std::string smuggled = "DELETE /v1/vms/x HTTP/1.1\r\nHost: x\r\n\r\n";
  for (const std::string coding : {"chunked, identity", "xchunked", "gzip", "identity"}) {
    CAPTURE(coding);
    const auto rejection =
        rejected("POST /v1/vms/x/start HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: " + coding + "\r\n\r\n" + smuggled);
    CHECK(rejection.status == 400);
    CHECK(rejection.code == "invalid_argument");
    CHECK(rejection.detail.find("does not end in chunked") != std::string::npos);
  }
  // Two fields are one list (RFC 9110 5.3): "chunked" then "gzip" ends in gzip.
  CHECK(
      rejected("POST /x HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\nTransfer-Encoding: gzip\r\n\r\n").status ==
      400);
  for (const std::string coding : {"gzip, chunked", "GZIP , Chunked"}) {
    CAPTURE(coding);
    const auto rejection =
        rejected("POST /x HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: " + coding + "\r\n\r\n3\r\nabc\r\n0\r\n\r\n");
    CHECK(rejection.status == 501);
    CHECK(rejection.code == "not_implemented");
  }
  const auto chunked =
      parse_http_request("POST /x HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: Chunked\r\n\r\n1\r\na\r\n0\r\n\r\n", {});
  CHECK(chunked.ok());
}

TEST_CASE("bad targets are 400: invalid percent-encoding, NUL, encoded slash, dot segments, absolute form") {
  for (const std::string target : {"/v1/vms/%zz", "/v1/vms/%4", "/v1/vms/a%00b", "/v1/vms?x=%00", "/v1/vms/a%2Fb",
                                   "/v1/vms/..", "/v1/./vms", "http://example.com/v1/vms", "v1/vms"}) {
    CAPTURE(target);
    const auto rejection = rejected("GET " + target + " HTTP/1.1\r\nHost: x\r\n\r\n");
    CHECK(rejection.status == 400);
    CHECK(rejection.code == "invalid_argument");
    CHECK(rejection.detail.find("request target") != std::string::npos);
  }
}

TEST_CASE("decode_target alone") {
  const auto decoded = decode_target("/v1/devices/0000%3A17%3A00.0?free=true");
  REQUIRE(decoded.ok());
  CHECK(decoded->path == "/v1/devices/0000:17:00.0");
  CHECK(decoded->query.at("free") == "true");
  CHECK(decode_target("/").value().path == "/");
  CHECK_FALSE(decode_target("/a b").ok());
}

TEST_CASE("a body above max_body_bytes is 413, headers above max_header_bytes 431") {
  ServerLimits limits;
  limits.max_body_bytes = 8;
  limits.max_header_bytes = 128;
  const auto body = rejected("POST /x HTTP/1.1\r\nHost: x\r\nContent-Length: 9\r\n\r\n123456789", limits);
  CHECK(body.status == 413);
  CHECK(body.code == "payload_too_large");
  const auto chunked = rejected(
      "POST /x HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nabcde\r\n5\r\nfghij\r\n0\r\n\r\n", limits);
  CHECK(chunked.status == 413);
  const auto headers = rejected("GET /x HTTP/1.1\r\nHost: x\r\nX-Big: " + std::string(200, 'a') + "\r\n\r\n", limits);
  CHECK(headers.status == 431);
  CHECK(headers.code == "header_too_large");
  CHECK(parse_http_request("POST /x HTTP/1.1\r\nHost: x\r\nContent-Length: 8\r\n\r\n12345678", limits).ok());
}

TEST_CASE("incomplete and malformed requests are 400") {
  CHECK(rejected("GET /x HTTP/1.1\r\nHost: x\r\n").status == 400);
  CHECK(rejected("POST /x HTTP/1.1\r\nHost: x\r\nContent-Length: 10\r\n\r\nabc").status == 400);
  CHECK(rejected("").status == 400);
  CHECK(rejected("\x01\x02garbage\r\n\r\n").status == 400);
  CHECK(rejected("GET /x HTTP/9.9\r\n\r\n").status == 400);
  CHECK(rejected("GET /x HTTP/1.1\r\nHost: x\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\nab").status == 400);
  // Without a rejection to fill, the error alone.
  const auto parsed = parse_http_request("nonsense", {});
  REQUIRE_FALSE(parsed.ok());
  CHECK(parsed.error().code == ErrorCode::invalid_argument);
}

// RFC 9112 5.2: obs-fold is refused, not joined; 2.2: so is whitespace before the first field.
TEST_CASE("a header line folded onto the next, or whitespace before the first field, is 400") {
  for (const std::string raw :
       {"GET /v1/vms HTTP/1.1\r\nHost: x\r\nX-A: a\r\n b\r\n\r\n",
        "GET /v1/vms HTTP/1.1\r\nHost: x\r\nX-A: a\r\n\tb\r\n\r\n", "GET /v1/vms HTTP/1.1\r\n Host: x\r\n\r\n"}) {
    CAPTURE(raw);
    const auto rejection = rejected(raw);
    CHECK(rejection.status == 400);
    CHECK(rejection.detail.find("obs-fold") != std::string::npos);
  }
  // A space inside a value, or a body that holds CRLF SP, is no fold.
  CHECK(parse_http_request("GET /v1/vms HTTP/1.1\r\nHost: x\r\nX-A: a b\r\n\r\n", {}).ok());
  CHECK(parse_http_request("POST /x HTTP/1.1\r\nHost: x\r\nContent-Length: 4\r\n\r\n\r\n a", {}).ok());
}

// RFC 9112 3.2: exactly one Host on HTTP/1.1; HTTP/1.0 may leave it out.
TEST_CASE("an HTTP/1.1 request without Host, or with two, is 400") {
  const auto missing = rejected("GET /v1/vms HTTP/1.1\r\n\r\n");
  CHECK(missing.status == 400);
  CHECK(missing.detail.find("Host") != std::string::npos);
  const auto twice = rejected("GET /v1/vms HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n");
  CHECK(twice.status == 400);
  CHECK(twice.detail.find("2 Host headers") != std::string::npos);
  CHECK(parse_http_request("GET /v1/vms HTTP/1.0\r\n\r\n", {}).ok());
}

TEST_CASE("bytes after the first complete request are left for the next one") {
  const auto parsed = parse_http_request("GET /a HTTP/1.1\r\nHost: x\r\n\r\nGET /b HTTP/1.1\r\nHost: x\r\n\r\n", {});
  REQUIRE(parsed.ok());
  CHECK(parsed->path == "/a");
}

}  // namespace
}  // namespace hostagent::api
