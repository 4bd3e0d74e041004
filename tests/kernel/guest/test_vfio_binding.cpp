// Inside the emulated GPU host: moving a function to vfio-pci and back by hand, through the sysfs
// attributes vfio/ writes (Documentation/ABI/testing/sysfs-bus-pci), on Debian's kernel with a
// real IOMMU: the group's /dev/vfio/N appears and VFIO finds the group viable with its bridge on
// pcieport (drivers/vfio/group.c, vfio_dev_driver_allowed).
#include <doctest/doctest.h>
#include <fcntl.h>
#include <linux/vfio.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../emulated_host.hpp"
#include "guest_host.hpp"

namespace hostagent::testing::guest {
namespace {

namespace host = emulated_host;

bool is_char_device(const std::string& path) {
  struct stat st {};
  return stat(path.c_str(), &st) == 0 && S_ISCHR(st.st_mode);
}

void bind_to_vfio(const PciAddress& device) {
  if (const auto driver = driver_of(device)) {
    require_ok(writer().write("/sys/bus/pci/drivers/" + *driver + "/unbind", device.to_string()), "unbind");
  }
  require_ok(writer().write(pci_path(device, "driver_override"), "vfio-pci"), "driver_override");
  require_ok(writer().write("/sys/bus/pci/drivers_probe", device.to_string()), "drivers_probe");
}

// Back from vfio-pci: unbind, clear the override ("\n"), probe again: the original driver, if any,
// takes it.
void release_from_vfio(const PciAddress& device) {
  require_ok(writer().write("/sys/bus/pci/drivers/vfio-pci/unbind", device.to_string()), "unbind from vfio-pci");
  require_ok(writer().write(pci_path(device, "driver_override"), "\n"), "clear driver_override");
  require_ok(writer().write("/sys/bus/pci/drivers_probe", device.to_string()), "drivers_probe");
}

// VFIO_GROUP_GET_STATUS on /dev/vfio/N: viable when every member is on a VFIO driver, unbound, or
// a bridge on pcieport.
bool group_viable(int group) {
  const int fd = open(vfio_node(group).c_str(), O_RDWR | O_CLOEXEC);
  REQUIRE_MESSAGE(fd >= 0, "open " << vfio_node(group));
  vfio_group_status status{};
  status.argsz = sizeof status;
  const int rc = ioctl(fd, VFIO_GROUP_GET_STATUS, &status);
  close(fd);
  REQUIRE_MESSAGE(rc == 0, "VFIO_GROUP_GET_STATUS on " << vfio_node(group));
  return (status.flags & VFIO_GROUP_FLAGS_VIABLE) != 0;
}

TEST_CASE(
    "an unbound edu goes to vfio-pci through driver_override and drivers_probe, its group is viable, and it comes back "
    "unbound") {
  const auto edus = pci_functions(host::kEduVendor, host::kEduDevice);
  REQUIRE(!edus.empty());
  const PciAddress edu = edus.front();
  const int group = iommu_group_of(edu);
  REQUIRE(group >= 0);
  REQUIRE_FALSE(driver_of(edu).has_value());  // no driver in Debian's kernel claims edu

  bind_to_vfio(edu);
  CHECK(driver_of(edu) == std::optional<std::string>("vfio-pci"));
  CHECK(wait_until([&] { return is_char_device(vfio_node(group)); }));
  // The group also holds the switch port above edu, which stays on pcieport.
  CHECK(group_members(group).size() == 2);
  CHECK(group_viable(group));

  release_from_vfio(edu);
  CHECK_FALSE(driver_of(edu).has_value());
  CHECK(sysfs().read(pci_path(edu, "driver_override")).value() == "(null)");
  CHECK(wait_until([&] { return !is_char_device(vfio_node(group)); }));
}

TEST_CASE("an nvme PF leaves nvme for vfio-pci and its original driver takes it back") {
  const auto nvmes = pci_functions(host::kNvmeVendor, host::kNvmeDevice);
  REQUIRE(nvmes.size() >= 2);
  const PciAddress pf = nvmes.back();  // the SR-IOV test cases use the first
  REQUIRE(driver_of(pf) == std::optional<std::string>("nvme"));
  const int group = iommu_group_of(pf);

  bind_to_vfio(pf);
  CHECK(driver_of(pf) == std::optional<std::string>("vfio-pci"));
  CHECK(wait_until([&] { return is_char_device(vfio_node(group)); }));
  CHECK(group_viable(group));

  release_from_vfio(pf);
  CHECK(wait_until([&] { return driver_of(pf) == std::optional<std::string>("nvme"); }));
}

TEST_CASE("a group with a member on a host driver is not viable, and becomes viable when that member is unbound") {
  // Q35's ICH9 functions share one group: the LPC bridge (00:1f.0, on lpc_ich, which /init loads:
  // the member the host is using), SATA (00:1f.2) and SMBus (00:1f.3), both unbound.
  const auto lpc = PciAddress::parse("0000:00:1f.0").value();
  const auto smbus = PciAddress::parse("0000:00:1f.3").value();
  const int group = iommu_group_of(smbus);
  REQUIRE(group == iommu_group_of(lpc));
  REQUIRE(driver_of(lpc) == std::optional<std::string>("lpc_ich"));
  REQUIRE_FALSE(driver_of(smbus).has_value());

  bind_to_vfio(smbus);
  REQUIRE(wait_until([&] { return is_char_device(vfio_node(group)); }));
  CHECK_FALSE(group_viable(group));
  require_ok(writer().write("/sys/bus/pci/drivers/lpc_ich/unbind", lpc.to_string()), "unbind lpc_ich");
  CHECK(group_viable(group));

  require_ok(writer().write("/sys/bus/pci/drivers/lpc_ich/bind", lpc.to_string()), "bind lpc_ich");
  release_from_vfio(smbus);
  CHECK(driver_of(lpc) == std::optional<std::string>("lpc_ich"));
  CHECK_FALSE(driver_of(smbus).has_value());
}

}  // namespace
}  // namespace hostagent::testing::guest
