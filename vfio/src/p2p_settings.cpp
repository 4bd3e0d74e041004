// vfio/p2p_settings: Vela's ACS/ATS setting as register changes (see p2p_settings.hpp for why).
#include "hostagent/vfio/p2p_settings.hpp"

#include <algorithm>
#include <cstdio>

#include "hostagent/numa/p2p_isolation.hpp"

namespace hostagent::vfio {
namespace {

using Register = RegisterChange::Register;

// Extended capability ids and register offsets (PCIe Base Spec 7.7.8, 10.5.1; lib/header.h).
constexpr int kExtCapAcs = 0x000d;
constexpr int kExtCapAts = 0x000f;
constexpr int kAcsCapabilityOffset = 0x04;
constexpr int kAcsControlOffset = 0x06;
constexpr int kAtsControlOffset = 0x06;

std::string hex16(uint16_t value) {
  char buf[8];
  std::snprintf(buf, sizeof buf, "0x%04x", value);
  return buf;
}

std::string describe(const RegisterChange& change) {
  return std::string(to_string(change.reg)) + " of " + change.device.to_string();
}

// The register's offset now: capabilities are found afresh, never trusted from an older read.
Result<int> register_offset(ConfigSpace& config, const numa::PciAddress& device, Register reg) {
  const int cap_id = reg == Register::acs_control ? kExtCapAcs : kExtCapAts;
  HA_TRY(const std::optional<int> cap, config.find_ext_capability(device, cap_id));
  if (!cap) {
    return Error{ErrorCode::not_found, std::string(to_string(reg)) + " of " + device.to_string() +
                                           ": the function has no " + (reg == Register::acs_control ? "ACS" : "ATS") +
                                           " capability (was it replaced or reset since the plan?)"};
  }
  return *cap + (reg == Register::acs_control ? kAcsControlOffset : kAtsControlOffset);
}

// Writes value and reads it back: the kernel passes config writes through and read-only or
// hardwired bits simply do not change (PCIe Base Spec 7.4: RO bits ignore writes), so only the
// read-back tells whether the setting holds.
Status write_verified(ConfigSpace& config, const RegisterChange& change, uint16_t value) {
  HA_TRY(const int offset, register_offset(config, change.device, change.reg));
  HA_TRY_STATUS(config.write16(change.device, offset, value));
  HA_TRY(const uint16_t now, config.read16(change.device, offset));
  if (now == value) return ok_status();
  return Error{ErrorCode::io_error, describe(change) + " did not take " + hex16(value) + ": it reads " + hex16(now) +
                                        " after the write (bits the device hardwires or does not implement); "
                                        "check the device's capability register and firmware"};
}

// Puts back `before` on a register unless it already reads so.
Status put_back(ConfigSpace& config, const RegisterChange& change) {
  HA_TRY(const int offset, register_offset(config, change.device, change.reg));
  HA_TRY(const uint16_t now, config.read16(change.device, offset));
  if (now == change.before) return ok_status();
  return write_verified(config, change, change.before);
}

// Whether the change still has to be written: false when the register is at `after` already, an
// error when it is at neither value (someone else's change, which neither apply nor a rollback may
// overwrite).
Result<bool> needs_write(ConfigSpace& config, const RegisterChange& change) {
  HA_TRY(const int offset, register_offset(config, change.device, change.reg));
  HA_TRY(const uint16_t now, config.read16(change.device, offset));
  if (now == change.after) return false;
  if (now == change.before) return true;
  return Error{ErrorCode::conflict, describe(change) + " reads " + hex16(now) + ", neither the planned " +
                                        hex16(change.before) + " nor " + hex16(change.after) +
                                        ": something else changed it since the plan; plan again"};
}

// Writes change unless the register holds `after` already. A register is added to `written` before
// its write: one that failed or half took may have changed bits, and the rollback checks it too.
Status apply_one(ConfigSpace& config, const RegisterChange& change, std::vector<RegisterChange>& written) {
  HA_TRY(const bool pending, needs_write(config, change));
  if (!pending) return ok_status();
  written.push_back(change);
  return write_verified(config, change, change.after);
}

Result<std::optional<RegisterChange>> acs_need(ConfigSpace& config, const numa::PciAddress& port) {
  HA_TRY(const std::optional<int> cap, config.find_ext_capability(port, kExtCapAcs));
  if (!cap) return std::optional<RegisterChange>{};  // no ACS: nothing to keep or enable
  HA_TRY(const uint16_t capability, config.read16(port, *cap + kAcsCapabilityOffset));
  HA_TRY(const uint16_t control, config.read16(port, *cap + kAcsControlOffset));
  return std::optional<RegisterChange>{
      RegisterChange{port, Register::acs_control, control, vela_acs_control(capability, control)}};
}

Result<std::optional<RegisterChange>> ats_need(ConfigSpace& config, const numa::PciAddress& device) {
  HA_TRY(const std::optional<int> cap, config.find_ext_capability(device, kExtCapAts));
  if (!cap) return std::optional<RegisterChange>{};
  HA_TRY(const uint16_t control, config.read16(device, *cap + kAtsControlOffset));
  // Only the enable bit: the Smallest Translation Unit the kernel or firmware chose stays.
  return std::optional<RegisterChange>{
      RegisterChange{device, Register::ats_control, control, static_cast<uint16_t>(control | kAtsEnable)}};
}

// The devices, each once, checked: functions of this host, and no bridge.
Result<std::vector<numa::PciAddress>> p2p_endpoints(const numa::HostModel& model,
                                                    const std::vector<numa::PciAddress>& devices) {
  std::vector<numa::PciAddress> endpoints;
  for (const auto& address : devices) {
    const numa::PciFunction* f = model.find(address);
    if (f == nullptr) {
      return Error{ErrorCode::not_found, "PCI device " + address.to_string() + " is not on this host"};
    }
    if (f->is_bridge()) {
      return Error{ErrorCode::invalid_argument,
                   address.to_string() + " is a bridge: give the VM's GPUs and NICs, the ports above them follow"};
    }
    if (std::find(endpoints.begin(), endpoints.end(), address) == endpoints.end()) endpoints.push_back(address);
  }
  return endpoints;
}

}  // namespace

const char* to_string(RegisterChange::Register reg) {
  return reg == Register::acs_control ? "ACS control" : "ATS control";
}

uint16_t vela_acs_control(uint16_t capability, uint16_t control) {
  return static_cast<uint16_t>((control & ~kAcsVelaOwnedBits) | (kAcsVelaControl & capability));
}

Result<std::vector<RegisterChange>> p2p_needs(const numa::HostModel& model,
                                              const std::vector<numa::PciAddress>& devices, ConfigSpace& config) {
  HA_TRY(const auto endpoints, p2p_endpoints(model, devices));
  return p2p_needs(model, numa::acs_ports_above(model, endpoints), endpoints, config);
}

Result<std::vector<RegisterChange>> p2p_needs(const numa::HostModel& model, const std::vector<numa::PciAddress>& ports,
                                              const std::vector<numa::PciAddress>& devices, ConfigSpace& config) {
  HA_TRY(const auto endpoints, p2p_endpoints(model, devices));
  std::vector<RegisterChange> needs;
  for (const auto& port : ports) {
    HA_TRY(const auto need, acs_need(config, port));
    if (need) needs.push_back(*need);
  }
  // ATS only where a port above the device forwards what it translates: elsewhere it would only
  // widen what the device is trusted with.
  for (const auto& device : endpoints) {
    const auto above = numa::acs_ports_above(model, {device});
    const bool reached = std::any_of(above.begin(), above.end(), [&](const numa::PciAddress& port) {
      return std::find(ports.begin(), ports.end(), port) != ports.end();
    });
    if (!reached) continue;
    HA_TRY(const auto need, ats_need(config, device));
    if (need) needs.push_back(*need);
  }
  return needs;
}

Result<std::vector<RegisterChange>> apply_p2p(ConfigSpace& config, const std::vector<RegisterChange>& plan) {
  std::vector<RegisterChange> written;
  for (const auto& change : plan) {
    if (auto step = apply_one(config, change, written); !step.ok()) {
      Error error = std::move(step).error();
      if (auto undone = restore_p2p(config, written); !undone.ok()) {
        error.message += "; rolling back: " + undone.error().message;
      }
      return error;
    }
  }
  return written;
}

Status restore_p2p(ConfigSpace& config, const std::vector<RegisterChange>& applied) {
  std::string failures;
  for (auto it = applied.rbegin(); it != applied.rend(); ++it) {
    if (auto status = put_back(config, *it); !status.ok()) {
      failures += (failures.empty() ? "" : "; ") + status.error().message;
    }
  }
  if (failures.empty()) return ok_status();
  return Error{ErrorCode::io_error,
               "could not restore every peer-to-peer register, these are left as set: " + failures};
}

void P2pLedger::acquire(const std::string& vm, const std::vector<RegisterChange>& needs) {
  for (const auto& need : needs) {
    const Key key{need.device, need.reg};
    auto [it, inserted] = entries_.try_emplace(key, Entry{need, {}});
    if (inserted) order_.push_back(key);
    // Reloaded from a journal in another order, a later VM's record (found set) may come first:
    // the record that saw the host's own value wins.
    RegisterChange& held = it->second.change;
    if (held.before == held.after && need.before != need.after) held.before = need.before;
    it->second.users.insert(vm);
  }
}

std::vector<RegisterChange> P2pLedger::release(const std::string& vm) {
  std::vector<RegisterChange> released;
  for (auto it = order_.rbegin(); it != order_.rend(); ++it) {
    auto entry = entries_.find(*it);
    HA_ASSERT(entry != entries_.end());
    entry->second.users.erase(vm);
    if (!entry->second.users.empty()) continue;
    const RegisterChange& change = entry->second.change;
    if (change.before != change.after) released.push_back(change);
    entries_.erase(entry);
  }
  std::erase_if(order_, [this](const Key& key) { return !entries_.contains(key); });
  return released;
}

std::vector<std::string> decode_acs_control(uint16_t control) {
  // lspci's names (ls-ecaps.c, cap_acs), so the report reads like `lspci -vvv`.
  static constexpr std::pair<uint16_t, const char*> kNames[] = {
      {kAcsSourceValidation, "SrcValid"},      {kAcsTranslationBlocking, "TransBlk"},
      {kAcsRequestRedirect, "ReqRedir"},       {kAcsCompletionRedirect, "CmpltRedir"},
      {kAcsUpstreamForwarding, "UpstreamFwd"}, {kAcsEgressControl, "EgressCtrl"},
      {kAcsDirectTranslated, "DirectTrans"}};
  std::vector<std::string> names;
  for (const auto& [bit, name] : kNames) {
    if ((control & bit) != 0) names.emplace_back(name);
  }
  return names;
}

Result<std::vector<P2pState>> current_state(const numa::HostModel& model, ConfigSpace& config) {
  std::vector<P2pState> states;
  for (const auto& f : model.pci_devices) {
    if (!f.config_space_known) continue;  // an hwloc XML source: nothing to read
    P2pState state{f.address, {}, {}, {}, {}};
    HA_TRY(const std::optional<int> acs, config.find_ext_capability(f.address, kExtCapAcs));
    if (acs) {
      HA_TRY(const uint16_t capability, config.read16(f.address, *acs + kAcsCapabilityOffset));
      HA_TRY(const uint16_t control, config.read16(f.address, *acs + kAcsControlOffset));
      state.acs_capability = capability;
      state.acs_control = control;
      state.acs_enabled = decode_acs_control(control);
    }
    HA_TRY(const std::optional<int> ats, config.find_ext_capability(f.address, kExtCapAts));
    if (ats) {
      HA_TRY(const uint16_t control, config.read16(f.address, *ats + kAtsControlOffset));
      state.ats_enabled = (control & kAtsEnable) != 0;
    }
    if (acs || ats) states.push_back(std::move(state));
  }
  return states;
}

}  // namespace hostagent::vfio
