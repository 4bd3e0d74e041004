// sriov/vf_netlink: a VF's administrative settings as its PF's driver keeps them (the "vf N" lines
// of `ip link show PF`), read and changed over rtnetlink (IFLA_VFINFO_LIST on the PF's netdev). An
// interface so the configurator is tested against an in-memory fake; make_libnl_vf_netlink is the
// real one (libnl-route-3).
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "hostagent/common/result.hpp"

namespace hostagent::sriov {

// IFLA_VF_LINK_STATE_{AUTO,ENABLE,DISABLE} (include/uapi/linux/if_link.h): follow the PF's link,
// always up, always down.
enum class LinkState { automatic, enable, disable };
const char* to_string(LinkState state) noexcept;

// How every message names a VF: "VF 3 of ens1f0".
inline std::string vf_name(const std::string& pf_netdev, int vf) {
  return "VF " + std::to_string(vf) + " of " + pf_netdev;
}

// What to change; an unset field is left as it is.
struct VfSettings {
  std::optional<std::string> mac;  // "52:54:00:12:34:56"; 00:00:00:00:00:00 lets the VF pick its own
  std::optional<int> vlan;         // 0..4095, 0 = untagged
  std::optional<int> qos;          // 802.1p priority 0..7 of the VLAN tag; needs vlan
  std::optional<bool> trust;
  std::optional<bool> spoofchk;
  std::optional<LinkState> link_state;
  std::optional<uint32_t> min_tx_rate_mbps;  // 0 = no limit
  std::optional<uint32_t> max_tx_rate_mbps;

  bool operator==(const VfSettings&) const = default;
  bool empty() const {
    return !mac && !vlan && !qos && !trust && !spoofchk && !link_state && !min_tx_rate_mbps && !max_tx_rate_mbps;
  }
};

// What the driver reports. The kernel presets trust, spoofchk to -1 before asking the driver
// (net/core/rtnetlink.c rtnl_fill_vfinfo), so a driver that does not know a setting reports none.
struct VfState {
  std::string mac = "00:00:00:00:00:00";  // lower case
  int vlan = 0;
  int qos = 0;
  std::optional<bool> trust;
  std::optional<bool> spoofchk;
  std::optional<LinkState> link_state;
  uint32_t min_tx_rate_mbps = 0;
  uint32_t max_tx_rate_mbps = 0;

  bool operator==(const VfState&) const = default;
};

class VfNetlink {
 public:
  virtual ~VfNetlink() = default;
  // The settings of VF vf of the PF whose netdev is pf_netdev. not_found names the netdev when it
  // does not exist or has no VF vf.
  virtual Result<VfState> read(const std::string& pf_netdev, int vf) = 0;
  // One RTM_NEWLINK request. The kernel applies the attributes in order and stops at the first the
  // driver refuses (do_setvfinfo), so a failure may leave some of them applied.
  virtual Status apply(const std::string& pf_netdev, int vf, const VfSettings& settings) = 0;
};

// rtnetlink through libnl-route-3; one socket per call, so the object may be shared across threads
// as long as calls on the same VF are serialized by the caller.
std::unique_ptr<VfNetlink> make_libnl_vf_netlink();

}  // namespace hostagent::sriov
