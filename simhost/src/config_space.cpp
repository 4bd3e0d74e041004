// simhost/config_space: builds a function's configuration space bytes (see config_space.hpp).
// Layout: standard header; Power Management at 0x40; Subsystem ID (bridges) at 0x50; PCI Express
// at 0x60; extended capabilities chained from 0x100 (ACS, ATS, SR-IOV, in that order).
#include "config_space.hpp"

#include <algorithm>

namespace hostagent::simhost::detail {
namespace {

constexpr std::size_t kPmOffset = 0x40;
constexpr std::size_t kSsidOffset = 0x50;
constexpr std::size_t kExpOffset = 0x60;

// PCIe Capabilities register, Device/Port Type (§7.5.3.2).
constexpr uint16_t kTypeEndpoint = 0x0;
constexpr uint16_t kTypeRootPort = 0x4;
constexpr uint16_t kTypeUpstream = 0x5;
constexpr uint16_t kTypeDownstream = 0x6;

class ConfigBytes {
 public:
  ConfigBytes() : bytes_(kConfigSpaceSize, 0) {}
  void put8(std::size_t off, uint8_t v) { bytes_.at(off) = v; }
  void put16(std::size_t off, uint16_t v) {
    put8(off, static_cast<uint8_t>(v));
    put8(off + 1, static_cast<uint8_t>(v >> 8));
  }
  void put32(std::size_t off, uint32_t v) {
    put16(off, static_cast<uint16_t>(v));
    put16(off + 2, static_cast<uint16_t>(v >> 16));
  }
  std::vector<uint8_t> take() { return std::move(bytes_); }

 private:
  std::vector<uint8_t> bytes_;
};

bool is_bridge(const SimFunction& fn) {
  return fn.port_type != SimPortType::endpoint;
}

uint16_t port_type_code(SimPortType type) {
  switch (type) {
    case SimPortType::endpoint:
      return kTypeEndpoint;
    case SimPortType::root_port:
      return kTypeRootPort;
    case SimPortType::upstream:
      return kTypeUpstream;
    case SimPortType::downstream:
      return kTypeDownstream;
  }
  return kTypeEndpoint;
}

bool has_slot(const SimFunction& fn, const ConfigPlacement& placement) {
  // Only root and downstream ports may implement a slot (§7.5.3.2, Slot Implemented).
  const bool port = fn.port_type == SimPortType::root_port || fn.port_type == SimPortType::downstream;
  return port && placement.physical_slot != 0;
}

// Memory BAR low dword type bits (PCI Local Bus 3.0 §6.2.5.1): bits 2:1 = 10b for 64-bit, bit 3
// prefetchable.
uint32_t bar_flags(bool is_64bit, bool prefetchable) {
  return (is_64bit ? 0x4u : 0u) | (prefetchable ? 0x8u : 0u);
}

void put_bar(ConfigBytes& c, std::size_t reg, const PlacedBar& bar) {
  c.put32(reg, static_cast<uint32_t>(bar.address & ~0xfull) | bar_flags(bar.is_64bit, bar.prefetchable));
  if (bar.is_64bit) c.put32(reg + 4, static_cast<uint32_t>(bar.address >> 32));
}

void put_identity(ConfigBytes& c, const SimFunction& fn, const ConfigPlacement& placement) {
  // A VF's Vendor and Device ID read 0xffff on hardware (PCIe Base Spec §9.3.4.1.1-2) and the
  // kernel takes them from the PF. We write the real ids instead, so that lspci, which reads
  // config, names the VF.
  c.put16(0x00, fn.vendor);
  c.put16(0x02, fn.device);
  // Memory Space Enable is reserved on a VF: its memory decode is the PF's VF MSE (§9.3.4.1.3).
  const uint16_t memory_enable = placement.is_vf ? 0 : 0x2;
  c.put16(kRegCommand, static_cast<uint16_t>(memory_enable | 0x4));  // + Bus Master
  c.put16(kRegStatus, 0x0010);                                       // Capabilities List
  c.put8(kRegRevision, fn.revision);
  c.put8(0x09, static_cast<uint8_t>(fn.class_code));
  c.put8(0x0a, static_cast<uint8_t>(fn.class_code >> 8));
  c.put8(0x0b, static_cast<uint8_t>(fn.class_code >> 16));
  const uint8_t layout = is_bridge(fn) ? 0x01 : 0x00;
  c.put8(kRegHeaderType, static_cast<uint8_t>(layout | (placement.multifunction ? 0x80 : 0)));
  c.put8(kRegCapPtr, static_cast<uint8_t>(kPmOffset));
  c.put8(0x3c, 0xff);                     // interrupt line: not routed
  c.put8(0x3d, placement.is_vf ? 0 : 1);  // INTA; VFs have no INTx (§9.3.4.1.14)
}

void put_type0(ConfigBytes& c, const SimFunction& fn, const ConfigPlacement& placement) {
  if (!placement.is_vf) {  // VF BARs are read-only zero (§9.3.4.1.9); the PF's VF BARs place them
    for (const auto& bar : placement.bars) {
      put_bar(c, kRegBar0 + 4 * static_cast<std::size_t>(bar.index), bar);
    }
  }
  c.put16(kRegSubsystemVendor, fn.subsystem_vendor);
  c.put16(kRegSubsystemVendor + 2, fn.subsystem_device);
}

void put_windows(ConfigBytes& c, const ConfigPlacement& placement) {
  // I/O window disabled (base > limit), 16-bit decode (PCI-to-PCI Bridge 1.2 §3.2.5.6).
  c.put8(0x1c, 0xf0);
  c.put8(0x1d, 0x00);
  // Memory window: bits 15:4 hold address bits 31:20 (§3.2.5.8). base > limit disables it.
  if (const auto& w = placement.memory_window) {
    c.put16(kRegMemoryBase, static_cast<uint16_t>((w->base >> 16) & 0xfff0));
    c.put16(kRegMemoryBase + 2, static_cast<uint16_t>((w->limit >> 16) & 0xfff0));
  } else {
    c.put16(kRegMemoryBase, 0xfff0);
  }
  // Prefetchable window with 64-bit addressing (low nibble 1) and upper halves at 0x28/0x2c.
  if (const auto& w = placement.prefetchable_window) {
    c.put16(kRegPrefBase, static_cast<uint16_t>(((w->base >> 16) & 0xfff0) | 0x1));
    c.put16(kRegPrefBase + 2, static_cast<uint16_t>(((w->limit >> 16) & 0xfff0) | 0x1));
    c.put32(0x28, static_cast<uint32_t>(w->base >> 32));
    c.put32(0x2c, static_cast<uint32_t>(w->limit >> 32));
  } else {
    c.put16(kRegPrefBase, 0xfff1);
    c.put16(kRegPrefBase + 2, 0x0001);
  }
}

void put_type1(ConfigBytes& c, const ConfigPlacement& placement) {
  for (const auto& bar : placement.bars) {
    if (bar.index <= 1) put_bar(c, kRegBar0 + 4 * static_cast<std::size_t>(bar.index), bar);
  }
  c.put8(kRegPrimaryBus, placement.primary_bus);
  c.put8(kRegSecondaryBus, placement.secondary_bus);
  c.put8(kRegSubordinateBus, placement.subordinate_bus);
  put_windows(c, placement);
}

void put_power_management(ConfigBytes& c, std::size_t next) {
  c.put8(kPmOffset, kCapPowerManagement);
  c.put8(kPmOffset + 1, static_cast<uint8_t>(next));
  c.put16(kPmOffset + 2, 0x0003);  // PMC: version 3 (PCI PM 1.2 §3.2.3)
  c.put16(kPmOffset + 4, 0x0008);  // PMCSR: D0, No_Soft_Reset
}

// Type 1 headers carry subsystem ids in this capability, not at 0x2c (PCI Bridge 1.2 §3.2.5.13).
void put_subsystem_id(ConfigBytes& c, const SimFunction& fn, std::size_t next) {
  c.put8(kSsidOffset, kCapSubsystemId);
  c.put8(kSsidOffset + 1, static_cast<uint8_t>(next));
  c.put16(kSsidOffset + 4, fn.subsystem_vendor);
  c.put16(kSsidOffset + 6, fn.subsystem_device);
}

uint32_t link_capabilities(const SimFunction& fn, const ConfigPlacement& placement) {
  const bool downstream_facing = fn.port_type == SimPortType::root_port || fn.port_type == SimPortType::downstream;
  uint32_t cap = static_cast<uint32_t>(fn.link_cap_gen & 0xf) | (static_cast<uint32_t>(fn.link_cap_width & 0x3f) << 4) |
                 (1u << 22);  // ASPM Optionality Compliance
  // DLL Link Active Reporting and Link Bandwidth Notification: downstream-facing ports (§7.5.3.6).
  if (downstream_facing) cap |= (1u << 20) | (1u << 21);
  return cap | (static_cast<uint32_t>(placement.port_number) << 24);
}

uint16_t link_status(const SimFunction& fn, const ConfigPlacement& placement) {
  uint16_t sta = static_cast<uint16_t>((fn.link_sta_gen & 0xf) | ((fn.link_sta_width & 0x3f) << 4));
  if (fn.link_sta_gen > 0) sta |= 0x1000;      // Slot Clock Configuration
  if (placement.link_up_below) sta |= 0x2000;  // Data Link Layer Link Active
  return sta;
}

void put_slot(ConfigBytes& c, std::size_t cap, const ConfigPlacement& placement) {
  c.put32(cap + kExpSlotCap, static_cast<uint32_t>(placement.physical_slot) << 19);
  if (placement.link_up_below) c.put16(cap + 0x1a, 0x0040);  // Slot Status: Presence Detect State
}

void put_express(ConfigBytes& c, const SimFunction& fn, const ConfigPlacement& placement) {
  const std::size_t cap = kExpOffset;
  const bool slot = has_slot(fn, placement);
  c.put8(cap, kCapExpress);
  c.put8(cap + 1, 0);
  c.put16(cap + kExpFlags, static_cast<uint16_t>(0x2 | (port_type_code(fn.port_type) << 4) | (slot ? 0x100 : 0)));
  // Device Capabilities: 256-byte MPS, Extended Tag, Role-Based Errors; FLR on endpoints
  // (§7.5.3.3).
  const uint32_t devcap = is_bridge(fn) ? 0x00008021u : 0x10008fe1u;
  c.put32(cap + 0x04, devcap);
  c.put16(cap + 0x08, 0x2930);  // RlxdOrd, MPS 256, ExtTag, NoSnoop, MRRS 512
  c.put32(cap + kExpLinkCap, link_capabilities(fn, placement));
  c.put16(cap + 0x10, 0x0040);  // Link Control: Common Clock Configuration
  c.put16(cap + kExpLinkStatus, link_status(fn, placement));
  if (slot) put_slot(c, cap, placement);
  // Completion timeout ranges A-D and disable; downstream-facing ports forward ARI (§7.5.3.15).
  const bool forwards_ari = fn.port_type == SimPortType::root_port || fn.port_type == SimPortType::downstream;
  c.put32(cap + 0x24, 0x1fu | (forwards_ari ? 0x20u : 0u));
  if (forwards_ari) c.put16(cap + 0x28, 0x0020);
  // Supported Link Speeds Vector: bit n set for generation n, all up to the maximum (§7.5.3.18).
  const int gen = std::clamp(fn.link_cap_gen, 0, 7);
  c.put32(cap + kExpLinkCap2, static_cast<uint32_t>(((1u << gen) - 1u) << 1));
  c.put16(cap + 0x30, static_cast<uint16_t>(gen));        // Link Control 2: Target Link Speed
  if (fn.link_sta_gen >= 3) c.put16(cap + 0x32, 0x001e);  // Link Status 2: equalization done
}

class ExtChain {
 public:
  explicit ExtChain(ConfigBytes& c) : c_(c) {}
  // Appends a capability of `size` bytes and returns its offset; links the previous one to it.
  std::size_t add(uint16_t id, uint8_t version, std::size_t size) {
    const std::size_t at = next_;
    if (last_) {
      header_of_last_ |= static_cast<uint32_t>(at) << 20;
      c_.put32(*last_, header_of_last_);
    }
    header_of_last_ = static_cast<uint32_t>(id) | (static_cast<uint32_t>(version) << 16);
    c_.put32(at, header_of_last_);
    last_ = at;
    next_ = (at + size + 0xf) & ~std::size_t{0xf};
    return at;
  }

 private:
  ConfigBytes& c_;
  std::size_t next_ = kExtCapStart;
  std::optional<std::size_t> last_;
  uint32_t header_of_last_ = 0;
};

void put_acs(ExtChain& chain, ConfigBytes& c, const SimFunction& fn) {
  const std::size_t at = chain.add(kExtCapAcs, 1, 8);
  c.put16(at + 4, kAcsCapabilityBits);
  c.put16(at + 6, fn.acs_control);
}

void put_ats(ExtChain& chain, ConfigBytes& c, const SimFunction& fn) {
  const std::size_t at = chain.add(kExtCapAts, 1, 8);
  // Invalidate Queue Depth 0 (= 32) and Page Aligned Request (§10.5.1.2); STU 0, Enable bit 15.
  c.put16(at + 4, 0x0020);
  c.put16(at + 6, fn.ats_enabled ? 0x8000 : 0x0000);
}

void put_sriov(ExtChain& chain, ConfigBytes& c, const SimFunction& fn, const ConfigPlacement& placement,
               uint8_t function_number) {
  const std::size_t at = chain.add(kExtCapSriov, 1, 0x40);        // §9.3.3
  c.put16(at + 0x08, fn.sriov_num_vfs > 0 ? 0x0009 : 0x0000);     // VF Enable, VF MSE
  c.put16(at + 0x0c, static_cast<uint16_t>(fn.sriov_total_vfs));  // InitialVFs
  c.put16(at + 0x0e, static_cast<uint16_t>(fn.sriov_total_vfs));
  c.put16(at + 0x10, static_cast<uint16_t>(fn.sriov_num_vfs));
  c.put8(at + 0x12, function_number);  // Function Dependency Link: itself
  c.put16(at + 0x14, static_cast<uint16_t>(fn.sriov_vf_offset));
  c.put16(at + 0x16, static_cast<uint16_t>(fn.sriov_vf_stride));
  c.put16(at + 0x1a, fn.sriov_vf_device);
  c.put32(at + 0x1c, 0x00000553);  // Supported Page Sizes: 4K, 8K, 64K, 256K, 1M, 4M
  c.put32(at + 0x20, 0x00000001);  // System Page Size: 4K
  for (const auto& bar : placement.vf_bars) {
    put_bar(c, at + 0x24 + 4 * static_cast<std::size_t>(bar.index), bar);
  }
}

void put_extended(ConfigBytes& c, const SimFunction& fn, const ConfigPlacement& placement, uint8_t function_number) {
  ExtChain chain(c);
  if (fn.acs) put_acs(chain, c, fn);
  if (fn.ats) put_ats(chain, c, fn);
  if (fn.sriov_total_vfs > 0) put_sriov(chain, c, fn, placement, function_number);
}

uint8_t function_number_of(const SimFunction& fn) {
  // "DDDD:BB:DD.F": the function is the last character; the tree validated the address.
  return fn.address.empty() ? 0 : static_cast<uint8_t>(fn.address.back() - '0');
}

}  // namespace

std::vector<uint8_t> build_config_space(const SimFunction& fn, const ConfigPlacement& placement) {
  ConfigBytes c;
  put_identity(c, fn, placement);
  if (is_bridge(fn)) {
    put_type1(c, placement);
    const bool ssid = fn.subsystem_vendor != 0;
    put_power_management(c, ssid ? kSsidOffset : kExpOffset);
    if (ssid) put_subsystem_id(c, fn, kExpOffset);
  } else {
    put_type0(c, fn, placement);
    put_power_management(c, kExpOffset);
  }
  put_express(c, fn, placement);
  put_extended(c, fn, placement, function_number_of(fn));
  return c.take();
}

uint16_t read16(const std::vector<uint8_t>& config, std::size_t offset) {
  return static_cast<uint16_t>(config.at(offset) | (config.at(offset + 1) << 8));
}

uint32_t read32(const std::vector<uint8_t>& config, std::size_t offset) {
  return static_cast<uint32_t>(read16(config, offset)) | (static_cast<uint32_t>(read16(config, offset + 2)) << 16);
}

std::optional<std::size_t> find_capability(const std::vector<uint8_t>& config, uint8_t id) {
  if (config.size() < 0x40 || (read16(config, kRegStatus) & 0x0010) == 0) return std::nullopt;
  std::size_t at = config.at(kRegCapPtr) & 0xfc;
  for (int hops = 0; at >= 0x40 && at < 0x100 && hops < 48; ++hops) {  // bounded like lspci
    if (config.at(at) == id) return at;
    at = config.at(at + 1) & 0xfc;
  }
  return std::nullopt;
}

std::optional<std::size_t> find_ext_capability(const std::vector<uint8_t>& config, uint16_t id) {
  if (config.size() < kConfigSpaceSize) return std::nullopt;
  std::size_t at = kExtCapStart;
  for (int hops = 0; at >= kExtCapStart && hops < 960; ++hops) {
    const uint32_t header = read32(config, at);
    if (header == 0 || header == 0xffffffff) return std::nullopt;
    if ((header & 0xffff) == id) return at;
    at = (header >> 20) & 0xffc;
  }
  return std::nullopt;
}

}  // namespace hostagent::simhost::detail
