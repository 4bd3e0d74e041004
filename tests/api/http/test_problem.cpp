// problem(): the one ErrorCode -> status table and the RFC 9457 body every error answer carries.
#include <doctest/doctest.h>

#include <boost/json.hpp>

#include "hostagent/api/problem.hpp"

namespace hostagent::api {
namespace {

namespace json = boost::json;

const std::string* header(const HttpResponse& response, const std::string& name) {
  for (const auto& [key, value] : response.headers) {
    if (key == name) return &value;
  }
  return nullptr;
}

TEST_CASE("every error code maps to the status docs/api.md gives it") {
  const std::vector<std::pair<ErrorCode, unsigned>> table = {
      {ErrorCode::invalid_argument, 400}, {ErrorCode::not_found, 404},   {ErrorCode::parse_error, 500},
      {ErrorCode::io_error, 500},         {ErrorCode::unsupported, 501}, {ErrorCode::conflict, 409},
      {ErrorCode::does_not_fit, 409},     {ErrorCode::unavailable, 503}, {ErrorCode::internal, 500},
  };
  for (const auto& entry : table) {
    // Named copies, not a structured binding: CAPTURE captures by reference in a lambda.
    const ErrorCode code = entry.first;
    const unsigned status = entry.second;
    CAPTURE(to_string(code));
    CHECK(http_status(code) == status);
    const HttpResponse response = problem(Error{code, "what went wrong"}, "/v1/vms/x");
    CHECK(response.status == status);
    CHECK(response.content_type == "application/problem+json");
    const json::object body = json::parse(response.body).as_object();
    CHECK(body.at("status").as_int64() == status);
    CHECK(body.at("code").as_string() == to_string(code));
    CHECK((header(response, "Retry-After") != nullptr) == (status == 503));
  }
}

TEST_CASE("a problem body has type, title, status, detail, instance, code and the error's field") {
  const HttpResponse response = problem(field_error("memory", "unknown field"), "/v1/vms");
  const json::object body = json::parse(response.body).as_object();
  CHECK(body.at("type").as_string() == "https://hostagent.dev/problems/invalid-argument");
  CHECK(body.at("title").as_string() == "Invalid argument");
  CHECK(body.at("status").as_int64() == 400);
  CHECK(body.at("detail").as_string() == "memory: unknown field");
  CHECK(body.at("instance").as_string() == "/v1/vms");
  CHECK(body.at("code").as_string() == "invalid_argument");
  CHECK(body.at("field").as_string() == "memory");

  const json::object without =
      json::parse(problem(Error{ErrorCode::not_found, "no VM x"}, "/v1/vms/x").body).as_object();
  CHECK_FALSE(without.contains("field"));
  // A field is the caller's input: an error of another kind that carries one does not name it.
  const json::object environment =
      json::parse(problem(Error{ErrorCode::io_error, "macs: EIO", "macs"}, "/v1/vms/x").body).as_object();
  CHECK_FALSE(environment.contains("field"));
  // An operation's error names its field as the answer to a request does.
  const json::object in_operation =
      json::parse(problem_json(field_error("macs[1]", "not a MAC"), "/v1/operations/op-1")).as_object();
  CHECK(in_operation.at("field").as_string() == "macs[1]");
}

TEST_CASE("the http layer's own problems: 401 carries the Bearer challenge, 503 Retry-After") {
  const HttpResponse unauthenticated = problem(401, "unauthenticated", "no token", "/v1/vms");
  REQUIRE(header(unauthenticated, "WWW-Authenticate") != nullptr);
  CHECK(header(unauthenticated, "WWW-Authenticate")->starts_with("Bearer"));
  const HttpResponse busy = problem(503, "too_many_connections", "full", "/");
  CHECK(header(busy, "Retry-After") != nullptr);
  const json::object body = json::parse(busy.body).as_object();
  CHECK(body.at("type").as_string() == "https://hostagent.dev/problems/too-many-connections");
  CHECK(body.at("title").as_string() == "Too many connections");
  CHECK(header(problem(413, "payload_too_large", "big", "/"), "Retry-After") == nullptr);
}

TEST_CASE("a problem's body is valid UTF-8 whatever bytes the request echoed into it") {
  // "/v1/vms/%FF" decodes to a path with the byte 0xff; json::parse refuses invalid UTF-8.
  const HttpResponse answer = problem(404, "not_found", "no VM \xff\xfe here", "/v1/vms/\xff", "name\xc3");
  boost::system::error_code error;
  const json::value body = json::parse(answer.body, error);
  REQUIRE_MESSAGE(!error, answer.body);
  CHECK(body.at("instance").as_string() == "/v1/vms/\\xff");
  CHECK(body.at("detail").as_string() == "no VM \\xff\\xfe here");
  CHECK(body.at("field").as_string() == "name\\xc3");
}

TEST_CASE("problem_json is the body problem() answers with") {
  const Error error{ErrorCode::does_not_fit, "no NUMA node has 8 free GPUs"};
  CHECK(problem_json(error, "/v1/operations/op-3") == problem(error, "/v1/operations/op-3").body);
}

}  // namespace
}  // namespace hostagent::api
