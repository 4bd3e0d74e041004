#include "hostagent/discovery/host_use_reader.hpp"

#include <map>
#include <set>
#include <system_error>

#include "host_use_parse.hpp"
#include "hostagent/common/sysfs_root.hpp"

namespace hostagent::discovery {
namespace {

namespace fs = std::filesystem;

// Deep enough for a partition on LVM on dm-crypt on md on a disk; a loop deeper than this is the
// kernel's, and stopping there loses nothing but the trace.
constexpr int kMaxDepth = 8;

// The function a sysfs device directory lies under: the kernel nests each device's directory
// beneath its parent's (drivers/base/core.c device_add), so the last path component that is a
// PCI address is the nearest PCI function above.
std::optional<PciAddress> pci_above(const fs::path& real) {
  std::optional<PciAddress> found;
  for (const auto& part : real) {
    if (auto address = PciAddress::parse(part.string()); address.ok()) found = *address;
  }
  return found;
}

std::optional<fs::path> resolve(const SysfsRoot& sysfs, const std::string& kernel_path) {
  std::error_code ec;
  auto real = fs::canonical(sysfs.host_path(kernel_path), ec);
  if (ec) return std::nullopt;
  return real;
}

std::vector<std::string> entries(const fs::path& dir) {
  std::vector<std::string> out;
  std::error_code ec;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    out.push_back(it->path().filename().string());
  }
  return out;
}

bool is_nvme_controller(const std::string& name) {
  return name.size() > 4 && name.rfind("nvme", 0) == 0 && name.find_first_not_of("0123456789", 4) == std::string::npos;
}

class Tracer {
 public:
  explicit Tracer(const SysfsRoot& sysfs) : sysfs_(sysfs) {}

  // A block device by its kernel name ("nvme0n1p2", "dm-0").
  void block(const std::string& name, const std::string& reason, int depth = 0) {
    const auto real = resolve(sysfs_, "/sys/class/block/" + name);
    if (!real || depth > kMaxDepth) return;
    if (add(*real, reason)) return;
    // dm and md devices name what they are built on in slaves/ (drivers/md); a partition of one
    // has its disk's directory above it.
    auto disk = *real;
    if (fs::exists(disk / "partition")) disk = disk.parent_path();
    for (const auto& slave : entries(disk / "slaves")) block(slave, reason, depth + 1);
    // An NVMe multipath head lives under its subsystem, beside links to its controllers
    // (drivers/nvme/host/core.c nvme_init_subsystem adds each controller's link there).
    const auto subsystem = disk.parent_path();
    if (subsystem.filename().string().rfind("nvme-subsys", 0) != 0) return;
    for (const auto& entry : entries(subsystem)) {
      if (!is_nvme_controller(entry)) continue;
      std::error_code ec;
      const auto controller = fs::canonical(subsystem / entry, ec);
      if (!ec) add(controller, reason);
    }
  }

  // A network interface by name; a bond, bridge or VLAN is followed down its lower_ links
  // (net/core/dev.c netdev_adjacent_sysfs_add).
  void net(const std::string& name, const std::string& reason, int depth = 0) {
    const auto real = resolve(sysfs_, "/sys/class/net/" + name);
    if (!real || depth > kMaxDepth) return;
    if (add(*real, reason)) return;
    for (const auto& entry : entries(*real)) {
      if (entry.rfind("lower_", 0) == 0) net(entry.substr(6), reason, depth + 1);
    }
  }

  // The name of the block device a major:minor is ("259:2" -> "nvme0n1p2"), from /sys/dev/block.
  std::optional<std::string> block_name(const std::string& device_number) const {
    const auto real = resolve(sysfs_, "/sys/dev/block/" + device_number);
    if (!real) return std::nullopt;
    return real->filename().string();
  }

  std::vector<numa::HostUse> take() { return std::move(found_); }

 private:
  bool add(const fs::path& real, const std::string& reason) {
    const auto address = pci_above(real);
    if (!address) return false;
    if (seen_.insert({*address, reason}).second) found_.push_back({*address, reason});
    return true;
  }

  const SysfsRoot& sysfs_;
  std::set<std::pair<PciAddress, std::string>> seen_;
  std::vector<numa::HostUse> found_;
};

std::string dev_name(const std::string& path) {
  return path.rfind("/dev/", 0) == 0 ? path.substr(5) : "";
}

Status trace_mounts(const SysfsRoot& sysfs, Tracer& tracer) {
  std::vector<detail::MountEntry> mounts;
  if (sysfs.exists("/proc/self/mountinfo")) {
    HA_TRY(const auto text, sysfs.read("/proc/self/mountinfo"));
    mounts = detail::parse_mountinfo(text);
  } else if (sysfs.exists("/proc/mounts")) {
    HA_TRY(const auto text, sysfs.read("/proc/mounts"));
    mounts = detail::parse_mounts(text);
  }
  for (const auto& mount : mounts) {
    // The device number names the disk even when the source does not (/dev/root, /dev/mapper/x);
    // major 0 is an anonymous device (tmpfs, btrfs subvolumes), named by its source if at all.
    std::optional<std::string> name;
    if (!mount.device_number.empty() && mount.device_number.rfind("0:", 0) != 0) {
      name = tracer.block_name(mount.device_number);
    }
    if (!name && !dev_name(mount.source).empty()) name = dev_name(mount.source);
    if (name) tracer.block(*name, *name + " mounted at " + mount.mount_point);
  }
  return ok_status();
}

Status trace_swaps(const SysfsRoot& sysfs, Tracer& tracer) {
  if (!sysfs.exists("/proc/swaps")) return ok_status();
  HA_TRY(const auto text, sysfs.read("/proc/swaps"));
  for (const auto& path : detail::parse_swaps(text)) {
    const auto name = dev_name(path);
    if (!name.empty()) tracer.block(name, name + " is swap");
  }
  return ok_status();
}

std::string joined(const std::vector<std::string>& names) {
  std::string out;
  for (const auto& name : names) out += (out.empty() ? "" : ", ") + name;
  return out;
}

// A disk or partition that another block device is built on (drivers/block/holder.c).
Status trace_holders(const SysfsRoot& sysfs, Tracer& tracer) {
  HA_TRY(const auto disks, sysfs.list("/sys/block", true));
  for (const auto& disk : disks) {
    std::vector<std::string> devices{disk};
    HA_TRY(const auto children, sysfs.list("/sys/block/" + disk, true));
    for (const auto& child : children) {
      if (sysfs.exists("/sys/block/" + disk + "/" + child + "/partition")) devices.push_back(disk + "/" + child);
    }
    for (const auto& device : devices) {
      HA_TRY(const auto holders, sysfs.list("/sys/block/" + device + "/holders", true));
      if (holders.empty()) continue;
      const auto name = fs::path(device).filename().string();
      tracer.block(name, name + " held by " + joined(holders));
    }
  }
  return ok_status();
}

Status trace_network(const SysfsRoot& sysfs, Tracer& tracer) {
  if (sysfs.exists("/proc/net/route")) {
    HA_TRY(const auto text, sysfs.read("/proc/net/route"));
    std::map<std::string, bool> routed;  // interface -> carries the default route
    for (const auto& route : detail::parse_routes(text)) routed[route.interface] |= route.is_default;
    for (const auto& [interface, is_default] : routed) {
      tracer.net(interface, interface + (is_default ? " carries the default route" : " carries IPv4 routes"));
    }
  }
  if (sysfs.exists("/proc/net/if_inet6")) {
    HA_TRY(const auto text, sysfs.read("/proc/net/if_inet6"));
    for (const auto& entry : detail::parse_if_inet6(text)) {
      tracer.net(entry.interface, entry.interface + " has address " + entry.address);
    }
  }
  // Netlink answers for the host the daemon runs on, never for a fixture tree.
  std::error_code ec;
  if (fs::equivalent(sysfs.root(), "/", ec)) {
    HA_TRY(const auto addresses, interface_addresses());
    for (const auto& entry : addresses) tracer.net(entry.interface, entry.interface + " has address " + entry.address);
  }
  return ok_status();
}

}  // namespace

Result<std::vector<numa::HostUse>> detect_host_use(const std::filesystem::path& root) {
  HA_TRY(const auto sysfs, SysfsRoot::open(root));
  Tracer tracer(sysfs);
  HA_TRY_STATUS(trace_mounts(sysfs, tracer));
  HA_TRY_STATUS(trace_swaps(sysfs, tracer));
  HA_TRY_STATUS(trace_holders(sysfs, tracer));
  HA_TRY_STATUS(trace_network(sysfs, tracer));
  return tracer.take();
}

}  // namespace hostagent::discovery
