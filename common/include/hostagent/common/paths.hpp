// hostagent/common/paths: the rule for a path that configuration or a request names: absolute,
// without "..", so what the operator reads in it is the file the daemon opens.
#pragma once

#include <optional>
#include <string>

namespace hostagent {

// Why path is not an absolute path without '..' ("it is empty", "it is relative", ...), or
// nullopt when it is one.
std::optional<std::string> absolute_path_problem(const std::string& path);

}  // namespace hostagent
