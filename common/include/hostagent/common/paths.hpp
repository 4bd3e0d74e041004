// hostagent/common/paths: the rules for a path that configuration or a request names: absolute,
// without "..", so what the operator reads in it is the file the daemon opens; and, for a file a
// request names, inside a directory the operator configured once every symlink is followed.
#pragma once

#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "hostagent/common/result.hpp"

namespace hostagent {

// Why path is not an absolute path without '..' ("it is empty", "it is relative", ...), or
// nullopt when it is one.
std::optional<std::string> absolute_path_problem(const std::string& path);

// Where a request's path may lead: the configured directories, and the configuration key that
// lists them, for the message that tells the fix.
struct AllowedDirectories {
  std::vector<std::filesystem::path> directories;
  std::string key;  // "images.directories"
};

// The regular file `path` names with every symlink followed (realpath(3)), when it lies inside one of
// `allowed` (each resolved too): the path to open from then on, so a link changed later cannot lead
// elsewhere. Otherwise invalid_argument for `field`, saying why and where files may lie; io_error
// when the file system refuses to say (EACCES on a directory on the way).
Result<std::filesystem::path> file_inside(const std::string& path, const AllowedDirectories& allowed,
                                          const std::string& field);

}  // namespace hostagent
