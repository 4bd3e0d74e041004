// state/posix_file: the few POSIX file operations the journal needs to survive a crash or power
// loss at any instant. Every failure is an io_error naming the operation and the path: whatever
// errno says, the environment failed us (even ENOENT: our own directory vanished).
#pragma once

#include <cstddef>
#include <filesystem>
#include <string>
#include <string_view>

#include "hostagent/common/result.hpp"

namespace hostagent::state::detail {

// Replaces directory/name with contents so that after a crash the file holds either its old
// contents or the new ones, whole: writes directory/name.tmp (mode 0600), fsyncs it, renames it
// over directory/name and fsyncs the directory. A failed call removes the .tmp.
Status replace_file(const std::filesystem::path& directory, const std::string& name, std::string_view contents);
// Removes directory/name durably; a missing file is fine.
Status remove_file(const std::filesystem::path& directory, const std::string& name);
// Removes a file, durability aside (for leftovers that mean nothing whether or not they come back).
Status discard_file(const std::filesystem::path& path);
// The whole file; a file above max_bytes is a parse_error (it is not one we wrote).
Result<std::string> read_file(const std::filesystem::path& path, std::size_t max_bytes);

}  // namespace hostagent::state::detail
