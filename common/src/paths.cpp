// hostagent/common/paths: the absolute-path rule, and the one check a path named by a request
// passes before anything opens it.
#include "hostagent/common/paths.hpp"

#include <algorithm>
#include <system_error>

#include "hostagent/common/text.hpp"

namespace hostagent {
namespace {

namespace fs = std::filesystem;

// Lexically inside: `resolved` and `directory` are both canonical, so no symlink or ".." remains
// in either to make the comparison lie.
bool lies_inside(const fs::path& resolved, const fs::path& directory) {
  const auto relative = resolved.lexically_relative(directory);
  return !relative.empty() && *relative.begin() != ".." && relative != ".";
}

// Where files may lie, and the key that says so: the end of every refusal.
std::string where(const AllowedDirectories& allowed) {
  if (allowed.directories.empty()) return "; " + allowed.key + " lists no directory: add the one that holds it";
  std::string list;
  for (const auto& directory : allowed.directories) list += (list.empty() ? "" : ", ") + directory.string();
  return "; files may lie in " + list + " (" + allowed.key + ")";
}

Error refused(const std::string& field, const std::string& why) {
  Error error{ErrorCode::invalid_argument, field + " " + why};
  error.field = field;
  return error;
}

}  // namespace

std::optional<std::string> absolute_path_problem(const std::string& path) {
  if (path.empty()) return "it is empty";
  if (!path.starts_with('/')) return "it is relative";
  // A NUL would cut the path short at the first system call, naming another file than the one shown.
  if (path.find('\0') != std::string::npos) return "it contains a NUL byte";
  const fs::path parsed(path);
  if (std::any_of(parsed.begin(), parsed.end(), [](const fs::path& part) { return part == ".."; })) {
    return "it contains '..'";
  }
  return std::nullopt;
}

Result<fs::path> file_inside(const std::string& path, const AllowedDirectories& allowed, const std::string& field) {
  if (auto problem = absolute_path_problem(path)) {
    return refused(field, text::quoted(path) + " is not an absolute path without '..': " + *problem);
  }
  std::error_code ec;
  // canonical() is realpath(3): every component must exist, and every symlink is followed.
  const fs::path resolved = fs::canonical(path, ec);
  if (ec == std::errc::no_such_file_or_directory || ec == std::errc::not_a_directory) {
    return refused(field, text::quoted(path) + " does not exist" + where(allowed));
  }
  if (ec) return Error{ErrorCode::io_error, field + " " + text::quoted(path) + ": " + ec.message()};
  const bool inside = std::any_of(allowed.directories.begin(), allowed.directories.end(), [&](const fs::path& dir) {
    std::error_code dir_ec;
    const fs::path real_dir = fs::canonical(dir, dir_ec);
    return !dir_ec && lies_inside(resolved, real_dir);
  });
  const std::string named =
      text::quoted(path) +
      (resolved == fs::path(path) ? "" : " (which leads to " + text::quoted(resolved.string()) + ")");
  if (!inside) {
    return refused(field, named + " is outside the allowed directories" + where(allowed));
  }
  if (!fs::is_regular_file(resolved, ec)) return refused(field, named + " is not a regular file");
  return resolved;
}

}  // namespace hostagent
