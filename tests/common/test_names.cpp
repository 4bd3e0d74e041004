// The name rule: what is a VM or template name, and why the rest are not.
#include <doctest/doctest.h>

#include <string>
#include <utility>
#include <vector>

#include "hostagent/common/names.hpp"

namespace hostagent {
namespace {

TEST_CASE("names: 1-64 of letters, digits, '.', '_' and '-', not starting with '.'") {
  for (const std::string& name : std::vector<std::string>{"a", "train-0", "gx3-16x128x1h100", "A_b.c-d", "-lead", "_x",
                                                          "0", std::string(64, 'z')}) {
    CAPTURE(name);
    CHECK(is_name(name));
    CHECK(name_problem(name).empty());
  }
}

TEST_CASE("names: each refusal says why, and \".\" and \"..\" are never names") {
  const std::pair<std::string, std::string> cases[] = {
      {"", "it is empty"},
      {std::string(65, 'z'), "it is longer than 64 characters"},
      {".", "it starts with '.'"},
      {"..", "it starts with '.'"},
      {".hidden", "it starts with '.'"},
      {"a b", "it contains a character that is not allowed"},
      {"../etc", "it contains a character that is not allowed"},
      {"vm/1", "it contains a character that is not allowed"},
      {"vm\x01", "it contains a character that is not allowed"},
      {"caf\xc3\xa9", "it contains a character that is not allowed"},
      {"a'b", "it contains a character that is not allowed"},
  };
  for (const auto& refused : cases) {  // not a structured binding: clang's CAPTURE cannot take one
    CAPTURE(refused.first);
    CHECK_FALSE(is_name(refused.first));
    CHECK(name_problem(refused.first) == refused.second);
  }
}

}  // namespace
}  // namespace hostagent
