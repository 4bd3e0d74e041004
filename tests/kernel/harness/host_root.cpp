// Real-kernel harness: this machine's root as the emulated host's (see host_root.hpp).
#include "host_root.hpp"

namespace hostagent::testing::kernel {

std::vector<std::string> host_root_modules(bool persistent_disk) {
  // virtio_pci binds the 9p transport's PCI function; 9p itself after it.
  std::vector<std::string> modules = {"virtio_pci", "9pnet_virtio", "9p", "overlay"};
  // Debian builds ext4 as a module, and the CRC32C its metadata checksums need too: ext4 asks the
  // crypto API for "crc32c" at mount (fs/ext4/super.c), which no module dependency names, so
  // without it loaded first the mount fails ("Cannot load crc32c driver").
  if (persistent_disk) modules.insert(modules.end(), {"crc32c_generic", "ext4"});
  return modules;
}

namespace {

// After libvirt's state was reset: the persistent disk (found by its label: the NVMe's block
// device name depends on probe order) mounted in the new root, and libvirt's domain
// configuration and /var/lib/libvirt bound from it, as a host whose /etc and /var are on a disk.
std::string persistent_disk_lines() {
  return std::string(R"sh(
P="$R)sh") +
         kPersistentMount +
         R"sh("
# No wait: modprobe returns once the module's asynchronous probes are done (do_init_module's
# async_synchronize_full), and nvme's (nvme_async_probe) flushes the controller's reset and
# namespace scan, whose disks devtmpfs has made by then.
disk=$(findfs LABEL=)sh" +
         kPersistentLabel + R"sh()
mkdir -p "$P"
mount -t ext4 "$disk" "$P" || say "cannot mount the persistent disk ($disk) on $P"
mkdir -p "$P/libvirt-qemu" "$P/libvirt-lib"
mount --bind "$P/libvirt-qemu" "$R/etc/libvirt/qemu"
mount --bind "$P/libvirt-lib" "$R/var/lib/libvirt"
say "persistent disk $disk on $P: $(ls "$P" | tr '
' ' ')"
)sh";
}

// The package's boot hold in the new root (packaging/boot: its modprobe.d line and script), the
// list this boot's initramfs carries put where the script reads it, as a host's initramfs has it,
// then nvme loaded through the root's kmod, which runs the install line first (modprobe.d(5),
// "install"). busybox's modprobe, which loads the init's own modules, has no install commands.
std::string boot_hold_lines(const BootHold& hold) {
  return R"sh(
B="$R)sh" +
         hold.source_dir +
         R"sh(/packaging/boot"
mkdir -p "$R/usr/libexec/hostagent" "$R/var/lib/hostagent" "$R/etc/modprobe.d"
cp "$B/hold-at-boot" "$R/usr/libexec/hostagent/hold-at-boot"
cp "$B/modprobe.conf" "$R/etc/modprobe.d/hostagent.conf"
[ -e )sh" +
         kHeldAtBoot + R"sh( ] && cp )sh" + kHeldAtBoot + R"sh( "$R/var/lib/hostagent/held-at-boot"
chroot "$R" /sbin/modprobe nvme || say "modprobe nvme through the boot hold failed"
say "nvme loaded through the boot hold; the list held: $(grep -vc '^#' "$R/var/lib/hostagent/held-at-boot" 2>/dev/null || echo none)"
)sh";
}

}  // namespace

std::string host_root_setup(bool persistent_disk, const std::optional<BootHold>& hold) {
  return std::string(R"sh(
# The end-to-end boot (tests/kernel/harness/host_root.cpp): this machine's root, read-only over 9p,
# under a tmpfs overlay. cache=loose: the lower layer never changes while the guest runs.
R=)sh") + kNewRoot +
         R"sh(
mkdir -p /mnt/host /mnt/rw "$R"
mount -t 9p -o trans=virtio,version=9p2000.L,ro,msize=512000,cache=loose )sh" +
         kHostRootTag + R"sh( /mnt/host || say "cannot mount the host root over 9p"
mount -t tmpfs -o size=512m tmpfs /mnt/rw
mkdir -p /mnt/rw/upper /mnt/rw/work
mount -t overlay overlay -o lowerdir=/mnt/host,upperdir=/mnt/rw/upper,workdir=/mnt/rw/work "$R" ||
  say "cannot mount the overlay on $R"
mount -t proc proc "$R/proc"
mount -t sysfs sysfs "$R/sys"
mount -t devtmpfs devtmpfs "$R/dev"
mkdir -p "$R/dev/pts" "$R/dev/shm" "$R/dev/hugepages"
mount -t devpts devpts "$R/dev/pts"
mount -t tmpfs tmpfs "$R/dev/shm"
mount -t hugetlbfs -o pagesize=2M hugetlbfs "$R/dev/hugepages"
# /run is this machine's otherwise: its libvirtd's sockets and pid files.
mount -t tmpfs tmpfs "$R/run"
for node in /sys/devices/system/node/node*; do
  echo )sh" +
         std::to_string(kHugepages2mPerNode) + R"sh( > "$node/hugepages/hugepages-2048kB/nr_hugepages"
done

# libvirt's state on this machine (its domains, pools, networks, capability cache) stays out.
rm -rf "$R/etc/libvirt/qemu" "$R/etc/libvirt/storage" "$R/etc/libvirt/secrets" "$R/etc/libvirt/nwfilter" \
  "$R/var/lib/libvirt" "$R/var/cache/libvirt" "$R/var/log/libvirt"
mkdir -p "$R/etc/libvirt/qemu" "$R/var/lib/libvirt" "$R/var/cache/libvirt" "$R/var/log/libvirt/qemu"
)sh" + (hold ? boot_hold_lines(*hold) : std::string()) +
         (persistent_disk ? persistent_disk_lines() : std::string()) +
         R"sh(
# The guest has no systemd, cgroup mount, virtlogd, AppArmor or polkit, and its root is a chroot
# (not a pivot_root), whose /dev libvirt's per-domain mount namespace cannot rebuild.
cat > "$R/etc/libvirt/qemu.conf" <<'CONF'
namespaces = [ ]
cgroup_controllers = [ ]
security_driver = "none"
user = "root"
group = "root"
dynamic_ownership = 0
remember_owner = 0
stdio_handler = "file"
hugetlbfs_mount = "/dev/hugepages"
CONF
cat > "$R/etc/libvirt/libvirtd.conf" <<'CONF'
auth_unix_rw = "none"
auth_unix_ro = "none"
log_outputs = "3:file:/var/log/libvirt/libvirtd.log"
CONF
chroot "$R" /usr/sbin/libvirtd -d || say "libvirtd did not start"
for attempt in $(seq 300); do
  [ -S "$R/run/libvirt/libvirt-sock" ] && break
  sleep 0.1
done
say "libvirtd up after $(cut -d' ' -f1 /proc/uptime)s: $(ls "$R/run/libvirt" | tr '\n' ' ')"
)sh";
}

}  // namespace hostagent::testing::kernel
