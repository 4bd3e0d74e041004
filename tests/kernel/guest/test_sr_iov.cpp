// Inside the emulated GPU host: SR-IOV on QEMU's NVMe PF with Debian's kernel (drivers/pci/iov.c):
// sriov_numvfs creates the VFs with their virtfnN and physfn links, each VF in an IOMMU group of its
// own, a new count is taken only from 0 (EBUSY otherwise), and 0 removes them.
#include <doctest/doctest.h>

#include "../emulated_host.hpp"
#include "guest_host.hpp"

namespace hostagent::testing::guest {
namespace {

namespace host = emulated_host;

std::vector<PciAddress> virtfns(const PciAddress& pf) {
  std::vector<PciAddress> vfs;
  for (int i = 0;; ++i) {
    const auto vf = sysfs().read_link_name(pci_path(pf, "virtfn" + std::to_string(i))).value();
    if (!vf) break;
    vfs.push_back(PciAddress::parse(*vf).value());
  }
  return vfs;
}

// The VFs' own driver probe would wait for a controller QEMU keeps offline until the PF assigns it
// resources (NVMe virtualization management): autoprobe off, as for VFs meant for vfio-pci.
struct NoAutoprobe {
  explicit NoAutoprobe(const PciAddress& pf) : pf_(pf) {
    require_ok(writer().write(pci_path(pf_, "sriov_drivers_autoprobe"), "0"), "sriov_drivers_autoprobe");
  }
  ~NoAutoprobe() { (void)writer().write(pci_path(pf_, "sriov_drivers_autoprobe"), "1"); }
  NoAutoprobe(const NoAutoprobe&) = delete;
  NoAutoprobe& operator=(const NoAutoprobe&) = delete;

 private:
  PciAddress pf_;
};

TEST_CASE("sriov_numvfs on the nvme PF creates VFs, each in a group of its own, and 0 removes them") {
  const auto nvmes = pci_functions(host::kNvmeVendor, host::kNvmeDevice);
  REQUIRE(!nvmes.empty());
  const PciAddress pf = nvmes.front();
  REQUIRE(sysfs().read_int(pci_path(pf, "sriov_numvfs")).value() == 0);
  NoAutoprobe autoprobe(pf);

  require_ok(writer().write(pci_path(pf, "sriov_numvfs"), "2"), "sriov_numvfs=2");
  const auto vfs = virtfns(pf);
  REQUIRE(vfs.size() == 2);
  CHECK(sysfs().read_int(pci_path(pf, "sriov_numvfs")).value() == 2);
  std::vector<int> groups;
  for (const auto& vf : vfs) {
    INFO(vf.to_string());
    CHECK(sysfs().read_link_name(pci_path(vf, "physfn")).value() == std::optional<std::string>(pf.to_string()));
    CHECK_FALSE(driver_of(vf).has_value());
    const int group = iommu_group_of(vf);
    CHECK(group >= 0);
    CHECK(group != iommu_group_of(pf));
    CHECK(group_members(group) == std::vector<PciAddress>{vf});
    groups.push_back(group);
  }
  CHECK(groups.front() != groups.back());

  // A change from one non-zero count to another is refused (sriov_numvfs_store: EBUSY).
  const auto again = writer().write(pci_path(pf, "sriov_numvfs"), "3");
  REQUIRE_FALSE(again.ok());
  CHECK(again.error().code == ErrorCode::conflict);
  CHECK(virtfns(pf).size() == 2);

  require_ok(writer().write(pci_path(pf, "sriov_numvfs"), "0"), "sriov_numvfs=0");
  CHECK(virtfns(pf).empty());
  for (const auto& vf : vfs) CHECK_FALSE(sysfs().exists(pci_path(vf)));
}

TEST_CASE("an nvme VF goes to vfio-pci and gets its group's /dev/vfio/N") {
  const auto nvmes = pci_functions(host::kNvmeVendor, host::kNvmeDevice);
  REQUIRE(!nvmes.empty());
  const PciAddress pf = nvmes.front();
  NoAutoprobe autoprobe(pf);
  require_ok(writer().write(pci_path(pf, "sriov_numvfs"), "1"), "sriov_numvfs=1");
  const auto vfs = virtfns(pf);
  REQUIRE(vfs.size() == 1);
  const PciAddress vf = vfs.front();
  const int group = iommu_group_of(vf);

  require_ok(writer().write(pci_path(vf, "driver_override"), "vfio-pci"), "driver_override");
  require_ok(writer().write("/sys/bus/pci/drivers_probe", vf.to_string()), "drivers_probe");
  CHECK(driver_of(vf) == std::optional<std::string>("vfio-pci"));
  CHECK(wait_until([&] { return sysfs().exists("/dev/vfio/" + std::to_string(group)); }));

  require_ok(writer().write("/sys/bus/pci/drivers/vfio-pci/unbind", vf.to_string()), "unbind");
  require_ok(writer().write(pci_path(pf, "sriov_numvfs"), "0"), "sriov_numvfs=0");
  CHECK(virtfns(pf).empty());
}

}  // namespace
}  // namespace hostagent::testing::guest
