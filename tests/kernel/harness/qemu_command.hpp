// Real-kernel harness: the QEMU command line of the emulated GPU host (emulated_host.hpp). Q35 with
// an emulated Intel IOMMU (interrupt remapping needs the split irqchip; caching-mode=on is what lets
// vfio-pci in the guest map DMA through it), two NUMA nodes each with its own PCIe expander bridge,
// switches, NVMe SR-IOV PFs, and two serial ports: ttyS0 the console, ttyS1 the tests' results.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

#include "../emulated_host.hpp"
#include "host_root.hpp"

namespace hostagent::testing::kernel {

struct QemuInputs {
  std::filesystem::path qemu = "qemu-system-x86_64";
  std::filesystem::path kernel;
  std::filesystem::path initrd;
  std::filesystem::path console_log;  // ttyS0
  std::filesystem::path results_log;  // ttyS1
  // VFs per NVMe PF (sriov_max_vfs): the tests' host has kNvmeMaxVfs; a benchmark may ask for more
  // (bench/bench_kernel_vfs.cpp, 16), and the PF's flexible resources grow with it.
  int nvme_max_vfs = emulated_host::kNvmeMaxVfs;
  // This machine's root, read-only over virtio-9p with the mount tag kHostRootTag (host_root.hpp):
  // the end-to-end boot runs libvirtd, QEMU and hostagentd from it.
  bool share_host_root = false;
  // A raw image that outlives the boot (the host-life boots: host_root.hpp, kPersistentLabel),
  // attached as an NVMe controller of its own (no SR-IOV) on the root complex; empty: none.
  std::filesystem::path persistent_disk = {};
  // An expansion ROM image every edu carries (romfile=; the hygiene boot's); empty: none.
  std::filesystem::path edu_romfile = {};
  // A raw image a tenant's whole NVMe controller keeps its namespace on (the hygiene boot's,
  // serial emulated_host::kTenantNvmeSerial, no SR-IOV), on the root complex; empty: none.
  std::filesystem::path tenant_disk = {};
};

// The kernel command line: the console on ttyS0, the IOMMU on (Debian's default leaves it off),
// a panic that ends the run at once (panic=-1 reboots, -no-reboot turns that into QEMU's exit), and
// what every TCG boot takes so that load cannot fail it (verify::tcg_kernel_cmdline).
// `host_dma_translated`: without iommu=pt, the host's own drivers get a translated DMA domain. The
// hygiene boot's, where a nested VM uses the tenant's NVMe and the host's nvme driver then takes it
// back: its passing runs were made so (docs/devices.md, the hygiene tier's case 7).
std::string kernel_cmdline(bool host_dma_translated = false);

// The device arguments of the emulated host, in creation order (a bus before what plugs into it).
// `tenant_nvme`: the tenant's whole NVMe controller on node 1, on the drive QemuInputs::tenant_disk
// names (id "tenant").
std::vector<std::string> device_arguments(int nvme_max_vfs = emulated_host::kNvmeMaxVfs,
                                          const std::filesystem::path& edu_romfile = {}, bool tenant_nvme = false);

// The whole argv, QEMU first.
std::vector<std::string> qemu_argv(const QemuInputs& inputs);

}  // namespace hostagent::testing::kernel
