// simhost/writers: the parts of the tree, each written from a validated spec and its layouts.
// system_writer.cpp: CPUs, NUMA nodes, hugepages, /proc. pci_writer.cpp: PCI functions, drivers,
// IOMMU groups, SR-IOV links. net_writer.cpp: network interfaces and RDMA devices.
// host_use_writer.cpp: what the host itself uses.
#pragma once

#include "cpu_layout.hpp"
#include "pci_plan.hpp"
#include "tree_writer.hpp"

namespace hostagent::simhost::detail {

void write_system(TreeWriter& w, const HostSpec& spec, const CpuLayout& cpus);
void write_pci(TreeWriter& w, const HostSpec& spec, const PciPlan& plan, const CpuLayout& cpus);
void write_network(TreeWriter& w, const PciPlan& plan);
// host_use_writer.cpp: NVMe block devices, mounts, swap and routes. check_host_use runs before any
// write: a mount on a disk the spec does not have fails there, naming it.
Status check_host_use(const HostSpec& spec, const PciPlan& plan);
void write_host_use(TreeWriter& w, const HostSpec& spec, const PciPlan& plan);

}  // namespace hostagent::simhost::detail
