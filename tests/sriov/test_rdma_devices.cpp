// RDMA devices from a fixture's sysfs, the RoCE v2 GID choice, and the verbs reader on a machine
// without RDMA devices (the real ones are read in the QEMU guest suite, soft-RoCE).
#include <doctest/doctest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>

#include "hostagent/discovery/discovery.hpp"
#include "hostagent/simhost/sim_host.hpp"
#include "hostagent/sriov/rdma_devices.hpp"
#include "test_support.hpp"

namespace hostagent::sriov {
namespace {

namespace fs = std::filesystem;

const std::string kPort = "/sys/class/infiniband/mlx5_0/ports/1";

struct Host {
  explicit Host(const std::string& name) {
    REQUIRE(simhost::write_sysfs_tree(simhost::builtin_host(name).value(), dir.path()).ok());
  }
  SysfsRoot sysfs() const { return SysfsRoot::open(dir.path()).value(); }
  void put(const std::string& kernel_path, const std::string& contents) const {
    const fs::path path = dir.path() / fs::path(kernel_path).relative_path();
    fs::create_directories(path.parent_path());
    std::ofstream(path, std::ios::trunc) << contents;
  }
  hostagent::testing::TempDir dir;
};

const RdmaDevice* named(const std::vector<RdmaDevice>& devices, const std::string& name) {
  for (const auto& d : devices) {
    if (d.name == name) return &d;
  }
  return nullptr;
}

TEST_CASE("the sysfs reader finds every RDMA device of vela2 with its PCI function, ports and GIDs") {
  Host host("vela2");
  const auto devices = read_rdma_devices_sysfs(host.sysfs());
  REQUIRE(devices.ok());
  CHECK(devices->size() == 40);  // 8 PFs and their 32 VFs
  const auto model = discovery::discover_from_sysfs(host.dir.path()).value();
  for (const auto& device : *devices) {
    CAPTURE(device.name);
    REQUIRE(device.pci.has_value());
    const auto* function = model.find(*device.pci);
    REQUIRE(function != nullptr);
    CHECK(std::find(function->rdma_devices.begin(), function->rdma_devices.end(), device.name) !=
          function->rdma_devices.end());
    CHECK(device.node_guid.size() == 19);
    REQUIRE(device.ports.size() == 1);
  }
  const auto* mlx5_0 = named(*devices, "mlx5_0");
  REQUIRE(mlx5_0 != nullptr);
  CHECK(mlx5_0->pci->to_string() == "0000:19:00.0");
  CHECK(mlx5_0->node_guid == host.sysfs().read("/sys/class/infiniband/mlx5_0/node_guid").value());
  const auto& port = mlx5_0->ports.front();
  CHECK(port.port == 1);
  CHECK(port.state == "ACTIVE");
  CHECK(port.link_layer == "Ethernet");
  CHECK(port.port_guid.empty());
  REQUIRE(port.gids.size() == 2);
  CHECK(port.gids[0].type == "IB/RoCE v1");
  CHECK(port.gids[1].type == "RoCE v2");
  CHECK(port.gids[1].netdev == "ens1np0");
  CHECK(port.gids[1].gid == host.sysfs().read(kPort + "/gids/1").value());
  CHECK(port.gids[1].gid.rfind("fe80:", 0) == 0);
  CHECK(roce_v2_gid_index(port) == std::optional<int>(1));
}

TEST_CASE("the sysfs reader skips empty GID entries and picks an IPv4 RoCE v2 GID when the port has one") {
  Host host("vela2");
  host.put(kPort + "/gids/2", "0000:0000:0000:0000:0000:0000:0000:0000\n");
  host.put(kPort + "/gids/3", "0000:0000:0000:0000:0000:ffff:0a00:0001\n");
  host.put(kPort + "/gid_attrs/types/3", "RoCE v2\n");
  host.put(kPort + "/gid_attrs/ndevs/3", "ens1np0\n");
  host.put(kPort + "/gids/10", "0000:0000:0000:0000:0000:ffff:0a00:0002\n");
  host.put(kPort + "/gid_attrs/types/10", "IB/RoCE v1\n");
  host.put(kPort + "/gid_attrs/ndevs/10", "ens1np0\n");
  const auto devices = read_rdma_devices_sysfs(host.sysfs());
  REQUIRE(devices.ok());
  const auto& port = named(*devices, "mlx5_0")->ports.front();
  REQUIRE(port.gids.size() == 4);
  CHECK(port.gids[2].index == 3);
  CHECK(port.gids[3].index == 10);  // numeric order, not name order
  CHECK(roce_v2_gid_index(port) == std::optional<int>(3));
  CHECK(roce_v2_gid_index(port, std::string("ens1np0")) == std::optional<int>(3));
  CHECK_FALSE(roce_v2_gid_index(port, std::string("ens2np0")).has_value());
}

TEST_CASE("an InfiniBand port reports its port GUID from GID 0") {
  Host host("vela2");
  host.put(kPort + "/link_layer", "InfiniBand\n");
  host.put(kPort + "/gids/0", "fe80:0000:0000:0000:0c42:a103:0012:3456\n");
  const auto devices = read_rdma_devices_sysfs(host.sysfs());
  REQUIRE(devices.ok());
  CHECK(named(*devices, "mlx5_0")->ports.front().port_guid == "0c42:a103:0012:3456");
}

TEST_CASE("the sysfs reader names a GID file it cannot parse") {
  Host host("vela2");
  host.put(kPort + "/gids/1", "fe80::1\n");
  const auto devices = read_rdma_devices_sysfs(host.sysfs());
  REQUIRE_FALSE(devices.ok());
  CHECK(devices.error().code == ErrorCode::parse_error);
  CHECK(devices.error().message.find("ports/1/gids/1") != std::string::npos);
}

TEST_CASE("one function's RDMA devices are those registered under it, and a function without one has none") {
  Host host("vela2");
  const auto all = read_rdma_devices_sysfs(host.sysfs()).value();
  int with_rdma = 0;
  for (const auto& device : all) {
    const auto of = read_rdma_devices_of(host.sysfs(), *device.pci);
    REQUIRE(of.ok());
    REQUIRE(of->size() == 1);
    CHECK(of->front().name == device.name);
    CHECK(of->front().pci == device.pci);
    CHECK(of->front().node_guid == device.node_guid);
    ++with_rdma;
  }
  CHECK(with_rdma == 40);
  // A GPU registers no RDMA device.
  const auto model = discovery::discover_from_sysfs(host.dir.path()).value();
  for (const auto& function : model.pci_devices) {
    if (function.role != numa::PciRole::gpu) continue;
    const auto none = read_rdma_devices_of(host.sysfs(), function.address);
    REQUIRE(none.ok());
    CHECK(none->empty());
  }
}

TEST_CASE("a host without RDMA devices reads as an empty list") {
  Host host("workstation");
  const auto devices = read_rdma_devices_sysfs(host.sysfs());
  REQUIRE(devices.ok());
  CHECK(devices->empty());
}

RdmaGid gid(int index, const std::string& text, const std::string& type, const std::string& netdev = "eth0") {
  return RdmaGid{index, text, type, netdev};
}

TEST_CASE("the RoCE v2 GID prefers IPv4-mapped, then global IPv6, then link-local, lowest index first") {
  const std::string link_local = "fe80:0000:0000:0000:0200:1aff:fe00:0100";
  const std::string global6 = "fd00:0000:0000:0000:0000:0000:0000:0005";
  const std::string ipv4 = "0000:0000:0000:0000:0000:ffff:c0a8:0105";
  RdmaPort port;
  port.gids = {gid(0, link_local, "IB/RoCE v1"), gid(1, link_local, "RoCE v2")};
  CHECK(roce_v2_gid_index(port) == std::optional<int>(1));
  port.gids.push_back(gid(4, global6, "RoCE v2"));
  port.gids.push_back(gid(5, global6, "IB/RoCE v1"));
  CHECK(roce_v2_gid_index(port) == std::optional<int>(4));
  port.gids.push_back(gid(7, ipv4, "IB/RoCE v1"));
  CHECK(roce_v2_gid_index(port) == std::optional<int>(4));  // a v1 IPv4 GID does not count
  port.gids.push_back(gid(9, ipv4, "RoCE v2", "eth1"));
  port.gids.push_back(gid(8, ipv4, "RoCE v2"));
  CHECK(roce_v2_gid_index(port) == std::optional<int>(8));
  CHECK(roce_v2_gid_index(port, std::string("eth1")) == std::optional<int>(9));
  RdmaPort v1_only;
  v1_only.gids = {gid(0, ipv4, "IB/RoCE v1")};
  CHECK_FALSE(roce_v2_gid_index(v1_only).has_value());
}

TEST_CASE("the verbs reader answers an empty list or a clear error on a machine without RDMA devices") {
  std::error_code ec;
  const bool has_rdma = fs::exists("/sys/class/infiniband", ec) && !fs::is_empty("/sys/class/infiniband", ec);
  const auto devices = read_rdma_devices_verbs();
  if (!devices.ok()) {
    CHECK(devices.error().message.find("RDMA") != std::string::npos);
    return;
  }
  if (!has_rdma) CHECK(devices->empty());
  for (const auto& device : *devices) {
    CHECK_FALSE(device.name.empty());
    CHECK_FALSE(device.ports.empty());
  }
}

}  // namespace
}  // namespace hostagent::sriov
