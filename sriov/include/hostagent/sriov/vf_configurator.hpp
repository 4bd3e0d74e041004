// sriov/vf_configurator: a VF's netlink settings for the VM that gets it, applied so that either all
// of them took or the VF is as it was, and reset to neutral when the VM lets it go. The record is
// plain data: the daemon journals it between configure and reset.
#pragma once

#include <string>
#include <vector>

#include "hostagent/common/result.hpp"
#include "hostagent/sriov/vf_netlink.hpp"

namespace hostagent::sriov {

struct VfConfigRecord {
  std::string pf_netdev;
  int vf = 0;
  VfSettings applied;  // what configure asked for
  VfState previous;    // what the VF had before

  bool operator==(const VfConfigRecord&) const = default;
};

// Reads the VF's state, applies wanted (validated first: MAC, VLAN 0..4095, QoS 0..7 with a VLAN),
// reads back and checks every wanted field took. On a refusal or a mismatch it puts back the
// previous values of the fields it asked for, and says whether that worked.
Result<VfConfigRecord> configure(VfNetlink& netlink, const std::string& pf_netdev, int vf, const VfSettings& wanted);

// A VF configured before, checked against what configure applied (after a host reboot, or a PF
// driver reload, it holds none of it): nothing is written while it still holds, so a running
// guest's VF is left alone; otherwise configured again. Returns the fields that differed, worded
// ("mac: wanted 52:54:00:..., got 00:00:00:00:00:00"); empty when nothing was written.
Result<std::vector<std::string>> reapply(VfNetlink& netlink, const VfConfigRecord& record);

// Back to the neutral configuration libvirt leaves a released VF in (MAC 00:00:00:00:00:00, VLAN 0,
// trust off, spoofchk on, link state auto, no rate limits): every field configure set, and any other
// the driver reports away from neutral. Idempotent; checked by reading back.
Status reset(VfNetlink& netlink, const VfConfigRecord& record);

// The settings that make state neutral, limited to what record asked for and what state shows away
// from neutral (a driver that does not report a setting is not asked to change it).
VfSettings neutral_settings(const VfState& state, const VfSettings& applied);

}  // namespace hostagent::sriov
