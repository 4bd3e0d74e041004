// virt/backing_image: reading an image's format and size, and writing the overlay's <volume>.
#include "backing_image.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <pugixml.hpp>
#include <sstream>

#include "hostagent/common/named_file.hpp"
#include "hostagent/common/text.hpp"

namespace hostagent::virt::detail {
namespace {

// QCOW2 header (QEMU docs/interop/qcow2.txt): magic at 0, virtual size at 24, both big-endian.
constexpr std::array<unsigned char, 4> kQcow2Magic{'Q', 'F', 'I', 0xfb};
constexpr std::size_t kQcow2SizeOffset = 24;
constexpr std::size_t kQcow2HeaderPrefix = kQcow2SizeOffset + 8;
constexpr std::size_t kMaxVolumeName = 255;  // NAME_MAX: the name is a file in the pool's directory

std::uint64_t big_endian_u64(const unsigned char* bytes) {
  std::uint64_t value = 0;
  for (int i = 0; i < 8; ++i) value = (value << 8) | bytes[i];
  return value;
}

Result<BackingImage> read_image(int fd, const std::string& path) {
  std::array<unsigned char, kQcow2HeaderPrefix> header{};
  const ssize_t got = pread(fd, header.data(), header.size(), 0);
  if (got < 0) return errno_error(errno, "read backing image", path);
  const auto length = static_cast<std::size_t>(got);
  if (length >= kQcow2Magic.size() && std::equal(kQcow2Magic.begin(), kQcow2Magic.end(), header.begin())) {
    if (length < header.size()) {
      return Error{ErrorCode::parse_error, "backing image " + path + " has qcow2's magic but a truncated header"};
    }
    return BackingImage{"qcow2", big_endian_u64(header.data() + kQcow2SizeOffset)};
  }
  // SEEK_END gives the size of block devices too, where fstat says 0.
  const off_t end = lseek(fd, 0, SEEK_END);
  if (end < 0) return errno_error(errno, "find the size of backing image", path);
  return BackingImage{"raw", static_cast<std::uint64_t>(end)};
}

}  // namespace

Result<BackingImage> inspect_backing_image(const std::string& path) {
  if (path.empty() || path.front() != '/') {
    return Error{ErrorCode::invalid_argument, "backing image path " + text::quoted(path) + " must be absolute"};
  }
  // Never blocking, and only what an image can be: a FIFO swapped in for the image after the request
  // was checked must not hold an operation thread (and the VM's devices with it) forever.
  HA_TRY(const auto opened, open_named_file(path, FileLimits{0, true}, "backing image"));
  HA_TRY(BackingImage image, read_image(opened.fd.get(), path));
  if (image.virtual_size == 0) {
    return Error{ErrorCode::invalid_argument, "backing image " + path + " is empty (virtual size 0)"};
  }
  return image;
}

Status check_volume_name(const std::string& name) {
  const bool bad = name.empty() || name == "." || name == ".." || name.size() > kMaxVolumeName ||
                   name.find_first_of(std::string("/\0", 2)) != std::string::npos;
  if (bad) {
    return Error{ErrorCode::invalid_argument, "volume name " + text::quoted(name) +
                                                  " must be one path component of 1 to 255 bytes, "
                                                  "without '/' (e.g. vm1-root.qcow2)"};
  }
  return ok_status();
}

std::string overlay_volume_xml(const std::string& name, const std::string& backing_path, const BackingImage& backing) {
  pugi::xml_document doc;
  pugi::xml_node volume = doc.append_child("volume");
  volume.append_child("name").text().set(name.c_str());
  pugi::xml_node capacity = volume.append_child("capacity");
  capacity.append_attribute("unit").set_value("bytes");
  capacity.text().set(std::to_string(backing.virtual_size).c_str());
  volume.append_child("target").append_child("format").append_attribute("type").set_value("qcow2");
  pugi::xml_node backing_store = volume.append_child("backingStore");
  backing_store.append_child("path").text().set(backing_path.c_str());
  backing_store.append_child("format").append_attribute("type").set_value(backing.format.c_str());
  std::ostringstream out;
  doc.save(out, "  ", pugi::format_indent | pugi::format_no_declaration, pugi::encoding_utf8);
  return out.str();
}

}  // namespace hostagent::virt::detail
