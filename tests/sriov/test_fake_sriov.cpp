// The fake kernel's SR-IOV model: what sriov_numvfs writes do, as drivers/pci/iov.c does them.
#include <doctest/doctest.h>

#include <cerrno>
#include <cstring>
#include <set>

#include "hostagent/discovery/discovery.hpp"
#include "sriov_fixture.hpp"

namespace hostagent::sriov {
namespace {

namespace fs = std::filesystem;
using fake::kPf;
using fake::kPfDir;
using fake::Vela2;
using hostagent::testing::snapshot_tree;

Status numvfs(Vela2& host, const std::string& value) {
  return host.kernel.write(kPfDir + "/sriov_numvfs", value);
}

TEST_CASE("the fake kernel answers sriov_numvfs writes with the errors of sriov_numvfs_store") {
  Vela2 host;
  const auto before = snapshot_tree(host.dir.path());
  const auto range = numvfs(host, "17\n");
  REQUIRE_FALSE(range.ok());
  CHECK(range.error().message.find(std::strerror(ERANGE)) != std::string::npos);
  const auto busy = numvfs(host, "8\n");
  REQUIRE_FALSE(busy.ok());
  CHECK(busy.error().code == ErrorCode::conflict);
  CHECK(busy.error().message.find(std::strerror(EBUSY)) != std::string::npos);
  for (const char* garbage : {"abc\n", "-1\n", "4 VFs\n", "\n"}) {
    CAPTURE(garbage);
    const auto bad = numvfs(host, garbage);
    REQUIRE_FALSE(bad.ok());
    CHECK(bad.error().message.find(std::strerror(EINVAL)) != std::string::npos);
  }
  CHECK(numvfs(host, "4\n").ok());  // the current count: nothing happens
  CHECK(snapshot_tree(host.dir.path()) == before);
}

TEST_CASE("the fake kernel refuses SR-IOV changes on a PF without a driver with ENOENT") {
  Vela2 host;
  fs::remove(host.host(kPfDir + "/driver"));
  const auto result = numvfs(host, "0\n");
  REQUIRE_FALSE(result.ok());
  CHECK(result.error().code == ErrorCode::not_found);
  CHECK(host.get(kPfDir + "/sriov_numvfs") == "4");
}

TEST_CASE("writing 0 removes the VFs with their bus, driver, group and class links") {
  Vela2 host;
  const std::string group = *host.sysfs.read_link_name("/sys/bus/pci/devices/0000:19:00.2/iommu_group").value();
  REQUIRE(numvfs(host, "0\n").ok());
  CHECK(host.get(kPfDir + "/sriov_numvfs") == "0");
  for (int n = 0; n < 4; ++n) {
    const std::string vf = "0000:19:00." + std::to_string(n + 1);
    CAPTURE(vf);
    CHECK_FALSE(fs::exists(fs::symlink_status(host.host(kPfDir + "/virtfn" + std::to_string(n)))));
    CHECK_FALSE(fs::exists(fs::symlink_status(host.host("/sys/bus/pci/devices/" + vf))));
    CHECK_FALSE(fs::exists(fs::symlink_status(host.host("/sys/bus/pci/drivers/mlx5_core/" + vf))));
    CHECK_FALSE(fs::exists(fs::symlink_status(host.host("/sys/class/net/ens1v" + std::to_string(n)))));
    CHECK_FALSE(fs::exists(fs::symlink_status(host.host("/sys/class/infiniband/mlx5_" + std::to_string(8 + n)))));
  }
  CHECK_FALSE(fs::exists(host.host("/sys/kernel/iommu_groups/" + group)));
  // The PF and the other PFs' VFs stay.
  CHECK(fs::exists(host.host("/sys/class/net/ens1np0")));
  CHECK(fs::exists(host.host("/sys/bus/pci/devices/0000:2a:00.1")));
}

TEST_CASE("writing N creates VFs at the routing IDs sriov_offset and sriov_stride give") {
  Vela2 host;
  REQUIRE(numvfs(host, "0\n").ok());
  host.put(kPfDir + "/sriov_stride", "2\n");
  host.put(kPfDir + "/sriov_offset", "5\n");
  REQUIRE(numvfs(host, "3\n").ok());
  CHECK(host.get(kPfDir + "/sriov_numvfs") == "3");
  // 19:00.0 is routing ID 0x1900; + 5 + 2n = 0x1905, 0x1907, 0x1909 = 19:00.5, 19:00.7, 19:01.1.
  const std::vector<std::string> expected{"0000:19:00.5", "0000:19:00.7", "0000:19:01.1"};
  std::set<std::string> groups;
  for (std::size_t n = 0; n < expected.size(); ++n) {
    const std::string& vf = expected[n];
    const std::string dir = "/sys/bus/pci/devices/" + vf;
    CAPTURE(vf);
    CHECK(*host.sysfs.read_link_name(kPfDir + "/virtfn" + std::to_string(n)).value() == vf);
    CHECK(*host.sysfs.read_link_name(dir + "/physfn").value() == kPf);
    CHECK(fs::equivalent(host.host(dir + "/physfn"), host.host(kPfDir)));
    // A sibling of the PF under the same downstream port.
    CHECK(fs::equivalent(fs::canonical(host.host(dir)).parent_path(), fs::canonical(host.host(kPfDir)).parent_path()));
    CHECK(host.get(dir + "/vendor") == "0x15b3");
    CHECK(host.get(dir + "/device") == "0x101e");
    CHECK(host.get(dir + "/class") == host.get(kPfDir + "/class"));
    CHECK(host.get(dir + "/numa_node") == host.get(kPfDir + "/numa_node"));
    CHECK(*host.sysfs.read_link_name(dir + "/driver").value() == "mlx5_core");
    CHECK(fs::is_symlink(host.host("/sys/bus/pci/drivers/mlx5_core/" + vf)));
    const std::string group = *host.sysfs.read_link_name(dir + "/iommu_group").value();
    groups.insert(group);
    CHECK(fs::is_symlink(host.host("/sys/kernel/iommu_groups/" + group + "/devices/" + vf)));
    CHECK(host.sysfs.list("/sys/kernel/iommu_groups/" + group + "/devices", false).value().size() == 1);
  }
  CHECK(groups.size() == 3);
}

TEST_CASE("VFs stay unbound when the PF's sriov_drivers_autoprobe is 0") {
  Vela2 host;
  REQUIRE(numvfs(host, "0\n").ok());
  host.put(kPfDir + "/sriov_drivers_autoprobe", "0\n");
  REQUIRE(numvfs(host, "2\n").ok());
  CHECK_FALSE(host.sysfs.read_link_name("/sys/bus/pci/devices/0000:19:00.1/driver").value().has_value());
  CHECK_FALSE(fs::exists(fs::symlink_status(host.host("/sys/bus/pci/drivers/mlx5_core/0000:19:00.1"))));
}

TEST_CASE("the VF driver comes from the options, and a driver that is not loaded binds nothing") {
  Vela2 host({{{kPf, "vfio-pci"}}, {}});
  fs::remove_all(host.host("/sys/bus/pci/drivers/vfio-pci"));  // not loaded
  REQUIRE(numvfs(host, "0\n").ok());
  REQUIRE(numvfs(host, "1\n").ok());
  CHECK_FALSE(host.sysfs.read_link_name("/sys/bus/pci/devices/0000:19:00.1/driver").value().has_value());
  fs::create_directories(host.host("/sys/bus/pci/drivers/vfio-pci"));
  REQUIRE(numvfs(host, "0\n").ok());
  REQUIRE(numvfs(host, "1\n").ok());
  CHECK(*host.sysfs.read_link_name("/sys/bus/pci/devices/0000:19:00.1/driver").value() == "vfio-pci");
}

TEST_CASE("a PF driver that enables fewer VFs leaves sriov_numvfs at what it enabled") {
  Vela2 host({{}, {{kPf, 2}}});
  REQUIRE(numvfs(host, "0\n").ok());
  REQUIRE(numvfs(host, "6\n").ok());  // the kernel only warns
  CHECK(host.get(kPfDir + "/sriov_numvfs") == "2");
  CHECK(fs::is_symlink(host.host(kPfDir + "/virtfn1")));
  CHECK_FALSE(fs::exists(fs::symlink_status(host.host(kPfDir + "/virtfn2"))));
}

TEST_CASE("discovery reads the VFs the model created as it reads a host's") {
  Vela2 host;
  REQUIRE(numvfs(host, "0\n").ok());
  REQUIRE(numvfs(host, "6\n").ok());
  const auto model = discovery::discover_from_sysfs(host.dir.path());
  REQUIRE(model.ok());
  const auto* pf = model->find(numa::PciAddress::parse(kPf).value());
  REQUIRE(pf != nullptr);
  REQUIRE(pf->sriov.has_value());
  CHECK(pf->sriov->num_vfs == 6);
  REQUIRE(pf->sriov->vfs.size() == 6);
  for (const auto& address : pf->sriov->vfs) {
    const auto* vf = model->find(address);
    REQUIRE(vf != nullptr);
    CHECK(vf->physfn == pf->address);
    CHECK(vf->numa_node == pf->numa_node);
    CHECK(vf->driver == std::optional<std::string>("mlx5_core"));
  }
}

}  // namespace
}  // namespace hostagent::sriov
