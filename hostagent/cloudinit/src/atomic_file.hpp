// cloudinit/atomic_file: replacing a file whole. A reader (libvirt, QEMU opening the CD-ROM) or a
// crash sees the old file or the new one, never a partial image.
#pragma once

#include <filesystem>
#include <string_view>

#include "hostagent/common/result.hpp"

namespace hostagent::cloudinit::detail {

// Writes `contents` to a new temporary file beside `path` (mode 0600), fsyncs it, renames it over
// `path` and fsyncs the directory. The temporary file is removed on failure. ENOENT/ENOTDIR (the
// directory is missing) are ErrorCode::not_found, other failures io_error; both name the path.
Status replace_file_atomically(const std::filesystem::path& path, std::string_view contents);

}  // namespace hostagent::cloudinit::detail
