// discovery/model_builder: the pure part of discovery. Given the functions as read (ids, class, parent,
// what the kernel reported), derive roles, NUMA nodes for bridges that report none, bridge chains,
// switches and IOMMU groups. No I/O here, so every rule is testable on values.
#pragma once

#include "hostagent/numa/host_model.hpp"

namespace hostagent::discovery::detail {

numa::PciRole classify(const numa::PciFunction& function, const numa::PciFunction* parent, bool has_bridge_children);

// Fills role, bridge_chain, pcie_switch, numa_node, then builds switches and iommu_groups. Expects
// pci_devices sorted by address with what was read (ids, parent, port type, reported node) set.
void finish_model(numa::HostModel& model);

}  // namespace hostagent::discovery::detail
