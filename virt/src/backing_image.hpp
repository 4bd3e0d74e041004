// virt/backing_image: what an overlay needs to know about the image under it (format, virtual
// size), read from the file itself, and the overlay's volume XML.
#pragma once

#include <cstdint>
#include <string>

#include "hostagent/common/result.hpp"

namespace hostagent::virt::detail {

struct BackingImage {
  std::string format;  // "qcow2" or "raw"
  std::uint64_t virtual_size = 0;
};

// qcow2 when the file starts with "QFI\xfb" (its size: the header's big-endian u64 at offset 24),
// raw otherwise (its size: the file's). not_found for a missing file; invalid_argument for an
// empty one or a relative path.
Result<BackingImage> inspect_backing_image(const std::string& path);

// A volume name becomes a file in the pool's directory: one path component, no "." or "..".
Status check_volume_name(const std::string& name);

// <volume> for a qcow2 volume of the backing image's virtual size, backed by it.
std::string overlay_volume_xml(const std::string& name, const std::string& backing_path, const BackingImage& backing);

}  // namespace hostagent::virt::detail
