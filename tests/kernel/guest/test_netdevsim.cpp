// Inside the emulated GPU host: netdevsim's VFs (drivers/net/netdevsim/netdev.c, the ndo_set_vf_*
// handlers) hold what rtnetlink sets on them and report it back, as a ConnectX PF's driver does:
// the ground the netlink VF configuration stands on. iproute2 sets and reads here; sriov/'s own
// netlink code is checked against the same VFs.
#include <doctest/doctest.h>

#include "../emulated_host.hpp"
#include "guest_host.hpp"
#include "test_support.hpp"

namespace hostagent::testing::guest {
namespace {

namespace host = emulated_host;

const std::string kIp = "/usr/sbin/ip";

// The "vf N ..." line of `ip -d link show PF`.
std::string vf_line(const std::string& pf, int vf) {
  const auto shown = run_command({kIp, "-d", "link", "show", "dev", pf});
  REQUIRE_MESSAGE(shown.exit_code == 0, shown.output);
  const std::string prefix = "vf " + std::to_string(vf) + " ";
  const auto at = shown.output.find(prefix);
  REQUIRE_MESSAGE(at != std::string::npos, "no VF " << vf << " in:\n" << shown.output);
  return shown.output.substr(at, shown.output.find('\n', at) - at);
}

TEST_CASE("netdevsim's sriov_numvfs creates VFs that rtnetlink reports on the PF's netdev") {
  const std::string pf = netdevsim_netdev(host::kNetdevsimId);
  REQUIRE_MESSAGE(!pf.empty(), "/init did not create netdevsim device " << host::kNetdevsimId);
  require_ok(writer().write(netdevsim_device(host::kNetdevsimId) + "/sriov_numvfs", "2"), "sriov_numvfs=2");
  CHECK(sysfs().read_int(netdevsim_device(host::kNetdevsimId) + "/sriov_numvfs").value() == 2);
  CHECK(vf_line(pf, 0).find("link/ether 00:00:00:00:00:00") != std::string::npos);
  CHECK(vf_line(pf, 1).find("link/ether 00:00:00:00:00:00") != std::string::npos);
  require_ok(writer().write(netdevsim_device(host::kNetdevsimId) + "/sriov_numvfs", "0"), "sriov_numvfs=0");
  CHECK(run_command({kIp, "-d", "link", "show", "dev", pf}).output.find("vf 0 ") == std::string::npos);
}

TEST_CASE("a netdevsim VF keeps the MAC, VLAN, trust, spoofchk, link state and rate set over netlink") {
  const std::string pf = netdevsim_netdev(host::kNetdevsimId);
  REQUIRE(!pf.empty());
  require_ok(writer().write(netdevsim_device(host::kNetdevsimId) + "/sriov_numvfs", "1"), "sriov_numvfs=1");
  const auto set =
      run_command({kIp,      "link",        "set", "dev",         pf,      "vf", "0",        "mac", "52:54:00:12:34:56",
                   "vlan",   "100",         "qos", "3",           "trust", "on", "spoofchk", "off", "state",
                   "enable", "min_tx_rate", "10",  "max_tx_rate", "100"});
  CHECK_MESSAGE(set.exit_code == 0, set.output);
  const std::string line = vf_line(pf, 0);
  INFO(line);
  CHECK(line.find("link/ether 52:54:00:12:34:56") != std::string::npos);
  CHECK(line.find("vlan 100, qos 3") != std::string::npos);
  CHECK(line.find("trust on") != std::string::npos);
  CHECK(line.find("spoof checking off") != std::string::npos);
  CHECK(line.find("link-state enable") != std::string::npos);
  CHECK(line.find("min_tx_rate 10Mbps") != std::string::npos);
  CHECK(line.find("max_tx_rate 100Mbps") != std::string::npos);
  require_ok(writer().write(netdevsim_device(host::kNetdevsimId) + "/sriov_numvfs", "0"), "sriov_numvfs=0");
}

}  // namespace
}  // namespace hostagent::testing::guest
