// vfio/expansion_rom: enable, read, disable, hash.
#include "hostagent/vfio/expansion_rom.hpp"

#include "hostagent/common/sha256.hpp"

namespace hostagent::vfio {
namespace {

std::string rom_path(const PciAddress& function) {
  return "/sys/bus/pci/devices/" + function.to_string() + "/rom";
}

Result<RomImage> checked_image(const PciAddress& function, const std::string& image) {
  // PCI Firmware Specification 3.x, 5.1: each ROM image begins with 0x55, 0xAA.
  if (image.size() < 2 || static_cast<unsigned char>(image[0]) != 0x55 ||
      static_cast<unsigned char>(image[1]) != 0xAA) {
    return Error{ErrorCode::io_error, "the expansion ROM of " + function.to_string() + " (" +
                                          std::to_string(image.size()) +
                                          " bytes) does not begin with the 0x55AA signature: no firmware image "
                                          "the device could boot, and nothing to vouch for"};
  }
  return RomImage{image.size(), sha256_hex(image)};
}

}  // namespace

Result<std::optional<RomImage>> read_expansion_rom(const SysfsRoot& sysfs, SysfsWriter& writer,
                                                   const PciAddress& function) {
  const std::string path = rom_path(function);
  if (!sysfs.exists(path)) return std::optional<RomImage>();
  HA_TRY_STATUS(writer.write(path, "1"));
  auto image = sysfs.read_binary(path);
  const auto disabled = writer.write(path, "0");
  HA_TRY(const auto bytes, std::move(image));
  HA_TRY(auto checked, checked_image(function, bytes));
  HA_TRY_STATUS(disabled);
  return std::optional<RomImage>(std::move(checked));
}

}  // namespace hostagent::vfio
