// Test helper for the configurator: VF settings kept in memory the way a PF driver keeps them, with
// the kernel's order of application (net/core/rtnetlink.c do_setvfinfo: MAC, VLAN, rate, spoofchk,
// link state, trust), which stops at the first attribute the driver refuses and keeps the ones
// before it. Faults: refuse a field, ignore a field (accepted but not changed, as some drivers do),
// fail a read.
#pragma once

#include <map>
#include <set>
#include <string>
#include <utility>

#include "hostagent/sriov/vf_netlink.hpp"

namespace hostagent::sriov::fake {

class FakeVfNetlink final : public VfNetlink {
 public:
  // A PF netdev with count VFs in the state a freshly created VF has.
  void add_pf(const std::string& pf_netdev, int count, const VfState& initial = fresh()) {
    for (int vf = 0; vf < count; ++vf) vfs_[{pf_netdev, vf}] = initial;
  }
  static VfState fresh() {
    VfState s;
    s.trust = false;
    s.spoofchk = true;
    s.link_state = LinkState::automatic;
    return s;
  }

  VfState& state(const std::string& pf_netdev, int vf) { return vfs_.at({pf_netdev, vf}); }

  void refuse_next(const std::string& field) { refuse_ = field; }
  void ignore(const std::string& field) { ignored_.insert(field); }
  // The nth read from now fails.
  void fail_read(int nth) { fail_read_in_ = nth; }

  int applies() const { return applies_; }
  int reads() const { return reads_; }

  Result<VfState> read(const std::string& pf_netdev, int vf) override {
    ++reads_;
    if (fail_read_in_ > 0 && --fail_read_in_ == 0) {
      return Error{ErrorCode::io_error, "read " + pf_netdev + ": injected failure"};
    }
    const auto found = vfs_.find({pf_netdev, vf});
    if (found == vfs_.end())
      return Error{ErrorCode::not_found, "VF " + std::to_string(vf) + " of " + pf_netdev + " does not exist"};
    return found->second;
  }

  Status apply(const std::string& pf_netdev, int vf, const VfSettings& s) override {
    ++applies_;
    const auto found = vfs_.find({pf_netdev, vf});
    if (found == vfs_.end())
      return Error{ErrorCode::not_found, "VF " + std::to_string(vf) + " of " + pf_netdev + " does not exist"};
    VfState& st = found->second;
    if (s.mac) HA_TRY_STATUS(step("mac", [&] { st.mac = *s.mac; }));
    if (s.vlan || s.qos) {
      HA_TRY_STATUS(step("vlan", [&] {
        st.vlan = s.vlan.value_or(st.vlan);
        st.qos = s.qos.value_or(0);
      }));
    }
    if (s.min_tx_rate_mbps || s.max_tx_rate_mbps) {
      HA_TRY_STATUS(step("rate", [&] {
        st.min_tx_rate_mbps = s.min_tx_rate_mbps.value_or(st.min_tx_rate_mbps);
        st.max_tx_rate_mbps = s.max_tx_rate_mbps.value_or(st.max_tx_rate_mbps);
      }));
    }
    if (s.spoofchk) HA_TRY_STATUS(step("spoofchk", [&] { st.spoofchk = *s.spoofchk; }));
    if (s.link_state) HA_TRY_STATUS(step("link_state", [&] { st.link_state = *s.link_state; }));
    if (s.trust) HA_TRY_STATUS(step("trust", [&] { st.trust = *s.trust; }));
    return ok_status();
  }

 private:
  template <typename Fn>
  Status step(const std::string& field, Fn change) {
    if (refuse_ == field) {
      refuse_.clear();
      return Error{ErrorCode::unsupported, "set " + field + ": Operation not supported (injected)"};
    }
    if (ignored_.count(field) == 0) change();
    return ok_status();
  }

  std::map<std::pair<std::string, int>, VfState> vfs_;
  std::string refuse_;
  std::set<std::string> ignored_;
  int fail_read_in_ = 0;
  int applies_ = 0;
  int reads_ = 0;
};

}  // namespace hostagent::sriov::fake
