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
#include <cstddef>
#include <cstdint>
#include <string>

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

// The hygiene boot's whole NVMe controller for a tenant (QemuInputs::tenant_disk): its serial, its
// one namespace's size, and its PCI IDs. QEMU's use-intel-id gives it Intel's 8086:5845 in place of
// 1b36:0010 (hw/nvme/ctrl.c nvme_init_pci), so the guest tells it from the PFs by its IDs alone: on
// vfio-pci, where hostagent keeps it, it has no nvme controller to read a serial from.
inline constexpr const char* kTenantNvmeSerial = "hostagent-tenant";
inline constexpr uint16_t kTenantNvmeVendor = 0x8086;
inline constexpr uint16_t kTenantNvmeDevice = 0x5845;
inline constexpr std::uintmax_t kTenantNvmeBytes = std::uintmax_t{16} << 20U;
// The host-life boots' tenant controller carries what a tenant left, among it an ext4 file system
// with this label, which blkid reads wherever the host makes a block device of it.
inline constexpr const char* kTenantFsLabel = "tenant-data";

// The expansion ROM the hygiene boot gives every edu (QEMU's romfile=): one image the kernel's
// pci_map_rom accepts (drivers/pci/rom.c pci_get_rom_size: the 0x55AA signature, at 0x18 the
// offset of the "PCIR" data structure, whose image length, in 512-byte units, is at +16 and whose
// last-image flag is bit 7 of +21), sized exactly by that length, so that the ROM the kernel reads
// through sysfs is these bytes and its SHA-256 is theirs. `fill` makes another image.
inline std::string edu_option_rom(char fill = 'h') {
  constexpr std::size_t kBlocks = 2;
  std::string rom(kBlocks * 512, fill);
  const auto put16 = [&rom](std::size_t at, uint16_t value) {
    rom[at] = static_cast<char>(value & 0xffU);
    rom[at + 1] = static_cast<char>(value >> 8U);
  };
  put16(0x00, 0xAA55);
  rom[0x02] = static_cast<char>(kBlocks);
  put16(0x18, 0x20);
  rom.replace(0x20, 4, "PCIR");
  put16(0x20 + 4, kEduVendor);
  put16(0x20 + 6, kEduDevice);
  put16(0x20 + 10, 0x18);  // the structure's length
  put16(0x20 + 16, kBlocks);
  rom[0x20 + 20] = 0;                        // code type: x86
  rom[0x20 + 21] = static_cast<char>(0x80);  // the last image
  return rom;
}

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
