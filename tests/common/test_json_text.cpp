// common/json_text: duplicate keys found at any depth and named by their path; everything else as
// boost::json parses it.
#include <doctest/doctest.h>

#include "hostagent/common/json_text.hpp"

namespace hostagent {
namespace {

TEST_CASE("duplicate_key: the first repeat's path, at any depth, and none in distinct keys") {
  CHECK(json_text::duplicate_key(R"({"name":"a","name":"b"})") == "name");
  CHECK(json_text::duplicate_key(R"({"a":{"x":1,"y":{"z":[1,2]},"x":2}})") == "a.x");
  CHECK(json_text::duplicate_key(R"({"macs":[{"m":1},{"m":1,"m":2}]})") == "macs[1].m");
  CHECK(json_text::duplicate_key(R"([{"k":1},[0,{"k":1,"k":1}]])") == "[1][1].k");
  // The same key in sibling objects, or as a value, is no repeat; nor after a nested value ends.
  CHECK(json_text::duplicate_key(R"({"a":{"k":1},"b":{"k":1},"c":"a"})").empty());
  CHECK(json_text::duplicate_key(R"({"a":{"b":1},"b":[{"a":2}],"c":null})").empty());
  // Keys compared as decoded: "\u006e" is "n".
  CHECK(json_text::duplicate_key(R"({"n":1,"\u006e":2})") == "n");
  CHECK(json_text::duplicate_key(R"({"n":1,"N":2})").empty());
  CHECK(json_text::duplicate_key("{\"a\":").empty());  // broken before any repeat
}

TEST_CASE("parse: a repeated key is invalid_argument naming it, broken JSON says why, the rest parses") {
  const auto repeated = json_text::parse(R"({"name":"a","memory":{"gib":1,"gib":2}})");
  REQUIRE_FALSE(repeated.ok());
  CHECK(repeated.error().code == ErrorCode::invalid_argument);
  CHECK(repeated.error().field == "memory.gib");
  CHECK(repeated.error().message.find("memory.gib: ") == 0);
  const auto broken = json_text::parse("{\"a\":");
  REQUIRE_FALSE(broken.ok());
  CHECK(broken.error().message.find("not valid JSON (") == 0);
  CHECK(broken.error().field.empty());
  const auto fine = json_text::parse(R"({"a":[1,{"b":true}],"c":"d"})");
  REQUIRE(fine.ok());
  CHECK(fine->at("c").as_string() == "d");
}

}  // namespace
}  // namespace hostagent
