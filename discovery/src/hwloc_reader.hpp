// discovery/hwloc_reader: what hwloc tells about a host, loaded either from a sysfs root (HWLOC_FSROOT)
// or from an XML export, flattened into values the rest of numa/ can use without hwloc's types.
#pragma once

#include <filesystem>
#include <optional>
#include <vector>

#include "hostagent/common/result.hpp"
#include "hostagent/numa/host_model.hpp"

namespace hostagent::discovery::detail {

struct HwlocPci {
  PciAddress address;
  uint16_t vendor_id = 0;
  uint16_t device_id = 0;
  uint16_t subsystem_vendor_id = 0;
  uint16_t subsystem_device_id = 0;
  uint16_t class_id = 0;  // base class and subclass only: hwloc does not keep the programming interface
  std::optional<PciAddress> parent;
  std::vector<int> locality_nodes;  // NUMA nodes of the nearest non-I/O ancestor
  float linkspeed_gbytes = 0;       // GB/s, 0 when hwloc did not know
};

struct HwlocHost {
  std::vector<numa::NumaNode> numa_nodes;
  std::vector<numa::Cpu> cpus;
  std::vector<HwlocPci> pci;
};

// Discovers through hwloc's Linux backend with fsroot = root (HWLOC_FSROOT). hwloc reads the
// environment at load time, so loads are serialized process-wide.
Result<HwlocHost> read_hwloc_fsroot(const std::filesystem::path& root);
Result<HwlocHost> read_hwloc_xml(const std::filesystem::path& xml_file);

}  // namespace hostagent::discovery::detail
