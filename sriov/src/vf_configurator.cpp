// sriov/vf_configurator: configure = read, apply, read back, compare; a refusal or a mismatch puts
// the touched fields back. Reset brings the VF to libvirt's neutral configuration.
#include "hostagent/sriov/vf_configurator.hpp"

#include <vector>

#include "hostagent/common/hardware_ids.hpp"

namespace hostagent::sriov {
namespace {

const std::string kZeroMac = "00:00:00:00:00:00";

std::string on_off(bool value) {
  return value ? "on" : "off";
}

// The checks the kernel would leave to the driver, done here so a typo never reaches the NIC; a
// lone VLAN gets QoS 0, as IFLA_VF_VLAN sets both.
Result<VfSettings> validate(const VfSettings& wanted) {
  VfSettings s = wanted;
  if (s.mac) {
    HA_TRY(s.mac, hostagent::mac_text(*s.mac, "mac"));
  }
  if (s.vlan && (*s.vlan < 0 || *s.vlan > 4095)) {
    return Error{ErrorCode::invalid_argument,
                 "vlan: " + std::to_string(*s.vlan) + " is not a VLAN ID; use 0 (untagged) to 4095"};
  }
  if (s.qos && !s.vlan) return Error{ErrorCode::invalid_argument, "qos: a VLAN priority needs a vlan as well"};
  if (s.qos && (*s.qos < 0 || *s.qos > 7)) {
    return Error{ErrorCode::invalid_argument,
                 "qos: " + std::to_string(*s.qos) + " is not an 802.1p priority; use 0 to 7"};
  }
  if (s.vlan && !s.qos) s.qos = 0;
  if (s.min_tx_rate_mbps && s.max_tx_rate_mbps && *s.max_tx_rate_mbps != 0 &&
      *s.min_tx_rate_mbps > *s.max_tx_rate_mbps) {
    return Error{ErrorCode::invalid_argument, "min_tx_rate_mbps: " + std::to_string(*s.min_tx_rate_mbps) +
                                                  " is above max_tx_rate_mbps " + std::to_string(*s.max_tx_rate_mbps)};
  }
  return s;
}

template <typename T>
void compare(std::vector<std::string>& out, const char* field, const std::optional<T>& wanted, const T& got,
             std::string (*show)(const T&)) {
  if (wanted && *wanted != got) out.push_back(std::string(field) + ": wanted " + show(*wanted) + ", got " + show(got));
}

template <typename T>
void compare_reported(std::vector<std::string>& out, const char* field, const std::optional<T>& wanted,
                      const std::optional<T>& got, std::string (*show)(const T&)) {
  if (!wanted) return;
  if (!got) {
    out.push_back(std::string(field) + ": wanted " + show(*wanted) + ", the driver does not report it");
  } else if (*wanted != *got) {
    out.push_back(std::string(field) + ": wanted " + show(*wanted) + ", got " + show(*got));
  }
}

std::string show_string(const std::string& v) {
  return v;
}
std::string show_int(const int& v) {
  return std::to_string(v);
}
std::string show_u32(const uint32_t& v) {
  return std::to_string(v);
}
std::string show_bool(const bool& v) {
  return on_off(v);
}
std::string show_link(const LinkState& v) {
  return to_string(v);
}

// Every field of wanted that state does not show, one line each.
std::vector<std::string> mismatches(const VfSettings& wanted, const VfState& state) {
  std::vector<std::string> out;
  compare(out, "mac", wanted.mac, state.mac, show_string);
  compare(out, "vlan", wanted.vlan, state.vlan, show_int);
  compare(out, "qos", wanted.qos, state.qos, show_int);
  compare_reported(out, "trust", wanted.trust, state.trust, show_bool);
  compare_reported(out, "spoofchk", wanted.spoofchk, state.spoofchk, show_bool);
  compare_reported(out, "link_state", wanted.link_state, state.link_state, show_link);
  compare(out, "min_tx_rate_mbps", wanted.min_tx_rate_mbps, state.min_tx_rate_mbps, show_u32);
  compare(out, "max_tx_rate_mbps", wanted.max_tx_rate_mbps, state.max_tx_rate_mbps, show_u32);
  return out;
}

std::string join(const std::vector<std::string>& lines) {
  std::string out;
  for (const auto& line : lines) out += (out.empty() ? "" : "; ") + line;
  return out;
}

// The previous values of the fields wanted touches (those the driver reported).
VfSettings previous_values(const VfSettings& wanted, const VfState& previous) {
  VfSettings s;
  if (wanted.mac) s.mac = previous.mac;
  if (wanted.vlan || wanted.qos) {
    s.vlan = previous.vlan;
    s.qos = previous.qos;
  }
  if (wanted.trust) s.trust = previous.trust;
  if (wanted.spoofchk) s.spoofchk = previous.spoofchk;
  if (wanted.link_state) s.link_state = previous.link_state;
  if (wanted.min_tx_rate_mbps || wanted.max_tx_rate_mbps) {
    s.min_tx_rate_mbps = previous.min_tx_rate_mbps;
    s.max_tx_rate_mbps = previous.max_tx_rate_mbps;
  }
  return s;
}

// The kernel may have applied a prefix of the request before the refusal (do_setvfinfo stops at the
// first error), so every touched field goes back, and the result is checked by reading.
Error roll_back(VfNetlink& netlink, const std::string& pf_netdev, int vf, const VfSettings& wanted,
                const VfState& previous, Error failure) {
  const VfSettings back = previous_values(wanted, previous);
  if (auto applied = netlink.apply(pf_netdev, vf, back); !applied.ok()) {
    failure.message += "; putting back the previous settings failed too: " + applied.error().message;
    return failure;
  }
  auto now = netlink.read(pf_netdev, vf);
  if (!now.ok()) {
    failure.message += "; put back the previous settings but could not read them back: " + now.error().message;
    return failure;
  }
  const auto left = mismatches(back, *now);
  failure.message +=
      left.empty() ? "; the previous settings are back" : "; putting back the previous settings left " + join(left);
  return failure;
}

// configure's work once the VF's state before it is known: apply the validated settings, read back,
// compare, and put back on a refusal or a mismatch.
Result<VfConfigRecord> apply_over(VfNetlink& netlink, const std::string& pf_netdev, int vf, const VfSettings& settings,
                                  const VfState& previous) {
  const std::string what = "configure " + vf_name(pf_netdev, vf);
  VfConfigRecord record{pf_netdev, vf, settings, previous};
  if (mismatches(settings, previous).empty()) return record;
  if (auto applied = netlink.apply(pf_netdev, vf, settings); !applied.ok()) {
    return roll_back(netlink, pf_netdev, vf, settings, previous,
                     Error{applied.error().code, what + ": " + applied.error().message});
  }
  auto now = netlink.read(pf_netdev, vf);
  if (!now.ok()) {
    return roll_back(netlink, pf_netdev, vf, settings, previous,
                     Error{now.error().code, what + ": reading back: " + now.error().message});
  }
  if (const auto left = mismatches(settings, *now); !left.empty()) {
    return roll_back(netlink, pf_netdev, vf, settings, previous,
                     Error{ErrorCode::io_error, what + ": the driver accepted the request but " + join(left)});
  }
  return record;
}

}  // namespace

Result<VfConfigRecord> configure(VfNetlink& netlink, const std::string& pf_netdev, int vf, const VfSettings& wanted) {
  HA_TRY(const VfSettings settings, validate(wanted));
  auto previous = netlink.read(pf_netdev, vf);
  if (!previous.ok()) {
    return Error{previous.error().code, "configure " + vf_name(pf_netdev, vf) + ": " + previous.error().message};
  }
  return apply_over(netlink, pf_netdev, vf, settings, *previous);
}

Result<std::vector<std::string>> reapply(VfNetlink& netlink, const VfConfigRecord& record) {
  auto state = netlink.read(record.pf_netdev, record.vf);
  if (!state.ok()) {
    return Error{state.error().code, "check " + vf_name(record.pf_netdev, record.vf) + ": " + state.error().message};
  }
  HA_TRY(const VfSettings settings, validate(record.applied));
  auto differed = mismatches(settings, *state);
  if (differed.empty()) return differed;
  HA_TRY_STATUS(apply_over(netlink, record.pf_netdev, record.vf, settings, *state));
  return differed;
}

VfSettings neutral_settings(const VfState& state, const VfSettings& applied) {
  VfSettings s;
  if (applied.mac || state.mac != kZeroMac) s.mac = kZeroMac;
  if (applied.vlan || applied.qos || state.vlan != 0 || state.qos != 0) {
    s.vlan = 0;
    s.qos = 0;
  }
  if (applied.trust || state.trust.value_or(false)) s.trust = false;
  if (applied.spoofchk || !state.spoofchk.value_or(true)) s.spoofchk = true;
  if (applied.link_state || state.link_state.value_or(LinkState::automatic) != LinkState::automatic) {
    s.link_state = LinkState::automatic;
  }
  if (applied.min_tx_rate_mbps || applied.max_tx_rate_mbps || state.min_tx_rate_mbps != 0 ||
      state.max_tx_rate_mbps != 0) {
    s.min_tx_rate_mbps = 0;
    s.max_tx_rate_mbps = 0;
  }
  return s;
}

Status reset(VfNetlink& netlink, const VfConfigRecord& record) {
  const std::string what = "reset " + vf_name(record.pf_netdev, record.vf);
  auto state = netlink.read(record.pf_netdev, record.vf);
  if (!state.ok()) return Error{state.error().code, what + ": " + state.error().message};
  const VfSettings neutral = neutral_settings(*state, record.applied);
  if (mismatches(neutral, *state).empty()) return ok_status();
  if (auto applied = netlink.apply(record.pf_netdev, record.vf, neutral); !applied.ok()) {
    return Error{applied.error().code, what + ": " + applied.error().message};
  }
  auto now = netlink.read(record.pf_netdev, record.vf);
  if (!now.ok()) return Error{now.error().code, what + ": reading back: " + now.error().message};
  if (const auto left = mismatches(neutral, *now); !left.empty()) {
    return Error{ErrorCode::io_error, what + ": the driver accepted the request but " + join(left)};
  }
  return ok_status();
}

}  // namespace hostagent::sriov
