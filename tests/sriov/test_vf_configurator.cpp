// The VF configurator against the in-memory netlink fake: the round trip, idempotence, and rollback
// after a refusal at each attribute, a driver that ignores one, and a failed read-back.
#include <doctest/doctest.h>

#include "fake_vf_netlink.hpp"
#include "hostagent/sriov/vf_configurator.hpp"

namespace hostagent::sriov {
namespace {

using fake::FakeVfNetlink;

const std::string kPfNetdev = "ens1np0";

VfSettings vm_settings() {
  VfSettings s;
  s.mac = "52:54:00:AB:CD:01";
  s.vlan = 100;
  s.qos = 3;
  s.trust = true;
  s.spoofchk = false;
  s.link_state = LinkState::enable;
  s.min_tx_rate_mbps = 1000;
  s.max_tx_rate_mbps = 25000;
  return s;
}

VfState neutral_state() {
  return FakeVfNetlink::fresh();  // what a new VF has is the neutral configuration
}

TEST_CASE("configure applies the VM's settings and reset brings the VF back to neutral") {
  FakeVfNetlink netlink;
  netlink.add_pf(kPfNetdev, 4);
  const auto record = configure(netlink, kPfNetdev, 2, vm_settings());
  REQUIRE(record.ok());
  CHECK(record->pf_netdev == kPfNetdev);
  CHECK(record->vf == 2);
  CHECK(record->previous == neutral_state());
  CHECK(record->applied.mac == std::optional<std::string>("52:54:00:ab:cd:01"));
  const VfState& now = netlink.state(kPfNetdev, 2);
  CHECK(now.mac == "52:54:00:ab:cd:01");
  CHECK(now.vlan == 100);
  CHECK(now.qos == 3);
  CHECK(now.trust == std::optional<bool>(true));
  CHECK(now.spoofchk == std::optional<bool>(false));
  CHECK(now.link_state == std::optional<LinkState>(LinkState::enable));
  CHECK(now.min_tx_rate_mbps == 1000);
  CHECK(now.max_tx_rate_mbps == 25000);
  CHECK(netlink.state(kPfNetdev, 1) == neutral_state());  // its neighbours are untouched

  REQUIRE(reset(netlink, *record).ok());
  CHECK(netlink.state(kPfNetdev, 2) == neutral_state());
}

TEST_CASE("configure and reset are idempotent") {
  FakeVfNetlink netlink;
  netlink.add_pf(kPfNetdev, 1);
  const auto first = configure(netlink, kPfNetdev, 0, vm_settings());
  REQUIRE(first.ok());
  const int applies = netlink.applies();
  const auto second = configure(netlink, kPfNetdev, 0, vm_settings());
  REQUIRE(second.ok());
  CHECK(netlink.applies() == applies);
  REQUIRE(reset(netlink, *first).ok());
  const int after_reset = netlink.applies();
  REQUIRE(reset(netlink, *first).ok());
  CHECK(netlink.applies() == after_reset);
  CHECK(netlink.state(kPfNetdev, 0) == neutral_state());
}

TEST_CASE("reset also clears settings configure did not make") {
  FakeVfNetlink netlink;
  VfState dirty = neutral_state();
  dirty.trust = true;
  dirty.max_tx_rate_mbps = 100;
  netlink.add_pf(kPfNetdev, 1, dirty);
  VfSettings only_mac;
  only_mac.mac = "52:54:00:00:00:07";
  const auto record = configure(netlink, kPfNetdev, 0, only_mac);
  REQUIRE(record.ok());
  CHECK(record->previous == dirty);
  REQUIRE(reset(netlink, *record).ok());
  CHECK(netlink.state(kPfNetdev, 0) == neutral_state());
}

TEST_CASE("neutral settings ask nothing of what the driver does not report") {
  VfState state;  // a driver that reports neither trust, spoofchk nor link state
  state.mac = "52:54:00:00:00:01";
  VfSettings applied;
  applied.mac = state.mac;
  const VfSettings neutral = neutral_settings(state, applied);
  CHECK(neutral.mac == std::optional<std::string>("00:00:00:00:00:00"));
  CHECK_FALSE(neutral.trust.has_value());
  CHECK_FALSE(neutral.spoofchk.has_value());
  CHECK_FALSE(neutral.link_state.has_value());
  CHECK_FALSE(neutral.vlan.has_value());
  CHECK_FALSE(neutral.max_tx_rate_mbps.has_value());
}

TEST_CASE("a refusal at each attribute puts the VF back as it was") {
  VfState previous = neutral_state();
  previous.mac = "52:54:00:00:00:99";
  previous.vlan = 7;
  previous.max_tx_rate_mbps = 500;
  for (const char* field : {"mac", "vlan", "rate", "spoofchk", "link_state", "trust"}) {
    CAPTURE(field);
    FakeVfNetlink netlink;
    netlink.add_pf(kPfNetdev, 2, previous);
    netlink.refuse_next(field);
    const auto result = configure(netlink, kPfNetdev, 1, vm_settings());
    REQUIRE_FALSE(result.ok());
    CHECK(result.error().code == ErrorCode::unsupported);
    CHECK(result.error().message.find("configure VF 1 of ens1np0") != std::string::npos);
    CHECK(result.error().message.find(std::string("set ") + field) != std::string::npos);
    CHECK(result.error().message.find("the previous settings are back") != std::string::npos);
    CHECK(netlink.state(kPfNetdev, 1) == previous);
  }
}

TEST_CASE("a driver that ignores a setting is caught on read-back and rolled back") {
  FakeVfNetlink netlink;
  netlink.add_pf(kPfNetdev, 1);
  netlink.ignore("trust");
  const auto result = configure(netlink, kPfNetdev, 0, vm_settings());
  REQUIRE_FALSE(result.ok());
  CHECK(result.error().code == ErrorCode::io_error);
  CHECK(result.error().message.find("trust: wanted on, got off") != std::string::npos);
  CHECK(netlink.state(kPfNetdev, 0) == neutral_state());
}

TEST_CASE("a failed read-back rolls back, and a failed first read changes nothing") {
  {
    FakeVfNetlink netlink;
    netlink.add_pf(kPfNetdev, 1);
    netlink.fail_read(2);
    const auto result = configure(netlink, kPfNetdev, 0, vm_settings());
    REQUIRE_FALSE(result.ok());
    CHECK(result.error().message.find("reading back") != std::string::npos);
    CHECK(result.error().message.find("the previous settings are back") != std::string::npos);
    CHECK(netlink.state(kPfNetdev, 0) == neutral_state());
  }
  {
    FakeVfNetlink netlink;
    netlink.add_pf(kPfNetdev, 1);
    netlink.fail_read(1);
    REQUIRE_FALSE(configure(netlink, kPfNetdev, 0, vm_settings()).ok());
    CHECK(netlink.applies() == 0);
  }
}

TEST_CASE("a failed rollback is reported with the original failure") {
  FakeVfNetlink netlink;
  netlink.add_pf(kPfNetdev, 1);
  netlink.ignore("trust");
  netlink.fail_read(3);  // previous, read-back, then the read after the rollback
  const auto result = configure(netlink, kPfNetdev, 0, vm_settings());
  REQUIRE_FALSE(result.ok());
  CHECK(result.error().message.find("trust: wanted on, got off") != std::string::npos);
  CHECK(result.error().message.find("could not read them back") != std::string::npos);
}

TEST_CASE("invalid settings are refused before anything is sent") {
  struct Case {
    const char* field;
    VfSettings settings;
  };
  VfSettings mac, vlan, qos, lone_qos, rates;
  mac.mac = "52:54:00:zz:00:01";
  vlan.vlan = 4096;
  qos.vlan = 10;
  qos.qos = 8;
  lone_qos.qos = 1;
  rates.min_tx_rate_mbps = 2000;
  rates.max_tx_rate_mbps = 1000;
  for (const auto& c : {Case{"mac", mac}, Case{"vlan", vlan}, Case{"qos", qos}, Case{"qos", lone_qos},
                        Case{"min_tx_rate_mbps", rates}}) {
    CAPTURE(c.field);
    FakeVfNetlink netlink;
    netlink.add_pf(kPfNetdev, 1);
    const auto result = configure(netlink, kPfNetdev, 0, c.settings);
    REQUIRE_FALSE(result.ok());
    CHECK(result.error().code == ErrorCode::invalid_argument);
    CHECK(result.error().message.rfind(std::string(c.field) + ":", 0) == 0);
    CHECK(netlink.applies() == 0);
  }
}

TEST_CASE("configure and reset name a VF that does not exist") {
  FakeVfNetlink netlink;
  netlink.add_pf(kPfNetdev, 2);
  const auto result = configure(netlink, kPfNetdev, 9, vm_settings());
  REQUIRE_FALSE(result.ok());
  CHECK(result.error().code == ErrorCode::not_found);
  CHECK(result.error().message.find("VF 9 of ens1np0") != std::string::npos);
  const auto gone = reset(netlink, VfConfigRecord{"ens9np0", 0, vm_settings(), neutral_state()});
  REQUIRE_FALSE(gone.ok());
  CHECK(gone.error().message.find("reset VF 0 of ens9np0") != std::string::npos);
}

}  // namespace
}  // namespace hostagent::sriov

namespace hostagent::sriov {
namespace {

TEST_CASE("reapply writes nothing to a VF that holds its settings, and configures again one that lost them") {
  FakeVfNetlink netlink;
  netlink.add_pf(kPfNetdev, 4);
  const auto record = configure(netlink, kPfNetdev, 1, vm_settings());
  REQUIRE(record.ok());
  const int applies = netlink.applies();

  const auto held = reapply(netlink, *record);
  REQUIRE_MESSAGE(held.ok(), held.error().message);
  CHECK(held->empty());
  CHECK(netlink.applies() == applies);  // a running guest's VF is not written

  // A PF driver reload, or a host reboot, leaves the VF blank.
  netlink.state(kPfNetdev, 1) = neutral_state();
  const auto again = reapply(netlink, *record);
  REQUIRE_MESSAGE(again.ok(), again.error().message);
  REQUIRE_FALSE(again->empty());
  CHECK(again->front() == "mac: wanted 52:54:00:ab:cd:01, got 00:00:00:00:00:00");
  CHECK(netlink.applies() == applies + 1);
  const VfState& now = netlink.state(kPfNetdev, 1);
  CHECK(now.mac == "52:54:00:ab:cd:01");
  CHECK(now.vlan == 100);
  CHECK(now.trust == std::optional<bool>(true));
  CHECK(now.max_tx_rate_mbps == 25000);
}

TEST_CASE("reapply names the VF when it cannot be read") {
  FakeVfNetlink netlink;
  netlink.add_pf(kPfNetdev, 2);
  auto record = configure(netlink, kPfNetdev, 0, vm_settings());
  REQUIRE(record.ok());
  record->pf_netdev = "ens9np0";  // renamed, or gone since
  const auto read = reapply(netlink, *record);
  REQUIRE_FALSE(read.ok());
  CHECK(read.error().code == ErrorCode::not_found);
  CHECK(read.error().message.find("ens9np0") != std::string::npos);
}

}  // namespace
}  // namespace hostagent::sriov
