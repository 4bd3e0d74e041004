// vfio/config_space_access: ConfigSpace through libpci's sysfs method. Reads and writes go to
// "<root>/sys/bus/pci/devices/<address>/config" (lib/sysfs.c: pread/pwrite on that file; the kernel
// side is drivers/pci/pci-sysfs.c, pci_read_config/pci_write_config).
#include "hostagent/vfio/config_space_access.hpp"

extern "C" {
#include <pci/pci.h>
}

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <mutex>
#include <string>

#include "hostagent/discovery/libpci_session.hpp"

namespace hostagent::vfio {
namespace {

constexpr int kConfigSpaceSize = 4096;  // PCIe extended configuration space
constexpr int kHeaderSize = 64;         // the standard header every function has

std::string hex(int value) {
  char buf[16];
  std::snprintf(buf, sizeof buf, "0x%x", static_cast<unsigned>(value));
  return buf;
}

Status check_offset(const numa::PciAddress& device, int offset) {
  if (offset >= 0 && offset + 2 <= kConfigSpaceSize && offset % 2 == 0) return ok_status();
  return Error{ErrorCode::invalid_argument, "config space offset " + hex(offset) + " of " + device.to_string() +
                                                " is not a 2-byte aligned register below 0x1000"};
}

struct DeviceDeleter {
  void operator()(pci_dev* dev) const { pci_free_dev(dev); }  // closes the config file libpci opened
};
using DevicePtr = std::unique_ptr<pci_dev, DeviceDeleter>;

class LibpciConfigSpace final : public ConfigSpace {
 public:
  LibpciConfigSpace(discovery::LibpciSession session, std::filesystem::path bus_pci)
      : session_(std::move(session)), bus_pci_(std::move(bus_pci)) {}

  Result<uint16_t> read16(const numa::PciAddress& device, int offset) override {
    HA_TRY_STATUS(check_offset(device, offset));
    const std::lock_guard lock(mutex_);
    uint8_t bytes[2] = {0, 0};
    HA_TRY_STATUS(read_block(device, offset, bytes, sizeof bytes));
    return static_cast<uint16_t>(bytes[0] | (bytes[1] << 8));  // config space is little-endian
  }

  Status write16(const numa::PciAddress& device, int offset, uint16_t value) override {
    HA_TRY_STATUS(check_offset(device, offset));
    const std::lock_guard lock(mutex_);
    const DevicePtr dev = open(device);
    pci_dev* raw = dev.get();
    int written = 0;
    // pci_write_word converts to little-endian and pwrite()s the config file, which the kernel
    // turns into config cycles (pci_write_config in drivers/pci/pci-sysfs.c).
    if (!discovery::LibpciSession::call(
            [raw, offset, value, &written] { written = pci_write_word(raw, offset, value); }) ||
        written == 0) {
      return failure("write " + hex(value) + " to", device, offset);
    }
    return ok_status();
  }

  Result<std::optional<int>> find_ext_capability(const numa::PciAddress& device, int cap_id) override {
    const std::lock_guard lock(mutex_);
    uint8_t header[kHeaderSize];
    HA_TRY_STATUS(read_block(device, 0, header, sizeof header));
    const DevicePtr dev = open(device);
    pci_dev* raw = dev.get();
    pci_cap* cap = nullptr;
    // A 256-byte config file (conventional PCI) reads as no extended capabilities: libpci's chain
    // walk stops at the failed read of 0x100 (lib/caps.c, pci_scan_ext_caps).
    if (!discovery::LibpciSession::call(
            [raw, cap_id, &cap] { cap = pci_find_cap(raw, static_cast<unsigned>(cap_id), PCI_CAP_EXTENDED); })) {
      return failure("walk the extended capabilities of", device, 0x100);
    }
    if (cap == nullptr) return std::optional<int>{};
    return std::optional<int>{static_cast<int>(cap->addr)};
  }

 private:
  DevicePtr open(const numa::PciAddress& device) {
    pci_dev* dev =
        pci_get_dev(session_.access(), static_cast<int>(device.domain), device.bus, device.device, device.function);
    HA_ASSERT(dev != nullptr);  // pci_get_dev only allocates; libpci's allocator exits rather than fail
    return DevicePtr(dev);
  }

  Status read_block(const numa::PciAddress& device, int offset, uint8_t* buf, int length) {
    const DevicePtr dev = open(device);
    pci_dev* raw = dev.get();
    int read = 0;
    if (!discovery::LibpciSession::call(
            [raw, offset, buf, length, &read] { read = pci_read_block(raw, offset, buf, length); }) ||
        read == 0) {
      return failure("read", device, offset);
    }
    return ok_status();
  }

  Error failure(const std::string& operation, const numa::PciAddress& device, int offset) const {
    const std::string file = (bus_pci_ / "devices" / device.to_string() / "config").string();
    const auto& said = discovery::LibpciSession::report();
    std::string why = said.message.empty() ? "the file is shorter than the register" : said.message;
    ErrorCode code = ErrorCode::io_error;
    if (said.err == ENOENT) {
      code = ErrorCode::not_found;
      why += " (is " + device.to_string() + " on this host?)";
    } else if (said.err == EPERM || said.err == EACCES) {
      // Config writes need CAP_SYS_ADMIN, and kernel lockdown refuses them past the header
      // (pci_write_config: security_locked_down(LOCKDOWN_PCI_ACCESS)).
      why += " (run as root, with kernel lockdown off)";
    }
    return Error{
        code, operation + " config space of " + device.to_string() + " at " + hex(offset) + " (" + file + "): " + why};
  }

  std::mutex mutex_;
  discovery::LibpciSession session_;
  std::filesystem::path bus_pci_;
};

}  // namespace

Result<std::unique_ptr<ConfigSpace>> make_libpci_config_space(const std::filesystem::path& sysfs_root) {
  const std::filesystem::path bus_pci = sysfs_root / "sys" / "bus" / "pci";
  HA_TRY(auto session, discovery::LibpciSession::open(bus_pci));
  return std::unique_ptr<ConfigSpace>(std::make_unique<LibpciConfigSpace>(std::move(session), bus_pci));
}

}  // namespace hostagent::vfio
