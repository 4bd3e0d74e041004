// common/named_file: the one way hostagent opens a file that someone else named: a configuration
// file, a template, a token, a TLS key or certificate, a user-data or key file, a request's boot
// image. Whoever names it may name something that is not a file at all (a FIFO, /dev/zero, a
// terminal, a directory) or a file that never ends, and whoever controls the directory may swap
// it between a check and an open. So each open
//  - never blocks: O_NONBLOCK, so open(2) of a FIFO with no writer returns at once rather than
//    waiting for one (fifo(7)), and nothing else the kernel would park the thread on;
//  - never takes a terminal (O_NOCTTY) and never leaks into a child (O_CLOEXEC);
//  - checks what it opened, not the name (fstat(2) on the descriptor): a regular file (a block
//    device only where asked: an operator's boot image may be one), and at most max_bytes, so a
//    symlink to /dev/zero or a 10 GB file is refused, not read;
//  - for a file a request names beneath an operator's directory, resolves the name inside that
//    directory alone (openat2(2) RESOLVE_BENEATH: no "..", no absolute symlink, no symlink that
//    leaves it; RESOLVE_NO_MAGICLINKS: no /proc/self/fd/N), so neither a check nor a message ever
//    says anything about a path outside it. Where openat2 is refused (a kernel before 5.6, a
//    container's seccomp filter that does not know it), the same rules by a walk in user space.
// Errors name `what` (the configuration key or request field) and say what was found instead.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "hostagent/common/posix_file.hpp"
#include "hostagent/common/result.hpp"

namespace hostagent {

struct FileLimits {
  std::uintmax_t max_bytes = 0;  // the most a reader reads; a larger file is refused
  bool block_device = false;     // a block device is accepted too (its size is not capped)
};

// What a text file someone names may hold at most: configuration, templates, user data.
inline constexpr std::uintmax_t kMaxTextFileBytes = 4U << 20U;
// A token or a key: one line.
inline constexpr std::uintmax_t kMaxTokenFileBytes = 64U << 10U;

struct OpenedFile {
  posix::FileDescriptor fd;
  std::filesystem::path path;  // as named (opened beneath a directory: the directory joined with it)
  std::uintmax_t size = 0;     // a regular file's st_size; a block device's size in bytes
};

// Opens `path` for reading, as above. not_found when it does not exist; invalid_argument (field
// `what`) when it is not a regular file (or block device, where allowed), or larger than allowed;
// io_error for anything else, naming the path.
Result<OpenedFile> open_named_file(const std::filesystem::path& path, const FileLimits& limits,
                                   const std::string& what);

// Opens `name`, a path relative to `directory` or an absolute one that lies lexically inside it,
// beneath that directory as above. not_found (field `what`) when it, or the directory, does not
// exist; invalid_argument for the rest the caller can fix. The messages never show where a
// symlink leads.
Result<OpenedFile> open_beneath(const std::filesystem::path& directory, const std::filesystem::path& name,
                                const FileLimits& limits, const std::string& what);

// open_beneath by the user-space walk alone, whether or not openat2 is there: what open_beneath
// falls back to, named so that its tests run every case through both.
Result<OpenedFile> open_beneath_walking(const std::filesystem::path& directory, const std::filesystem::path& name,
                                        const FileLimits& limits, const std::string& what);

// "/srv/images/" as "/srv/images": a directory as a path to compare lexically with another.
std::filesystem::path without_trailing_slash(const std::filesystem::path& directory);

// The whole content of an opened file, at most limits.max_bytes (a file that grew past it since the
// open is refused).
Result<std::string> read_opened(OpenedFile& file, std::uintmax_t max_bytes, const std::string& what);

}  // namespace hostagent
