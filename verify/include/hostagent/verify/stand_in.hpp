// verify/stand_in: the rendered domain made bootable on any machine, to check what its
// guest sees. Each passthrough device (a hostdev, a hostdev interface) and each disk is replaced by
// an emulated PCIe device (virtio-rng) at the same guest PCI address; vCPUs and memory shrink;
// hugepages shrink to a size this machine has, or go. What ties the domain to its host stays, moved
// onto this machine (StandInTies): the vCPU and emulator pinning, the strict per-cell memory binding,
// and the 64-bit MMIO hole, sized to what the guest's address width holds. The controllers, the
// guest NUMA cells, the emulated switches and every guest address stay as rendered: they are what
// is being checked.
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "hostagent/common/pci_address.hpp"
#include "hostagent/common/result.hpp"
#include "hostagent/common/sysfs_root.hpp"
#include "hostagent/verify/guest_image.hpp"

namespace hostagent::verify {

// virtio-rng, as the guest's sysfs lists it: 1af4:1005 (transitional, on a conventional PCI bus
// such as pcie.0) or 1af4:1044 (modern, below a PCIe port), QEMU hw/virtio/virtio-pci.c.
inline constexpr uint16_t kStandInVendor = 0x1af4;
bool is_stand_in_id(uint16_t vendor, uint16_t device);

// The guest's physical address width under TCG: QEMU's x86 CPUs get phys-bits 40 there
// (target/i386/cpu.h, TCG_PHYS_ADDR_BITS), and QEMU refuses a 64-bit PCI hole that ends above it
// ("phys-bits too low", hw/i386/pc.c).
inline constexpr int kTcgPhysAddressBits = 40;

struct MachineNode {
  int id = 0;
  std::vector<int> cpus;
};

// The machine the stand-in runs on, onto which the rendered domain's host ties are moved.
struct StandInMachine {
  std::vector<MachineNode> nodes;               // its NUMA nodes with CPUs, by id; empty: pinning and binding go
  int phys_address_bits = kTcgPhysAddressBits;  // the guest's (TCG's, or the machine's under KVM)
};

// This machine's nodes with CPUs (ROOT/sys/devices/system/node/nodeN/cpulist; a machine without
// NUMA support in its kernel has no such directory: one node 0 with every online CPU).
Result<StandInMachine> read_machine(const SysfsRoot& machine, int phys_address_bits);

struct StandInOptions {
  std::string name;                  // the stand-in domain's name
  std::string domain_type = "qemu";  // TCG: no KVM needed; "kvm" where the machine has it
  int vcpus_per_cell = 1;
  uint64_t memory_per_cell_kib = 256ULL * 1024;
  std::string firmware;  // "" keeps the rendered domain's; "bios" or "efi"
  // 0: the cells get ordinary memory; else the rendered hugepage backing stays, with pages of this
  // size (one this machine has free: hugepage_size_with_room).
  uint64_t hugepage_kib = 0;
  GuestImage image;                   // booted directly (kernel, initrd, cmdline)
  std::filesystem::path console_log;  // the serial console, written to this file
  std::filesystem::path seed_iso;     // "" none; else attached as the daemon attaches a VM's seed
  StandInMachine machine;
};

struct StandInCell {
  int id = 0;
  std::vector<int> cpus;  // the stand-in's vCPUs in this cell
  uint64_t memory_kib = 0;
};

struct StandInDevice {
  // As the domain's <address> says it: libvirt's bus is the index of the controller it plugs into,
  // not the bus number the guest sees (RenderedGuest::addresses has that one).
  PciAddress libvirt_address;
  std::string replaces;  // "hostdev", "interface", "disk"
  std::string alias;     // the rendered device's alias, "" when it had none
};

// The rendered domain's ties to its host, as the stand-in keeps them on this machine. The rendered
// domain's host nodes, in order, map to this machine's nodes in turn (the i-th to node i mod N);
// the emulator takes the first CPU of this machine's first node, where the rendered one pins its
// own to housekeeping CPUs; each vCPU is pinned to the CPUs of its cell's node, less the emulator's
// where the node keeps one CPU per vCPU without it. Held against the running QEMU process
// (verify/qemu_process).
struct StandInTies {
  std::vector<int> emulator_cpus;           // empty: the rendered domain pins no emulator
  std::vector<std::vector<int>> vcpu_cpus;  // by vCPU; empty: no vCPU pins
  std::map<int, int> cell_nodes;            // guest cell -> this machine's node, strict
  uint64_t pcihole64_bytes = 0;             // pcie-root's 64-bit hole; 0: none rendered
};

struct StandIn {
  std::string domain_xml;
  StandInTies ties;
  std::vector<StandInCell> cells;      // by id
  std::vector<StandInDevice> devices;  // by libvirt address
  std::vector<std::string> changes;    // what differs from the rendered domain, for the operator
};

// The hugepage size for a stand-in of total_kib on this machine (ROOT/sys/kernel/mm/hugepages):
// wanted_kib (the rendered size) when enough of its pages are free, else the largest size with
// enough free; nullopt when no size has.
Result<std::optional<uint64_t>> hugepage_size_with_room(const SysfsRoot& machine, uint64_t wanted_kib,
                                                        uint64_t total_kib);

// Fails with invalid_argument when the rendered XML is not a domain with guest NUMA cells, or when
// the options are out of range (names the option).
Result<StandIn> make_stand_in(std::string_view rendered_domain_xml, const StandInOptions& options);

}  // namespace hostagent::verify
