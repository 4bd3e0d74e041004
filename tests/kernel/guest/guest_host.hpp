// The guest side of the real-kernel harness: helpers for the test cases that run inside the
// emulated GPU host (tests/kernel/emulated_host.hpp), as root, on Debian's kernel. Reads go through
// hostagent::SysfsRoot and writes through hostagent::make_sysfs_writer("/"), as the daemon's do.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "hostagent/common/pci_address.hpp"
#include "hostagent/common/sysfs_root.hpp"
#include "hostagent/common/sysfs_writer.hpp"

namespace hostagent::testing::guest {

// The live tree and a writer, both under "/".
const SysfsRoot& sysfs();
SysfsWriter& writer();

// "/sys/bus/pci/devices/0000:23:00.0" + "/" + attribute.
std::string pci_path(const PciAddress& device, const std::string& attribute = "");

// The PCI functions with this vendor and device ID, in address order.
std::vector<PciAddress> pci_functions(uint16_t vendor, uint16_t device);

// The function's driver now; nullopt when it is unbound.
std::optional<std::string> driver_of(const PciAddress& device);

// The function's IOMMU group number (its iommu_group link), or -1 without one.
int iommu_group_of(const PciAddress& device);

// The functions of IOMMU group `group`, in address order.
std::vector<PciAddress> group_members(int group);

// The bridge directly above device (the parent in /sys/devices); nullopt on a root bus.
std::optional<PciAddress> parent_bridge(const PciAddress& device);

// Extended capability IDs (include/uapi/linux/pci_regs.h: PCI_EXT_CAP_ID_ACS, PCI_EXT_CAP_ID_ATS).
inline constexpr int kAcs = 0x000d;
inline constexpr int kAts = 0x000f;

// The offset of extended capability cap_id in device's config space (read through sysfs: root
// reads all 4096 bytes), nullopt when it has none.
std::optional<int> ext_capability(const PciAddress& device, int cap_id);
// 16-bit config space registers through the device's config attribute (pread/pwrite, as libpci's
// sysfs method does).
uint16_t read_config16(const PciAddress& device, int offset);
void write_config16(const PciAddress& device, int offset, uint16_t value);

// /dev/vfio/GROUP, the group's character device once vfio-pci holds all of it.
inline std::string vfio_node(int group) {
  return "/dev/vfio/" + std::to_string(group);
}

// /sys/bus/netdevsim/devices/netdevsimID, the device /init created.
inline std::string netdevsim_device(int id) {
  return "/sys/bus/netdevsim/devices/netdevsim" + std::to_string(id);
}

// The netdev of netdevsim device `id`'s first port ("eth0"), as /init created it; "" when none.
std::string netdevsim_netdev(int id);

// Polls until done() or timeout: the kernel finishes some work after the write returns (a probe
// runs asynchronously, a device node appears after its uevent).
bool wait_until(const std::function<bool()>& done, std::chrono::milliseconds timeout = std::chrono::seconds(10));

// The value a writer call gave, or a failed REQUIRE naming the error (for setup steps).
void require_ok(const Status& status, const std::string& what);

}  // namespace hostagent::testing::guest
