// discovery/discovery: the one entry point that builds a HostModel, from a live (or fixture) sysfs root
// or from an hwloc XML export that an infra engineer captured on a real host.
#pragma once

#include <cstdint>
#include <filesystem>
#include <utility>
#include <vector>

#include "hostagent/common/result.hpp"
#include "hostagent/numa/host_model.hpp"

namespace hostagent::discovery {

// hwloc (HWLOC_FSROOT=root) for CPUs, NUMA nodes, PCI locality and the bridge tree; the same root's
// sysfs for what hwloc does not keep (IOMMU groups, drivers, SR-IOV, netdevs, RDMA, hugepages free);
// libpci on root/sys/bus/pci for config space (port types, link, ACS, ATS); the same root's /proc
// and block and net classes for what the host itself uses (host_use_reader.hpp).
Result<numa::HostModel> discover_from_sysfs(const std::filesystem::path& root);

// What an XML export lacks (IOMMU groups, drivers, SR-IOV state, config space) stays unknown.
Result<numa::HostModel> discover_from_hwloc_xml(const std::filesystem::path& xml_file);

// Gives the GPU role to the endpoints whose vendor and device ids are listed: the operator's
// stand-ins on a test host (QEMU's edu device), or a GPU the built-in rule (NVIDIA, display or 3D
// class) does not know. Bridges keep their role. Returns how many functions changed role.
int treat_as_gpus(numa::HostModel& model, const std::vector<std::pair<uint16_t, uint16_t>>& vendor_device_ids);

}  // namespace hostagent::discovery
