// numa/host_model: what hostagent knows about the host, as plain values. Discovery (sysfs or an hwloc
// XML) produces it; placement, rendering and the API only read it. A field that the source cannot
// tell (IOMMU groups from an XML capture, say) is an empty optional: unknown, never invented.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "hostagent/numa/pci_address.hpp"

namespace hostagent::numa {

struct HugepagePool {
  uint64_t page_size_bytes = 0;
  uint64_t total = 0;
  std::optional<uint64_t> free;  // hwloc XML records only the reserved count
};

struct NumaNode {
  int id = 0;
  std::vector<int> cpus;  // empty for a CPU-less node (GPU memory on Grace or POWER9)
  bool cpuless = false;
  std::optional<uint64_t> memory_bytes;
  std::optional<uint64_t> memory_free_bytes;
  std::vector<HugepagePool> hugepages;  // sorted by page size
  std::map<int, int> distances;         // node id -> ACPI SLIT distance (10 = local)
};

struct Cpu {
  int id = 0;
  int core = 0;  // core id, unique within its package
  int package = 0;
  std::optional<int> numa_node;
  std::vector<int> siblings;  // SMT threads of the same core, this one included
  bool online = true;
};

enum class PciRole { gpu, nvswitch, nic, nvme, switch_upstream, switch_downstream, root_port, other };
const char* to_string(PciRole role);

// PCIe port type from the PCI Express capability (PCIe Base Spec 7.5.3.2, Device/Port Type).
enum class PciePortType {
  endpoint,
  legacy_endpoint,
  root_port,
  upstream,
  downstream,
  pcie_to_pci,
  pci_to_pcie,
  rc_integrated,
  rc_event_collector,
  unknown
};

struct PcieLink {
  std::optional<double> max_speed_gts;  // from Link Capabilities
  std::optional<int> max_width;
  std::optional<double> speed_gts;  // from Link Status: what it trained at
  std::optional<int> width;
};

// A link's rate as one value: speed and width, each nullopt when unknown.
struct LinkRate {
  std::optional<double> speed_gts;
  std::optional<int> width;
};

struct Bar {
  int index = 0;  // 0-5, or 6 for the expansion ROM
  uint64_t size_bytes = 0;
  bool is_64bit = false;
  bool prefetchable = false;
};

// Extended capabilities read from config space with libpci. Control bits raw, decoded by the caller.
struct AcsState {
  uint16_t capability = 0;  // ACS Capability Register (PCIe Base Spec 7.7.8.2)
  uint16_t control = 0;     // ACS Control Register
};
struct AtsState {
  bool enabled = false;
  int smallest_translation_unit = 0;
};

struct Sriov {
  int total_vfs = 0;
  int num_vfs = 0;
  std::vector<PciAddress> vfs;  // virtfnN links, in N order
};

struct PciFunction {
  PciAddress address;
  uint16_t vendor_id = 0;
  uint16_t device_id = 0;
  std::optional<uint16_t> subsystem_vendor_id;
  std::optional<uint16_t> subsystem_device_id;
  uint32_t class_code = 0;  // 24-bit: base class, subclass, programming interface
  PciRole role = PciRole::other;
  std::optional<PciePortType> port_type;
  std::optional<int> numa_node;           // after resolving bridges that report -1 (see host_model.cpp)
  std::optional<int> numa_node_reported;  // what the kernel said, -1 included, for diagnosis
  std::vector<int> locality_numa_nodes;   // hwloc's locality: the nodes of its nearest CPUs
  std::optional<int> iommu_group;
  std::optional<std::string> driver;      // nullopt: unknown; "" : bound to no driver
  std::optional<PciAddress> parent;       // the bridge above; nullopt: on a host bridge's root bus
  std::vector<PciAddress> bridge_chain;   // from the parent up to the root port, nearest first
  std::optional<PciAddress> pcie_switch;  // the upstream port of the nearest switch above
  PcieLink link;
  std::vector<Bar> bars;
  std::optional<Sriov> sriov;        // on a PF
  std::optional<PciAddress> physfn;  // on a VF
  std::vector<std::string> net_interfaces;
  std::vector<std::string> rdma_devices;
  std::optional<AcsState> acs;  // nullopt: capability absent or config space unreadable
  std::optional<AtsState> ats;
  // Device Control's Max_Read_Request_Size (PCIe Base Spec 7.5.3.4, bits 14:12: 128 << n bytes):
  // the largest read the function may ask for; nullopt without a PCI Express capability.
  std::optional<int> max_read_request_bytes;
  bool config_space_known = false;  // false when the source has no config space (hwloc XML)
  // Why the host keeps this function for itself (numa/host_use.hpp); nullopt: it does not, as far
  // as the source can tell. Never placed, bound or reset.
  std::optional<std::string> host_use;
  bool is_bridge() const { return (class_code >> 8) == 0x0604 || (class_code >> 8) == 0x0609; }
};

struct PcieSwitch {
  PciAddress upstream;
  std::vector<PciAddress> downstream;
  std::optional<int> numa_node;
  std::vector<PciAddress> devices;  // every function beneath the downstream ports
};

struct IommuGroup {
  int id = 0;
  std::vector<PciAddress> members;
};

struct HostModel {
  std::string source;  // "sysfs:/" or "hwloc-xml:/path", for the operator
  std::vector<NumaNode> numa_nodes;
  std::vector<Cpu> cpus;
  std::vector<PciFunction> pci_devices;  // sorted by address
  std::vector<PcieSwitch> switches;      // sorted by upstream address
  std::vector<IommuGroup> iommu_groups;  // empty when unknown

  const PciFunction* find(const PciAddress& address) const;
  // The link f runs at, as NCCL on the host reads it: what it trained at, else (a VF, whose link
  // registers read zero) its PF's, else what it is capable of. The NCCL file, the root ports' link
  // and verify-guest's comparison all use this one.
  LinkRate link_rate(const PciFunction& f) const;
  // The ACPI SLIT distance from node `from` to node `to` (10: local); nullopt when not known.
  std::optional<int> distance(int from, int to) const;
};

}  // namespace hostagent::numa
