// sriov/vf_inventory: the SR-IOV view of the host model: each physical function with its virtual
// functions, their netdevs and RDMA devices, and where they sit (NUMA node, PCIe switch). Placement
// picks VFs from this; VF creation and netlink configuration come with the device-preparation issue.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "hostagent/numa/host_model.hpp"

namespace hostagent::sriov {

struct VirtualFunction {
  numa::PciAddress address;
  int index = 0;       // N of the PF's virtfnN link
  std::string driver;  // "" unbound, "?" unknown
  std::vector<std::string> net_interfaces;
  std::vector<std::string> rdma_devices;
};

struct PhysicalFunction {
  numa::PciAddress address;
  std::optional<int> numa_node;
  std::optional<numa::PciAddress> pcie_switch;
  int total_vfs = 0;
  int num_vfs = 0;
  std::vector<std::string> net_interfaces;
  std::vector<std::string> rdma_devices;
  std::vector<VirtualFunction> vfs;
};

// PFs of NICs (role nic) that are SR-IOV capable, in address order.
std::vector<PhysicalFunction> vf_inventory(const numa::HostModel& model);

}  // namespace hostagent::sriov
