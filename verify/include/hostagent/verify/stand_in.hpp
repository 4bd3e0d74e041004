// verify/stand_in: the rendered domain made bootable on any machine, to check what its
// guest sees. Each passthrough device (a hostdev, a hostdev interface) and each disk is replaced by
// an emulated PCIe device (virtio-rng) at the same guest PCI address; vCPUs, memory and everything
// tied to the real host (pinning, host NUMA nodes, the 64-bit MMIO aperture for real BARs) are
// dropped; hugepages shrink to a size this machine has, or go. The controllers, the guest NUMA cells, the emulated
// switches and every guest address stay as rendered: they are what is being checked.
#pragma once

#include <cstdint>
#include <filesystem>
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

struct StandIn {
  std::string domain_xml;
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
