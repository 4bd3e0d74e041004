// hostagent/common/paths: the rules for a path that configuration or a request names: absolute,
// without "..", so what the operator reads in it is the file the daemon opens; and, for a file a
// request names, opened inside a directory the operator configured.
#pragma once

#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "hostagent/common/named_file.hpp"
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

// The regular file `path` names, opened beneath the directory of `allowed` that holds it
// (common/named_file's open_beneath: a symlink may lead elsewhere inside it, never out of it), its
// path set to where the kernel resolved it (/proc/self/fd): what to hand on to whoever opens it
// by name later (libvirt, QEMU). A path outside every directory is refused before anything on the
// file system is asked, so a refusal never tells whether such a path exists or where a link leads.
// invalid_argument for `field` otherwise, saying why and where files may lie.
Result<OpenedFile> open_inside(const std::string& path, const AllowedDirectories& allowed, const std::string& field,
                               const FileLimits& limits);

}  // namespace hostagent
