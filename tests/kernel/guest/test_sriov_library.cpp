// Inside the emulated GPU host: sriov/'s netlink VF configuration (libnl-route-3) on netdevsim's VFs,
// cross-checked with iproute2, and its RDMA readers on rxe0, sysfs against libibverbs.
#include <doctest/doctest.h>

#include "../emulated_host.hpp"
#include "guest_host.hpp"
#include "hostagent/sriov/rdma_devices.hpp"
#include "hostagent/sriov/vf_configurator.hpp"
#include "hostagent/sriov/vf_netlink.hpp"
#include "test_support.hpp"

namespace hostagent::testing::guest {
namespace {

namespace host = emulated_host;

std::string ip_vf_line(const std::string& pf) {
  const auto shown = run_command({"/usr/sbin/ip", "-d", "link", "show", "dev", pf});
  REQUIRE_MESSAGE(shown.exit_code == 0, shown.output);
  const auto at = shown.output.find("vf 0 ");
  REQUIRE_MESSAGE(at != std::string::npos, shown.output);
  return shown.output.substr(at, shown.output.find('\n', at) - at);
}

TEST_CASE("configure sets a netdevsim VF over libnl, iproute2 reads the same back, and reset makes it neutral") {
  const std::string pf = netdevsim_netdev(host::kNetdevsimId);
  REQUIRE(!pf.empty());
  require_ok(writer().write(netdevsim_device(host::kNetdevsimId) + "/sriov_numvfs", "1"), "sriov_numvfs=1");
  const auto netlink = sriov::make_libnl_vf_netlink();
  sriov::VfSettings wanted;
  wanted.mac = "52:54:00:ab:cd:ef";
  wanted.vlan = 42;
  wanted.qos = 5;
  wanted.trust = true;
  wanted.spoofchk = false;
  wanted.link_state = sriov::LinkState::enable;
  wanted.min_tx_rate_mbps = 5;
  wanted.max_tx_rate_mbps = 200;

  const auto record = sriov::configure(*netlink, pf, 0, wanted);
  REQUIRE_MESSAGE(record.ok(), record.error().message);
  const auto state = netlink->read(pf, 0);
  REQUIRE_MESSAGE(state.ok(), state.error().message);
  CHECK(state->mac == "52:54:00:ab:cd:ef");
  CHECK(state->vlan == 42);
  CHECK(state->qos == 5);
  CHECK(state->trust == std::optional<bool>(true));
  CHECK(state->spoofchk == std::optional<bool>(false));
  CHECK(state->link_state == std::optional<sriov::LinkState>(sriov::LinkState::enable));
  CHECK(state->min_tx_rate_mbps == 5);
  CHECK(state->max_tx_rate_mbps == 200);
  const std::string line = ip_vf_line(pf);
  INFO(line);
  CHECK(line.find("link/ether 52:54:00:ab:cd:ef") != std::string::npos);
  CHECK(line.find("vlan 42, qos 5") != std::string::npos);
  CHECK(line.find("trust on") != std::string::npos);
  CHECK(line.find("spoof checking off") != std::string::npos);
  CHECK(line.find("link-state enable") != std::string::npos);
  CHECK(line.find("max_tx_rate 200Mbps") != std::string::npos);

  const auto reset = sriov::reset(*netlink, *record);
  CHECK_MESSAGE(reset.ok(), (reset.ok() ? "" : reset.error().message));
  const auto neutral = netlink->read(pf, 0).value();
  CHECK(neutral.mac == "00:00:00:00:00:00");
  CHECK(neutral.vlan == 0);
  CHECK(neutral.trust == std::optional<bool>(false));
  CHECK(neutral.spoofchk == std::optional<bool>(true));
  CHECK(neutral.link_state == std::optional<sriov::LinkState>(sriov::LinkState::automatic));
  CHECK(neutral.max_tx_rate_mbps == 0);
  require_ok(writer().write(netdevsim_device(host::kNetdevsimId) + "/sriov_numvfs", "0"), "sriov_numvfs=0");
}

TEST_CASE("reading a VF the PF does not have is not_found, naming the netdev") {
  const std::string pf = netdevsim_netdev(host::kNetdevsimId);
  REQUIRE(!pf.empty());
  const auto missing = sriov::make_libnl_vf_netlink()->read(pf, 3);
  REQUIRE_FALSE(missing.ok());
  CHECK(missing.error().code == ErrorCode::not_found);
  CHECK(missing.error().message.find(pf) != std::string::npos);
}

const sriov::RdmaDevice* find_device(const std::vector<sriov::RdmaDevice>& devices, const std::string& name) {
  for (const auto& device : devices) {
    if (device.name == name) return &device;
  }
  return nullptr;
}

TEST_CASE("sysfs and libibverbs agree on rxe0, and its RoCE v2 GID index is 1, the IPv4 one") {
  const auto from_sysfs = sriov::read_rdma_devices_sysfs(sysfs());
  REQUIRE_MESSAGE(from_sysfs.ok(), from_sysfs.error().message);
  const auto from_verbs = sriov::read_rdma_devices_verbs();
  REQUIRE_MESSAGE(from_verbs.ok(), from_verbs.error().message);
  const auto* a = find_device(*from_sysfs, host::kRxeDevice);
  const auto* b = find_device(*from_verbs, host::kRxeDevice);
  REQUIRE(a != nullptr);
  REQUIRE(b != nullptr);
  CHECK_FALSE(a->pci.has_value());  // a software device has no PCI function
  CHECK(a->node_guid == b->node_guid);
  REQUIRE(a->ports.size() == 1);
  REQUIRE(b->ports.size() == 1);
  CHECK(a->ports[0].state == "ACTIVE");
  CHECK(b->ports[0].state == "ACTIVE");
  CHECK(a->ports[0].link_layer == "Ethernet");
  REQUIRE(a->ports[0].gids.size() >= 2);
  REQUIRE(a->ports[0].gids.size() == b->ports[0].gids.size());
  for (std::size_t i = 0; i < a->ports[0].gids.size(); ++i) {
    INFO(i);
    CHECK(a->ports[0].gids[i].index == b->ports[0].gids[i].index);
    CHECK(a->ports[0].gids[i].gid == b->ports[0].gids[i].gid);
    CHECK(a->ports[0].gids[i].type == b->ports[0].gids[i].type);
  }
  const std::string netdev = netdevsim_netdev(host::kNetdevsimId);
  CHECK(sriov::roce_v2_gid_index(a->ports[0]) == std::optional<int>(1));
  CHECK(sriov::roce_v2_gid_index(a->ports[0], netdev) == std::optional<int>(1));
  CHECK(sriov::roce_v2_gid_index(b->ports[0], netdev) == std::optional<int>(1));
  CHECK(a->ports[0].gids[1].gid == "0000:0000:0000:0000:0000:ffff:c000:0201");
  CHECK(a->ports[0].gids[1].netdev == netdev);
}

}  // namespace
}  // namespace hostagent::testing::guest
