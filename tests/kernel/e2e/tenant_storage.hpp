// What a tenant can leave on a whole NVMe for a host's storage stack to pick up, and what the host's
// own tools show of it (issue 44): a GPT, an ext4 file system with a label, an LVM PV whose VG has
// the name of the host's own VG, and an md superblock. The host-life boot plants them while the
// host's nvme driver still holds the controller (its first boot, before any hostagentd: a VM under
// TCG inside TCG cannot run these tools), then checks at every later point that none of it shows.
//
// The tools run inside the emulated host, from this machine's root: sfdisk (util-linux), mkfs.ext4,
// LVM's and mdadm's commands, blkid and lsblk. The emulated host has no udev: LVM is told so
// (DM_DISABLE_UDEV), and blkid's own full probe (libblkid) stands for udev's blkid builtin, whose
// results are what lsblk would print of labels and UUIDs on a host that runs udev.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

#include "hostagent/common/pci_address.hpp"

namespace hostagent::testing::e2e {

// The name of the emulated host's own VG, which the tenant gives its VG too: on a host that reads
// the tenant's PV, `vgs` lists two, and LVM refuses the host's VG by name.
inline constexpr const char* kHostVgName = "gpuhost-vg";

// The host's own VG, on a loop device over a file on the persistent disk (a host's VG on its own
// disk): made once, attached again after a reboot. Its UUID is kept beside the file.
struct HostVg {
  std::filesystem::path backing;  // the file the PV lives in
  std::filesystem::path uuid_file;
};
HostVg host_vg_on(const std::filesystem::path& persistent_mount);
// Creates the PV, VG and one LV (not active), and records the VG's UUID.
void make_host_vg(const HostVg& vg);
// After a reboot: its loop device set up again (nothing attaches it at boot in the emulated host).
void attach_host_vg(const HostVg& vg);
// What is wrong with the host's VG as LVM sees it now: empty when `vgs` lists kHostVgName once, with
// the recorded UUID, and its LV; each problem a line otherwise.
std::vector<std::string> host_vg_problems(const HostVg& vg);
// The host's VG activated and deactivated again by its name (vgchange): "" when both worked, else
// what LVM said.
std::string host_vg_activation_problem();

// Writes the tenant's structures on the whole namespace of `controller` (bound to nvme), then stops
// and deactivates what the tools assembled, as a tenant's VM going away leaves them: on the media
// only.
void plant_tenant_storage(const PciAddress& controller);

// Each line any of the host's tools shows of the planted structures (their label, their UUIDs):
// blkid's full probe, lsblk, pvs, vgs, mdadm --examine --scan, /proc/partitions, /proc/mdstat; and
// each md device, and each dm device that is not an LV of `own` (by its VG's UUID). Empty when the
// host sees none of it.
std::vector<std::string> host_traces_of_tenant_storage(const HostVg& own);

}  // namespace hostagent::testing::e2e
