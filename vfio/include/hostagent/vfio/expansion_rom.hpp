// vfio/expansion_rom: a PCI function's expansion ROM (a GPU's VBIOS, a NIC's boot ROM) read through
// sysfs and hashed, so that the firmware a tenant could have rewritten is compared with what the
// operator knows to be good before the device goes to the next tenant (issue 19's cleaning).
//
// The kernel interface (Documentation/ABI/testing/sysfs-bus-pci, "rom"; drivers/pci/pci-sysfs.c
// pci_write_rom and pci_read_rom): the attribute exists only for a function with a ROM BAR; a read
// fails with EINVAL until "1" is written to it; a read then maps the ROM (pci_map_rom checks each
// image's 0x55AA signature and sizes the ROM from them) and returns its bytes; "0" disables it
// again. The write of "0" is made whatever the read did: a ROM left enabled keeps its BAR decoding.
#pragma once

#include <cstddef>
#include <optional>
#include <string>

#include "hostagent/common/pci_address.hpp"
#include "hostagent/common/result.hpp"
#include "hostagent/common/sysfs_root.hpp"
#include "hostagent/common/sysfs_writer.hpp"

namespace hostagent::vfio {

struct RomImage {
  std::size_t size = 0;
  std::string sha256;  // common/sha256's hex
};

// The ROM's size and SHA-256; nullopt when the function has no ROM (no `rom` attribute). An image
// that does not begin with the 0x55AA signature, or that reads empty, is an io_error naming the
// function: it is not firmware the device could boot, and what it is cannot be vouched for.
Result<std::optional<RomImage>> read_expansion_rom(const SysfsRoot& sysfs, SysfsWriter& writer,
                                                   const PciAddress& function);

}  // namespace hostagent::vfio
