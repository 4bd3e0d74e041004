#include <doctest/doctest.h>

#include "hostagent/numa/discovery.hpp"
#include "hostagent/simhost/sim_host.hpp"
#include "hostagent/sriov/vf_inventory.hpp"
#include "test_support.hpp"

namespace hostagent::sriov {
namespace {

TEST_CASE("the VF inventory of vela2 lists each ConnectX-7 PF with its VFs, netdevs and RDMA devices") {
  testing::TempDir dir;
  REQUIRE(simhost::write_sysfs_tree(simhost::builtin_host("vela2").value(), dir.path()).ok());
  const auto model = numa::discover_from_sysfs(dir.path()).value();
  const auto pfs = vf_inventory(model);
  REQUIRE(pfs.size() == 8);
  for (const auto& pf : pfs) {
    CAPTURE(pf.address.to_string());
    CHECK(pf.total_vfs == 16);
    CHECK(pf.num_vfs == 4);
    REQUIRE(pf.vfs.size() == 4);
    CHECK(pf.pcie_switch.has_value());
    CHECK(pf.numa_node.has_value());
    for (size_t n = 0; n < pf.vfs.size(); ++n) {
      CHECK(pf.vfs[n].index == static_cast<int>(n));
      CHECK(model.find(pf.vfs[n].address)->physfn == pf.address);
      CHECK_FALSE(pf.vfs[n].net_interfaces.empty());
      CHECK_FALSE(pf.vfs[n].rdma_devices.empty());
    }
  }
}

TEST_CASE("hosts without SR-IOV NICs have an empty inventory") {
  testing::TempDir dir;
  REQUIRE(simhost::write_sysfs_tree(simhost::builtin_host("workstation").value(), dir.path()).ok());
  CHECK(vf_inventory(numa::discover_from_sysfs(dir.path()).value()).empty());
}

}  // namespace
}  // namespace hostagent::sriov
