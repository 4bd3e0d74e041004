// simhost/writers: the parts of the tree, each written from a validated spec and its layouts.
// system_writer.cpp: CPUs, NUMA nodes, hugepages, /proc. pci_writer.cpp: PCI functions, drivers,
// IOMMU groups, SR-IOV links. net_writer.cpp: network interfaces and RDMA devices.
#pragma once

#include "cpu_layout.hpp"
#include "pci_plan.hpp"
#include "tree_writer.hpp"

namespace hostagent::simhost::detail {

void write_system(TreeWriter& w, const HostSpec& spec, const CpuLayout& cpus);
void write_pci(TreeWriter& w, const HostSpec& spec, const PciPlan& plan, const CpuLayout& cpus);
void write_network(TreeWriter& w, const PciPlan& plan);

}  // namespace hostagent::simhost::detail
