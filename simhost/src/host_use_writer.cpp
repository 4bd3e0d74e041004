// simhost/host_use_writer: the host's own use of its devices, as the kernel shows it. NVMe block
// devices (drivers/nvme/host/core.c: DEVDIR/nvme/nvmeN, its namespace nvmeNn1 with partitions
// beneath, /sys/block, /sys/class/block and /sys/dev/block links), /proc/self/mountinfo with the
// spec's mounts beside the virtual filesystems every host has, /proc/swaps, /proc/net/route and
// /proc/net/if_inet6. Discovery reads these to find the disk and uplink the host keeps.
#include <cstdio>
#include <map>
#include <set>

#include "kernel_format.hpp"
#include "writers.hpp"

namespace hostagent::simhost::detail {
namespace {

// include/uapi/linux/major.h BLOCK_EXT_MAJOR: NVMe namespaces and partitions take minors there.
constexpr int kBlockExtMajor = 259;

struct Disk {
  const PlannedFunction* function = nullptr;
  std::string controller;  // "nvme0"
  std::string name;        // "nvme0n1"
};

std::vector<Disk> nvme_disks(const PciPlan& plan) {
  std::vector<Disk> disks;
  std::vector<const PlannedFunction*> functions;
  for (const auto& f : plan.functions) {
    if ((f.spec->class_code >> 8) == 0x0108 && f.spec->driver == "nvme") functions.push_back(&f);
  }
  std::sort(functions.begin(), functions.end(),
            [](const PlannedFunction* a, const PlannedFunction* b) { return a->addr < b->addr; });
  for (const auto* f : functions) {
    const std::string controller = "nvme" + std::to_string(disks.size());
    disks.push_back({f, controller, controller + "n1"});
  }
  return disks;
}

// Every block device the spec names, with the disk it lies on and its partition number (0: the disk).
struct Named {
  const Disk* disk = nullptr;
  int partition = 0;
};

std::optional<Named> find_named(const std::vector<Disk>& disks, const std::string& device) {
  for (const auto& disk : disks) {
    if (device == disk.name) return Named{&disk, 0};
    const std::string prefix = disk.name + "p";
    if (device.rfind(prefix, 0) != 0 || device.size() == prefix.size()) continue;
    const auto digits = device.substr(prefix.size());
    if (digits.find_first_not_of("0123456789") != std::string::npos) continue;
    return Named{&disk, std::stoi(digits)};
  }
  return std::nullopt;
}

class BlockTree {
 public:
  BlockTree(TreeWriter& w) : w_(w) {}

  // The block device's number ("259:3"), writing it on first use.
  std::string device(const Named& named) {
    const Disk& disk = *named.disk;
    const std::string ns = disk.function->dir + "/nvme/" + disk.controller + "/" + disk.name;
    if (written_.insert(disk.name).second) {
      write_controller(disk);
      write_block(ns, disk.name, 0);
      w_.link("/sys/block/" + disk.name, ns);
    }
    if (named.partition == 0) return numbers_[disk.name];
    const std::string part = disk.name + "p" + std::to_string(named.partition);
    if (written_.insert(part).second) write_block(ns + "/" + part, part, named.partition);
    return numbers_[part];
  }

 private:
  void write_controller(const Disk& disk) {
    const std::string dir = disk.function->dir + "/nvme/" + disk.controller;
    w_.file(dir + "/state", "live\n");
    w_.link(dir + "/device", disk.function->dir);
    w_.link("/sys/class/nvme/" + disk.controller, dir);
  }

  void write_block(const std::string& dir, const std::string& name, int partition) {
    const std::string number = std::to_string(kBlockExtMajor) + ":" + std::to_string(next_minor_++);
    numbers_[name] = number;
    w_.file(dir + "/dev", number + "\n");
    w_.file(dir + "/size", "3750748848\n");  // 512-byte sectors of a 1.92 TB drive
    if (partition > 0) w_.file(dir + "/partition", decimal_attr(partition));
    w_.dir(dir + "/holders");
    if (partition == 0) w_.dir(dir + "/slaves");
    w_.link("/sys/class/block/" + name, dir);
    w_.link("/sys/dev/block/" + number, dir);
  }

  TreeWriter& w_;
  std::set<std::string> written_;
  std::map<std::string, std::string> numbers_;
  int next_minor_ = 0;
};

// fs/proc_namespace.c show_mountinfo, with the mounts of a systemd host's early boot.
std::string mountinfo(const std::vector<std::pair<SimMount, std::string>>& mounts) {
  std::string out;
  int id = 21;
  for (const auto& [mount, number] : mounts) {
    char line[512];
    std::snprintf(line, sizeof line, "%d %d %s / %s rw,relatime shared:%d - %s /dev/%s rw\n", id,
                  mount.mount_point == "/" ? 1 : 21, number.c_str(), mount.mount_point.c_str(), id - 20,
                  mount.fstype.c_str(), mount.device.c_str());
    out += line;
    ++id;
  }
  out +=
      "40 21 0:22 / /sys rw,nosuid,nodev,noexec,relatime shared:7 - sysfs sysfs rw\n"
      "41 21 0:23 / /proc rw,nosuid,nodev,noexec,relatime shared:12 - proc proc rw\n"
      "42 21 0:5 / /dev rw,nosuid,relatime shared:2 - devtmpfs udev rw,size=4096k,mode=755\n"
      "43 21 0:25 / /run rw,nosuid,nodev,noexec,relatime shared:5 - tmpfs tmpfs rw,mode=755\n";
  return out;
}

// net/ipv4/fib_trie.c fib_route_seq_show: the default route through 10.0.0.1 and its /24.
std::string proc_net_route(const std::string& interface) {
  std::string out = "Iface\tDestination\tGateway \tFlags\tRefCnt\tUse\tMetric\tMask\t\tMTU\tWindow\tIRTT\n";
  if (interface.empty()) return out;
  out += interface + "\t00000000\t0100000A\t0003\t0\t0\t100\t00000000\t0\t0\t0\n";
  out += interface + "\t0000000A\t00000000\t0001\t0\t0\t100\t00FFFFFF\t0\t0\t0\n";
  return out;
}

}  // namespace

Status check_host_use(const HostSpec& spec, const PciPlan& plan) {
  const auto disks = nvme_disks(plan);
  std::vector<std::string> names;
  for (const auto& mount : spec.mounts) names.push_back(mount.device);
  names.insert(names.end(), spec.swaps.begin(), spec.swaps.end());
  for (const auto& name : names) {
    if (!find_named(disks, name)) {
      return Error{ErrorCode::invalid_argument, "simhost: host " + spec.name + ": block device " + name +
                                                    " is not on any NVMe function bound to nvme"};
    }
  }
  if (!spec.default_route.empty()) {
    const bool found = std::any_of(spec.functions.begin(), spec.functions.end(), [&](const SimFunction& f) {
      return std::find(f.net_interfaces.begin(), f.net_interfaces.end(), spec.default_route) != f.net_interfaces.end();
    });
    if (!found) {
      return Error{ErrorCode::invalid_argument, "simhost: host " + spec.name + ": default route interface " +
                                                    spec.default_route + " is no function's interface"};
    }
  }
  return ok_status();
}

void write_host_use(TreeWriter& w, const HostSpec& spec, const PciPlan& plan) {
  const auto disks = nvme_disks(plan);
  BlockTree tree(w);
  // Every disk the kernel found shows in /sys/block, mounted or not.
  for (const auto& disk : disks) tree.device(Named{&disk, 0});
  std::vector<std::pair<SimMount, std::string>> mounts;
  for (const auto& mount : spec.mounts) mounts.emplace_back(mount, tree.device(*find_named(disks, mount.device)));
  w.file("/proc/self/mountinfo", mountinfo(mounts));
  std::string swaps = "Filename\t\t\t\tType\t\tSize\t\tUsed\t\tPriority\n";
  for (const auto& swap : spec.swaps) {
    tree.device(*find_named(disks, swap));
    swaps += "/dev/" + swap + "                          partition\t8388604\t\t0\t\t-2\n";
  }
  w.file("/proc/swaps", swaps);
  w.file("/proc/net/route", proc_net_route(spec.default_route));
  // The loopback's ::1 (host scope 10) and no global address: IPv6 is left to the route above.
  w.file("/proc/net/if_inet6", "00000000000000000000000000000001 01 80 10 80       lo\n");
}

}  // namespace hostagent::simhost::detail
