// Real-kernel harness, the end-to-end boot: the emulated GPU host takes this machine's root as its
// own, read-only over virtio-9p under a tmpfs overlay, so the libvirtd, QEMU and hostagentd it runs
// are the ones installed and built here and nothing it writes reaches this machine. It starts a
// libvirtd there for hostagentd to drive (tests/kernel/e2e/).
#pragma once

#include <optional>
#include <string>
#include <vector>

namespace hostagent::testing::kernel {

inline constexpr const char* kHostRootTag = "hostroot";  // the virtio-9p mount tag (qemu_command.cpp)
inline constexpr const char* kNewRoot = "/newroot";      // where the overlay is mounted in the guest
// 2 MiB hugepages reserved on each guest NUMA node: the VMs' memory (hugepage_size 2M).
inline constexpr int kHugepages2mPerNode = 64;

// The host-life boots' disk that outlives a reboot (qemu_command.hpp, QemuInputs::persistent_disk):
// an ext4 file system with this label, mounted at kPersistentMount in the new root, where
// hostagentd keeps its state and libvirt its domains' configuration (/etc/libvirt/qemu) and
// /var/lib/libvirt, bound there from it. The disk is an NVMe the host mounts: hostagentd must see it
// as the host's.
inline constexpr const char* kPersistentLabel = "hostagent-life";
inline constexpr const char* kPersistentMount = "/var/lib/hostagent-life";

// The modules the mounts need (virtio-9p and overlayfs; ext4 with a persistent disk), beyond the
// device tests' ones.
std::vector<std::string> host_root_modules(bool persistent_disk = false);

// The boot hold as a host's boot runs it (packaging/boot): where the guest finds the package's
// files (the source tree, at its path in this machine's root), and the held-at-boot list its
// initramfs carries at kHeldAtBoot ("" none: a first boot).
inline constexpr const char* kHeldAtBoot = "/held-at-boot";
struct BootHold {
  std::string source_dir;
};

// /init's lines (InitOptions::setup) that mount the overlay at kNewRoot with its own /proc, /sys,
// /dev, /run and hugetlbfs, reserve the hugepages, hide this machine's libvirt state (or, with a
// persistent disk, mount it and take libvirt's state from it), write the guest's libvirt
// configuration and start libvirtd there, waiting for its socket. With a boot hold, nvme is loaded
// there, through the root's modprobe and the package's install line, before the persistent disk
// is looked for: the init's module list must leave nvme out.
std::string host_root_setup(bool persistent_disk = false, const std::optional<BootHold>& hold = std::nullopt);

}  // namespace hostagent::testing::kernel
