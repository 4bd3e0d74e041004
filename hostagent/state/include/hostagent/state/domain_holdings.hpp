// hostagent/state/domain_holdings: what a libvirt domain hostagent did not make holds on this host,
// read from its XML, so that placement never gives a VM the CPUs it is pinned to, the PCI functions
// it passes through or the hugepages it is backed by. Parsing only: the daemon fetches the XML.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "hostagent/common/result.hpp"
#include "hostagent/numa/placement.hpp"

namespace hostagent::state {

struct DomainHoldings {
  numa::Allocation allocation;  // allocation.vm is the domain's name
  // What the domain may use but does not pin, so it is not counted ("its vCPUs are not pinned: they
  // may run on any CPU"): an operator is told, since hostagent's VMs may share those with it.
  std::vector<std::string> uncounted;
};

// From the domain XML (live for a running domain, persistent otherwise):
//  - CPUs: <cputune> vcpupin, emulatorpin and iothreadpin cpusets, and <vcpu cpuset> when some
//    vCPU has no vcpupin of its own (libvirt's cpuset syntax: "0-7,^3,16");
//  - devices: <hostdev mode='subsystem' type='pci'> source addresses;
//  - hugepages: with <memoryBacking><hugepages>, the memory in pages of the size given (else
//    default_page_bytes, the host's default hugepage size), on the host nodes <numatune> binds
//    each guest cell to (<memnode>, the cell's size from <cpu><numa>), else <numatune><memory
//    nodeset>, spread evenly over those nodes; with neither, uncounted.
// parse_error naming the element when the XML or a value in it cannot be read.
Result<DomainHoldings> domain_holdings(const std::string& name, const std::string& domain_xml,
                                       uint64_t default_page_bytes);

}  // namespace hostagent::state
