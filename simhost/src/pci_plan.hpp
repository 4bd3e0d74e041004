// simhost/pci_plan: checks a HostSpec's PCI functions for consistency and derives what the kernel
// would: the sysfs directory nesting, bridge bus ranges, BAR addresses and bridge windows, VF
// numbering, IOMMU group numbers. Pure: the writers turn a plan into files.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "config_space.hpp"
#include "hostagent/common/pci_address.hpp"
#include "hostagent/common/result.hpp"
#include "hostagent/simhost/sim_host.hpp"

namespace hostagent::simhost::detail {

// The PCIe routing ID (bus, device, function as one number): SR-IOV places VF n at the PF's plus
// offset + n * stride (PCIe Base Spec 9.3.3.9-10).
inline int routing_id(const PciAddress& a) {
  return (a.bus << 8) | (a.device << 3) | a.function;
}

struct PlannedFunction {
  const SimFunction* spec = nullptr;
  PciAddress addr;
  int parent = -1;            // index of the bridge above; -1 on a root bus
  int physfn = -1;            // on a VF: index of its PF
  int vf_number = -1;         // on a VF: N of the PF's virtfnN
  std::vector<int> children;  // functions directly beneath a bridge, VFs included
  std::vector<int> virtfns;   // on a PF: indexes of its VFs, by N
  int iommu_group = 0;
  ConfigPlacement placement;
  std::string dir;  // kernel path of its directory under /sys/devices
  bool is_bridge() const { return spec->port_type != SimPortType::endpoint; }
};

struct PciPlan {
  std::vector<PlannedFunction> functions;  // in spec order
  std::vector<std::string> host_bridge_dirs;
};

// Fails with invalid_argument naming the first inconsistent function.
Result<PciPlan> plan_pci(const HostSpec& spec);

}  // namespace hostagent::simhost::detail
