// hostagent/common/paths: the absolute-path rule, checked.
#include "hostagent/common/paths.hpp"

#include <algorithm>
#include <filesystem>

namespace hostagent {

std::optional<std::string> absolute_path_problem(const std::string& path) {
  if (path.empty()) return "it is empty";
  if (!path.starts_with('/')) return "it is relative";
  // A NUL would cut the path short at the first system call, naming another file than the one shown.
  if (path.find('\0') != std::string::npos) return "it contains a NUL byte";
  const std::filesystem::path parsed(path);
  if (std::any_of(parsed.begin(), parsed.end(), [](const std::filesystem::path& part) { return part == ".."; })) {
    return "it contains '..'";
  }
  return std::nullopt;
}

}  // namespace hostagent
