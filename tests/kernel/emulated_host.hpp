// The emulated GPU host of the real-kernel tests: one place that says what QEMU is given (the host
// side, harness/qemu_command.cpp) and what the guest's tests expect to find (guest/). Debian's kernel
// boots on it under QEMU (TCG) with a real IOMMU, SR-IOV, vfio-pci, netlink VFs and soft-RoCE.
//
// Per guest NUMA node N (a pxb-pcie expander bridge with numa_node=N, bus numbers from kBusBase[N]):
//   root port -> x3130-upstream switch -> one xio3130-downstream port per edu (the GPU stand-ins);
//                on node 0 one more downstream port with a virtio-rng-pci,ats=on (an ATS endpoint)
//   root port -> nvme PF with SR-IOV (an nvme-subsys per PF, as QEMU requires for SR-IOV)
// netdevsim (built out of tree) gives the netdevs whose VFs are configured over netlink, and
// rdma_rxe the RDMA device on top of one of them.
#pragma once

#include <array>
#include <cstdint>

namespace hostagent::testing::emulated_host {

inline constexpr int kNodes = 2;
inline constexpr int kCpusPerNode = 1;
inline constexpr int kMemoryMibPerNode = 768;
inline constexpr std::array<int, kNodes> kBusBase = {0x20, 0x40};

// QEMU's "edu" educational device (hw/misc/edu.c): a conventional PCI function no Debian driver
// claims. Behind a switch port without ACS (QEMU 7.2's xio3130-downstream has none) it shares its
// IOMMU group with that port, as a GPU does behind a switch without ACS.
inline constexpr uint16_t kEduVendor = 0x1234;
inline constexpr uint16_t kEduDevice = 0x11e8;
inline constexpr int kEduPerNode = 2;

// virtio-rng-pci with disable-legacy=on,ats=on: a PCIe endpoint with an ATS capability. Debian builds
// virtio_pci as a module that the guest never loads, so it stays unbound.
inline constexpr uint16_t kAtsEndpointVendor = 0x1af4;
inline constexpr uint16_t kAtsEndpointDevice = 0x1044;

// QEMU's NVMe controller (hw/nvme): an SR-IOV PF with kNvmeMaxVfs VFs, one per node.
inline constexpr uint16_t kNvmeVendor = 0x1b36;
inline constexpr uint16_t kNvmeDevice = 0x0010;
inline constexpr int kNvmeMaxVfs = 4;

// What /init sets up before the tests run (harness/initramfs.cpp): netdevsim device kNetdevsimId
// with one port, up, with kNetdevIpv4 (so rxe has an IPv4 GID), and the rxe device on top of it.
inline constexpr int kNetdevsimId = 1;
inline constexpr int kNetdevsimMaxVfs = 4;  // NSIM_BUS_DEV_MAX_VFS, drivers/net/netdevsim/bus.c
inline constexpr const char* kNetdevIpv4 = "192.0.2.1/24";
inline constexpr const char* kRxeDevice = "rxe0";

}  // namespace hostagent::testing::emulated_host
