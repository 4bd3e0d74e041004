// common/durable_file: the one writer of files that must survive a crash or power loss at any
// instant (journal entries, device records, cloud-init seeds). Every failure is an io_error naming
// the operation and the path: these are the daemon's own files in directories the operator gave it.
#pragma once

#include <cstddef>
#include <filesystem>
#include <string>
#include <string_view>

#include "hostagent/common/result.hpp"

namespace hostagent::durable {

// Replaces path with contents so that after a crash the file holds either its old contents or the
// new ones, whole: writes path.tmp (mode 0600, never through a link), fsyncs it, renames it over
// path and fsyncs the directory. A failed call removes the .tmp. One writer per path at a time: each
// caller's path is its own (an operation's entry, a VM's record or seed, written on its queue).
Status replace_file(const std::filesystem::path& path, std::string_view contents);
// The temporary file replace_file writes beside path (path + kTemporarySuffix): readers of a
// directory discard leftovers.
inline constexpr std::string_view kTemporarySuffix = ".tmp";
std::filesystem::path temporary_of(const std::filesystem::path& path);
// Removes path durably; a missing file is fine.
Status remove_file(const std::filesystem::path& path);
// Removes a file, durability aside (for leftovers that mean nothing whether or not they come back).
Status discard_file(const std::filesystem::path& path);
// Appends contents to path (created 0600 when missing, never through a link) and fsyncs it, and
// the directory when the file is new: once this returns, the appended bytes survive a crash. A crash
// during the call can leave a part of them at the end: readers of an append-only file treat a last
// line without its newline as never written (truncate_torn_tail). One writer per path at a time.
Status append_file(const std::filesystem::path& path, std::string_view contents);
// Cuts what follows the file's last newline (an append a crash interrupted), durably. Returns the
// bytes it cut; 0 when the file ends in a newline, is empty or does not exist.
Result<std::size_t> truncate_torn_tail(const std::filesystem::path& path, std::size_t max_bytes);
// The whole file, never through a link; a file above max_bytes is a parse_error (not one we wrote).
Result<std::string> read_file(const std::filesystem::path& path, std::size_t max_bytes);

}  // namespace hostagent::durable
