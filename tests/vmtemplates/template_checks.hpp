// tests/vmtemplates/template_checks: what the template suites ask of a YAML text: the template it
// loads as, or what the loader says is wrong with it.
#pragma once

#include <doctest/doctest.h>

#include <string>

#include "hostagent/vmtemplates/vm_template.hpp"

namespace hostagent::vmtemplates {

// The smallest template that loads; suites append the key under test.
inline const std::string kMinimalTemplate = "name: t\nvcpus: 4\nmemory: 8GiB\n";

// The loaded template; fails the test case, with the loader's message, when it does not load.
inline VmTemplate valid(const std::string& yaml) {
  auto shape = parse_template(yaml, "t.yaml", nullptr);
  REQUIRE_MESSAGE(shape.ok(), (shape.ok() ? "" : shape.error().message));
  return *shape;
}

// The loader's message for a template it must refuse as invalid_argument.
inline std::string problems(const std::string& yaml) {
  auto shape = parse_template(yaml, "t.yaml", nullptr);
  REQUIRE_FALSE(shape.ok());
  CHECK(shape.error().code == ErrorCode::invalid_argument);
  return shape.error().message;
}

}  // namespace hostagent::vmtemplates
