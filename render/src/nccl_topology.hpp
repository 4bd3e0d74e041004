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
// NIC entries, and how NCCL matches them (src/graph/xml.cc ncclTopoFillNet, v2.12 to v2.21; the
// same idea since): first by <net name> anywhere in the file, and a name match is taken without
// looking at the bus; only without one, by the bus id of the device's PCI path (the IB plugin
// zeroes its function digit, and with NCCL_IB_MERGE_VFS, the default since 2.18, its device
// digits: src/transport/net_ib.cc ncclIbGetPciPath), under which it adds the real <net>. A <net>
// NCCL matched to nothing is trimmed (ncclTopoTrimXml). So a predicted name is a hazard: mlx5_N in
// probe order would put another NIC at this one's place if the guest numbered them otherwise.
// A <net> is therefore written only with the name rdma-core's udev rule gives the device in the
// guest (kernel-boot/rdma_rename.c NAME_FALLBACK, by PCI location: "rocep68s0" for RoCE at guest
// 0000:44:00.0, "ibp68s0" for InfiniBand), which no other device can have; where the host did not
// tell the link layer, the NIC's <pci> is written bare and NCCL adds the device it finds at that
// bus id. Every NIC sits at device 0, function 0 of its guest bus (pci_layout), the form NCCL
// looks it up by.
//
// A NIC whose RDMA side the host read before the VM took it (GuestOptions::nic_rdma) gets its node
// GUID in <net guid=...> (NCCL's own form, 0x and 16 hex digits: it groups ports of one NIC by it).
// The RoCE v2 GID index the host saw goes to the guest's /etc/nccl.conf as NCCL_IB_GID_INDEX
// (render_nccl_conf): NCCL's file has no attribute for it.
#pragma once

#include <map>
#include <optional>
#include <string>

#include "hostagent/numa/host_model.hpp"
#include "hostagent/numa/placement.hpp"
#include "hostagent/render/guest_renderer.hpp"
#include "pci_layout.hpp"

namespace hostagent::render::detail {

std::string render_nccl_topology(const numa::HostModel& host, const numa::Placement& placement, const PciLayout& layout,
                                 const std::map<numa::PciAddress, NicRdma>& nic_rdma);

// The guest's /etc/nccl.conf (RenderedGuest::nccl_conf); "" for a guest without GPUs.
std::string render_nccl_conf(const PciLayout& layout, const std::map<numa::PciAddress, NicRdma>& nic_rdma);

// rdma-core's name for an RDMA device at guest address `at` with this link layer
// ("Ethernet" -> roce..., "InfiniBand" -> ib...); nullopt for another or unknown link layer.
std::optional<std::string> rdma_core_pci_name(const numa::PciAddress& at, const std::string& link_layer);

}  // namespace hostagent::render::detail
