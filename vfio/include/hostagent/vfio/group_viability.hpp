// vfio/group_viability: whether an IOMMU group can be handed to a VM whole. The kernel lets a group
// be opened through VFIO only when every member is unbound, bound to a VFIO driver or pci-stub, or
// is a bridge (drivers/vfio/group.c, vfio_dev_driver_allowed: non-type-0 headers are allowed).
// This is the check on the model; binding itself is the device-preparation issue's.
#pragma once

#include <string>
#include <vector>

#include "hostagent/common/result.hpp"
#include "hostagent/numa/host_model.hpp"

namespace hostagent::vfio {

struct GroupMemberState {
  numa::PciAddress address;
  std::string driver;   // "" unbound, "?" unknown
  bool blocks = false;  // bound to a host driver that VFIO would refuse
};

struct GroupViability {
  int group = -1;
  std::vector<GroupMemberState> members;
  // Members that must be unbound from their host driver first; empty when the group is viable now.
  std::vector<numa::PciAddress> blockers;
  // Members that are endpoints and so go to the VM with the device (a GPU's audio function).
  std::vector<numa::PciAddress> companions;
};

// The group of `device` as it stands on the host. Fails when the device or its group is unknown:
// a group nobody can see is never assumed viable.
Result<GroupViability> check_group(const numa::HostModel& model, const numa::PciAddress& device);

}  // namespace hostagent::vfio
