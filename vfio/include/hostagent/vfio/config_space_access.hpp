// vfio/config_space_access: PCI configuration space of one function, read and written as 16-bit
// registers, behind an interface so that peer-to-peer settings can be tested against fixture trees
// and faults injected. The real implementation goes through libpci's sysfs method (the device's
// `config` attribute), never setpci.
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>

#include "hostagent/common/result.hpp"
#include "hostagent/numa/pci_address.hpp"

namespace hostagent::vfio {

class ConfigSpace {
 public:
  virtual ~ConfigSpace() = default;

  // offset: a 2-byte aligned register offset inside the 4096 bytes of PCIe configuration space.
  virtual Result<uint16_t> read16(const numa::PciAddress& device, int offset) = 0;
  // Writes only; the kernel drops writes to read-only bits silently, so callers that care read back.
  virtual Status write16(const numa::PciAddress& device, int offset, uint16_t value) = 0;
  // The offset of extended capability cap_id (PCIe Base Spec 7.6), nullopt when the function does
  // not have it. An error when the function's config space cannot be read at all.
  virtual Result<std::optional<int>> find_ext_capability(const numa::PciAddress& device, int cap_id) = 0;
};

// libpci over "<sysfs_root>/sys/bus/pci" ("/" on a real host). Thread-safe: calls are serialised,
// as one libpci handle may not be used from two threads at once.
Result<std::unique_ptr<ConfigSpace>> make_libpci_config_space(const std::filesystem::path& sysfs_root);

}  // namespace hostagent::vfio
