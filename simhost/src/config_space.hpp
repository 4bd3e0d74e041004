// simhost/config_space: the 4096 bytes of one function's PCI configuration space, built from its
// SimFunction and from where the tree places it (bus numbers, BAR addresses, windows). Pure: no
// files. sysfs_writer.cpp writes the result as the function's `config` attribute; tests read it
// back with the chain walkers below, which follow the pointers the way lspci does.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <vector>

#include "hostagent/simhost/sim_host.hpp"

namespace hostagent::simhost::detail {

inline constexpr std::size_t kConfigSpaceSize = 4096;  // PCIe extended configuration space

// Register offsets and ids (PCI Local Bus 3.0 §6.1, PCIe Base Spec 6.0 §7.5-7.9).
inline constexpr std::size_t kRegCommand = 0x04;
inline constexpr std::size_t kRegStatus = 0x06;
inline constexpr std::size_t kRegRevision = 0x08;
inline constexpr std::size_t kRegHeaderType = 0x0e;
inline constexpr std::size_t kRegBar0 = 0x10;
inline constexpr std::size_t kRegPrimaryBus = 0x18;
inline constexpr std::size_t kRegSecondaryBus = 0x19;
inline constexpr std::size_t kRegSubordinateBus = 0x1a;
inline constexpr std::size_t kRegMemoryBase = 0x20;
inline constexpr std::size_t kRegPrefBase = 0x24;
inline constexpr std::size_t kRegSubsystemVendor = 0x2c;
inline constexpr std::size_t kRegCapPtr = 0x34;
inline constexpr std::size_t kExtCapStart = 0x100;

inline constexpr uint8_t kCapPowerManagement = 0x01;
inline constexpr uint8_t kCapSubsystemId = 0x0d;
inline constexpr uint8_t kCapExpress = 0x10;
inline constexpr uint16_t kExtCapAcs = 0x000d;
inline constexpr uint16_t kExtCapAts = 0x000f;
inline constexpr uint16_t kExtCapSriov = 0x0010;

// Offsets inside the PCI Express capability (§7.5.3).
inline constexpr std::size_t kExpFlags = 0x02;
inline constexpr std::size_t kExpLinkCap = 0x0c;
inline constexpr std::size_t kExpLinkStatus = 0x12;
inline constexpr std::size_t kExpSlotCap = 0x14;
inline constexpr std::size_t kExpLinkCap2 = 0x2c;

// The ACS capability bits we advertise: SV, TB, RR, CR, UF and DT; no egress control (§7.7.8.2).
inline constexpr uint16_t kAcsCapabilityBits = 0x005f;

struct PlacedBar {
  int index = 0;
  uint64_t address = 0;
  uint64_t size = 0;
  bool is_64bit = true;
  bool prefetchable = true;
};

struct Window {  // an inclusive address range a bridge forwards
  uint64_t base = 0;
  uint64_t limit = 0;
};

// What the tree decides about a function, beyond its own SimFunction.
struct ConfigPlacement {
  bool multifunction = false;  // other functions share its device number (header type bit 7)
  bool is_vf = false;
  uint8_t primary_bus = 0;  // type 1 headers only
  uint8_t secondary_bus = 0;
  uint8_t subordinate_bus = 0;
  std::optional<Window> memory_window;        // 32-bit, non-prefetchable
  std::optional<Window> prefetchable_window;  // 64-bit
  std::vector<PlacedBar> bars;                // the function's own BARs (left out of a VF's registers)
  std::vector<PlacedBar> vf_bars;             // a PF's VF BARs: the address of VF 0's BAR
  uint16_t physical_slot = 0;                 // root and downstream ports: 0 = no slot
  uint8_t port_number = 0;
  bool link_up_below = false;  // a port with a device beneath: Data Link Layer Link Active
};

std::vector<uint8_t> build_config_space(const SimFunction& fn, const ConfigPlacement& placement);

// Readers: little-endian fields, and the offset of a capability found by walking its chain.
uint16_t read16(const std::vector<uint8_t>& config, std::size_t offset);
uint32_t read32(const std::vector<uint8_t>& config, std::size_t offset);
std::optional<std::size_t> find_capability(const std::vector<uint8_t>& config, uint8_t id);
std::optional<std::size_t> find_ext_capability(const std::vector<uint8_t>& config, uint16_t id);

}  // namespace hostagent::simhost::detail
