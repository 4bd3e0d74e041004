// render/nccl_topology: the NCCL topology file (NCCL_TOPO_FILE) of the guest, in the format of Vela's
// sample and the files Azure ships in its ND VMs: <system version="1">, one <cpu> per guest NUMA cell
// with the cpumap of its vCPUs, below it one <pci class="0x060400"> per emulated switch (busid: the
// guest address of its upstream port, which is how NCCL's own sysfs walk names a switch) holding the
// GPUs and NIC VFs whose nearest switch it is, and GPUs or VFs on their own root port directly under
// the <cpu>. A switch nested in another on the host (pci_layout.hpp) has its <pci> inside its parent
// switch's <pci>, as NCCL's sysfs walk would nest them on bare metal; a switch with no GPU or VF
// beneath it is left out.
// Every busid is the guest address from the PCI layout; class, ids and link speed/width are the host
// device's (a VF, whose link registers read zero, takes its PF's link), and a switch takes its host
// switch's uplink, so NCCL computes the same PCIe bandwidths as on bare metal. NVMe and companion
// functions are left out: NCCL ignores them.
//
// NIC names: the guest's RDMA device names are unknown before boot. mlx5_core names its devices in
// probe order, which is guest PCI order, so the VFs are numbered mlx5_0, mlx5_1, ... in guest bus
// order, and the file says so in a comment (NCCL's parser skips comments since its first XML
// release). A name that turns out wrong only costs NCCL the hint: it trims <net> entries it did not
// find.
//
// A VF whose RDMA side the host read before the VM took it (GuestOptions::nic_rdma) gets its node GUID
// in <net guid=...> (NCCL's own form, 0x and 16 hex digits: it groups ports of one NIC by it), and a
// comment with the RoCE v2 GID index the host saw, for NCCL_IB_GID_INDEX: NCCL's file has no
// attribute for it, and NCCL picks a RoCE v2 GID itself when the variable is unset.
#pragma once

#include <map>
#include <string>

#include "hostagent/numa/host_model.hpp"
#include "hostagent/numa/placement.hpp"
#include "hostagent/render/guest_renderer.hpp"
#include "pci_layout.hpp"

namespace hostagent::render::detail {

std::string render_nccl_topology(const numa::HostModel& host, const numa::Placement& placement, const PciLayout& layout,
                                 const std::map<numa::PciAddress, NicRdma>& nic_rdma);

}  // namespace hostagent::render::detail
