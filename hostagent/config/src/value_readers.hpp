// hostagent/config/value_readers (private): the configuration's value types that the YAML checker
// does not know (durations, CPU lists, absolute paths, listen addresses). Each reports into the
// shared Checker like the checker's own readers, and returns nullopt for an absent (null) value.
#pragma once

#include <chrono>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "hostagent/common/listen_address.hpp"
#include "hostagent/common/paths.hpp"
#include "hostagent/vmtemplates/yaml_checker.hpp"

namespace hostagent::config {

using vmtemplates::yaml::Checker;
using vmtemplates::yaml::Value;

// "60s", "500ms", "2m", "1h": above 0 and under a day.
std::optional<std::chrono::milliseconds> read_duration(Checker& check, const Value& value, const std::string& path);

// A cpulist ("0-3,96-99"); "" is the empty list.
std::optional<std::vector<int>> read_cpu_list(Checker& check, const Value& value, const std::string& path);

// What "" means for a path key: refused (the key needs a path) or none (an optional file).
enum class EmptyPath { refused, none };
std::optional<std::filesystem::path> read_absolute_path(Checker& check, const Value& value, const std::string& path,
                                                        EmptyPath empty);

std::optional<ListenAddress> read_listen_address(Checker& check, const Value& value, const std::string& path);

}  // namespace hostagent::config
