// tests/hostagent/config/config_checks: the two questions the configuration suites ask of a YAML
// text: the configuration it parses to, or what the parser says is wrong with it.
#pragma once

#include <doctest/doctest.h>

#include <string>

#include "hostagent/config/daemon_config.hpp"

namespace hostagent::config {

// The parsed configuration; fails the test case, with the parser's message, when it does not parse.
inline DaemonConfig valid(const std::string& yaml) {
  auto config = parse_config(yaml, "c.yaml");
  REQUIRE_MESSAGE(config.ok(), (config.ok() ? "" : config.error().message));
  return *config;
}

// The parser's message for a configuration it must refuse as invalid_argument.
inline std::string problems(const std::string& yaml) {
  auto config = parse_config(yaml, "c.yaml");
  REQUIRE_FALSE(config.ok());
  CHECK(config.error().code == ErrorCode::invalid_argument);
  return config.error().message;
}

}  // namespace hostagent::config
