// hostagent/common/paths: the absolute-path rule, and the one check a path named by a request
// passes before anything opens it.
#include "hostagent/common/paths.hpp"

#include <algorithm>
#include <system_error>

#include "hostagent/common/text.hpp"

namespace hostagent {
namespace {

namespace fs = std::filesystem;

// Lexically inside: both are absolute and without "..", and what the file system makes of the rest
// is open_beneath's to check.
bool lies_inside(const fs::path& path, const fs::path& directory) {
  const auto relative = path.lexically_normal().lexically_relative(without_trailing_slash(directory));
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

Result<OpenedFile> open_inside(const std::string& path, const AllowedDirectories& allowed, const std::string& field,
                               const FileLimits& limits) {
  if (auto problem = absolute_path_problem(path)) {
    return refused(field, text::quoted(path) + " is not an absolute path without '..': " + *problem);
  }
  const fs::path named(path);
  for (const auto& directory : allowed.directories) {
    if (!lies_inside(named, directory)) continue;
    auto opened = open_beneath(directory, named, limits, field);
    if (!opened.ok()) {
      auto error = std::move(opened).error();
      // A file a request names that is not there is the request's mistake: 400, as the rest.
      if (error.code == ErrorCode::not_found) error.code = ErrorCode::invalid_argument;
      if (error.code == ErrorCode::invalid_argument) error.message += where(allowed);
      return error;
    }
    std::error_code ec;
    const auto resolved = fs::read_symlink("/proc/self/fd/" + std::to_string(opened->fd.get()), ec);
    if (ec) return Error{ErrorCode::io_error, field + " " + text::quoted(path) + ": " + ec.message()};
    opened->path = resolved;
    return opened;
  }
  return refused(field, text::quoted(path) + " is outside the allowed directories" + where(allowed));
}

}  // namespace hostagent
