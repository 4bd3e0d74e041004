#include "hostagent/sriov/vf_inventory.hpp"

namespace hostagent::sriov {

std::vector<PhysicalFunction> vf_inventory(const numa::HostModel& model) {
  std::vector<PhysicalFunction> out;
  for (const auto& f : model.pci_devices) {
    if (f.role != numa::PciRole::nic || !f.sriov) continue;
    PhysicalFunction pf{f.address,        f.numa_node,      f.pcie_switch,  f.sriov->total_vfs,
                        f.sriov->num_vfs, f.net_interfaces, f.rdma_devices, {}};
    for (size_t n = 0; n < f.sriov->vfs.size(); ++n) {
      const auto* vf = model.find(f.sriov->vfs[n]);
      // virtfnN points at a function the kernel lists under /sys/bus/pci/devices too; a dangling
      // link would be a kernel bug, and discovery already failed on it.
      HA_ASSERT(vf != nullptr);
      pf.vfs.push_back(VirtualFunction{vf->address, static_cast<int>(n), vf->driver.value_or("?"), vf->net_interfaces,
                                       vf->rdma_devices});
    }
    out.push_back(std::move(pf));
  }
  return out;
}

}  // namespace hostagent::sriov
