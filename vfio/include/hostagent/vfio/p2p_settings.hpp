// vfio/p2p_settings: the peer-to-peer DMA setting of IBM's Vela (vmsetup-README, "PCI
// Configurations": setpci ECAP_ACS+0x6.w=0x5D on the ports, ECAP_ATS+6.w=8000 on the devices), as
// planned, applied, verified and restored register changes.
//
// ACS control on every root port and switch downstream port above a VM's GPUs and NICs keeps what
// Linux enables (pci_std_enable_acs in drivers/pci/pci.c: Source Validation, P2P Request and
// Completion Redirect, Upstream Forwarding) and adds Direct Translated P2P, so that requests the
// device already translated through ATS go straight to their peer while untranslated ones still
// pass the IOMMU. Translation Blocking and Egress Control are cleared, as Vela's 0x5D does:
// blocking would drop exactly the translated requests DT lets through. Only bits the port's ACS
// Capability register advertises are set; bits 7 and up (PCIe 6 enhanced ACS) are left alone. ATS
// is enabled on the GPUs and NICs themselves (ATS control bit 15).
//
// Every change records the value it replaced. P2pLedger counts which VMs need which register, so a
// port two VMs share is restored only when the last of them lets it go.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "hostagent/common/result.hpp"
#include "hostagent/numa/host_model.hpp"
#include "hostagent/vfio/config_space_access.hpp"

namespace hostagent::vfio {

// ACS Control bits (PCIe Base Spec 7.7.8.3; include/uapi/linux/pci_regs.h PCI_ACS_*).
inline constexpr uint16_t kAcsSourceValidation = 0x0001;
inline constexpr uint16_t kAcsTranslationBlocking = 0x0002;
inline constexpr uint16_t kAcsRequestRedirect = 0x0004;
inline constexpr uint16_t kAcsCompletionRedirect = 0x0008;
inline constexpr uint16_t kAcsUpstreamForwarding = 0x0010;
inline constexpr uint16_t kAcsEgressControl = 0x0020;
inline constexpr uint16_t kAcsDirectTranslated = 0x0040;
inline constexpr uint16_t kAtsEnable = 0x8000;  // ATS Control (PCIe Base Spec 10.5.1.3)

// Vela's ACS control value and the bits it decides (the other bits are kept).
inline constexpr uint16_t kAcsVelaControl = 0x005d;
inline constexpr uint16_t kAcsVelaOwnedBits = 0x007f;

struct RegisterChange {
  enum class Register { acs_control, ats_control };
  numa::PciAddress device;
  Register reg = Register::acs_control;
  uint16_t before = 0;
  uint16_t after = 0;
  bool operator==(const RegisterChange&) const = default;
};
const char* to_string(RegisterChange::Register reg);  // "ACS control", "ATS control"

// The ACS control value Vela's setting gives a port whose registers read `capability`, `control`.
uint16_t vela_acs_control(uint16_t capability, uint16_t control);

// Every register Vela's recipe sets for these GPUs and NICs, on every ACS port above them, with
// before = its value now and after = the setting (equal when it already holds). Ports first, from
// the root down, then the devices. Fails on an address the model does not have, a bridge given as
// a device, or config space that cannot be read.
Result<std::vector<RegisterChange>> p2p_needs(const numa::HostModel& model,
                                              const std::vector<numa::PciAddress>& devices, ConfigSpace& config);

// The same on the given ports only (the ones isolation allows: numa/p2p_isolation.hpp), and ATS on
// the devices that have one of them above.
Result<std::vector<RegisterChange>> p2p_needs(const numa::HostModel& model, const std::vector<numa::PciAddress>& ports,
                                              const std::vector<numa::PciAddress>& devices, ConfigSpace& config);

// Writes each change in order and reads it back (named apply_p2p, not apply: ADL on std::vector
// would drag std::apply into every unqualified call). A register found at `after` already is skipped;
// one found at neither `before` nor `after` changed since the plan and is an error (conflict). On
// any failure the registers written so far are put back, last first, and the error returned (with
// any register the rollback could not restore named in it). Returns the changes it made.
Result<std::vector<RegisterChange>> apply_p2p(ConfigSpace& config, const std::vector<RegisterChange>& plan);

// Writes `before` back, last change first, verifying each. Continues past failures; the error
// lists every register left changed.
Status restore_p2p(ConfigSpace& config, const std::vector<RegisterChange>& applied);

// Which VM needs which register, with the value the first of them found there. Plain data: the
// caller serialises access (the daemon's allocation strand) and journals it.
class P2pLedger {
 public:
  using Key = std::pair<numa::PciAddress, RegisterChange::Register>;
  struct Entry {
    RegisterChange change;  // before: the value found when the first VM took it
    std::set<std::string> users;
  };

  // Records that vm needs `needs` (from p2p_needs, taken before apply_p2p). A register another VM
  // holds keeps the host's own value as `before`: whichever record saw it unset, in any order.
  void acquire(const std::string& vm, const std::vector<RegisterChange>& needs);
  // Drops vm; returns the changes no VM needs any more (last taken first), to hand to restore_p2p().
  // Registers that never changed (before == after) are dropped without being returned.
  std::vector<RegisterChange> release(const std::string& vm);

  const std::map<Key, Entry>& entries() const { return entries_; }

 private:
  std::map<Key, Entry> entries_;
  std::vector<Key> order_;  // acquisition order, so restores run in reverse of it
};

// What the topology report shows per function with ACS or ATS.
struct P2pState {
  numa::PciAddress device;
  std::optional<uint16_t> acs_capability;  // nullopt: no ACS capability
  std::optional<uint16_t> acs_control;
  std::vector<std::string> acs_enabled;  // lspci's names of the control bits set: "SrcValid", ...
  std::optional<bool> ats_enabled;       // nullopt: no ATS capability
};

// Names of the ACS control bits set in `control`, in bit order, as lspci -vvv prints them.
std::vector<std::string> decode_acs_control(uint16_t control);

// Every function of the model whose config space is known and has ACS or ATS, in model order.
Result<std::vector<P2pState>> current_state(const numa::HostModel& model, ConfigSpace& config);

}  // namespace hostagent::vfio
