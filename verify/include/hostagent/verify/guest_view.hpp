// verify/guest_view: what the booted probe guest saw, as it printed it on its serial
// console, and the probe's /init that prints it. The guest reads only its own sysfs: each PCI
// function's address, IDs, class, NUMA node and the chain of bridges up to its root bus (the
// kernel's /sys/devices path) and its PCIe link, each NUMA node's CPUs, memory and distances, and
// the host bridges' memory windows (/proc/iomem).
// It then powers off.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "hostagent/common/pci_address.hpp"
#include "hostagent/common/result.hpp"

namespace hostagent::verify {

// Every line the probe prints starts with this, so kernel messages and firmware output around
// them are told apart.
inline constexpr std::string_view kViewPrefix = "hostagent-guest-view: ";

// The probe's /init: busybox shell, every command spelled "busybox APPLET".
std::string probe_init_script();

struct GuestLink {
  double speed_gts = 0;
  int width = 0;
};

struct GuestPciFunction {
  PciAddress address;
  uint16_t vendor = 0;
  uint16_t device = 0;
  uint32_t class_code = 0;
  std::optional<int> numa_node;  // nullopt when the guest kernel says -1 (no _PXM above it)
  uint32_t root_domain = 0;      // the root bus it hangs from: pci0000:40 is domain 0, bus 0x40
  int root_bus = 0;
  std::vector<PciAddress> bridges;    // from the root bus down to its parent; empty on a root bus
  std::optional<GuestLink> max_link;  // Link Capabilities; nullopt: no PCIe link, or not printed
  std::optional<GuestLink> link;      // Link Status
  bool is_bridge() const { return (class_code >> 8) == 0x0604; }
};

struct GuestNode {
  int id = 0;
  std::vector<int> cpus;
  uint64_t mem_kib = 0;        // the node's MemTotal: what the guest kernel manages of the cell's memory
  std::vector<int> distances;  // its SLIT row, in node order; empty when not printed
};

// A host bridge's memory window (its ACPI _CRS), inclusive.
struct GuestWindow {
  std::string bus;  // "0000:00"
  uint64_t start = 0;
  uint64_t end = 0;
};

struct GuestView {
  std::vector<GuestNode> nodes;             // by id
  std::vector<GuestPciFunction> functions;  // by address
  // With a seed attached: "mounted vendor_data=ok" (or =failed, =none), "none reason=WORD".
  std::optional<std::string> seed;
  std::map<std::string, std::string> delivered;  // each file the seed's vendor-data put: path -> SHA-256
  std::vector<GuestWindow> windows;              // in the order printed
  const GuestPciFunction* find(const PciAddress& address) const;
};

// The view in a console log. Fails with parse_error when the probe's begin or end line is missing
// (the guest did not reach its /init, or stopped before it finished) or a line is malformed, with
// the line's number.
Result<GuestView> parse_guest_view(std::string_view console);

}  // namespace hostagent::verify
