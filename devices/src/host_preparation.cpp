// devices/host_preparation: what hostagentd readies once, at start, before any VM asks: the VFs the
// configuration lists, and every GPU, NVSwitch and tenant NVMe group on vfio-pci (Vela binds them at
// boot), so a VM's start never waits for a driver to let go of a device.
#include <algorithm>
#include <optional>
#include <set>
#include <string>

#include "binder_options.hpp"
#include "hostagent/common/durable_file.hpp"
#include "hostagent/devices/device_preparer.hpp"
#include "hostagent/devices/device_records.hpp"
#include "hostagent/sriov/vf_provisioning.hpp"
#include "hostagent/systemd/log.hpp"
#include "hostagent/vfio/vfio_binding.hpp"

namespace hostagent::devices {
namespace {

// The groups that go to vfio-pci at start: what a VM takes whole. GPUs and NVSwitches; and each
// whole NVMe controller the host does not use, so a tenant's controller never meets the host's nvme
// driver: on it the kernel would scan its partitions and udev would probe, assemble and activate
// what the tenant wrote (docs/devices.md, the exposure model). Not an NVMe PF that has or is to have
// VFs: its driver makes them and manages their namespaces, and the host keeps it.
bool bound_at_start(const numa::PciFunction& f, const PreparationOptions& options) {
  if (f.role == numa::PciRole::gpu || f.role == numa::PciRole::nvswitch) return true;
  if (f.role != numa::PciRole::nvme || f.physfn || f.host_use) return false;
  if (f.sriov && !f.sriov->vfs.empty()) return false;
  return std::none_of(options.vf_counts.begin(), options.vf_counts.end(),
                      [&f](const VfCount& count) { return count.pf == f.address && count.vfs > 0; });
}

// VFs made for passthrough stay unbound until vfio-pci takes them: with sriov_drivers_autoprobe
// at 1 the PF's driver would probe each (Documentation/ABI/testing/sysfs-bus-pci), building a
// netdev and RDMA device per VF only to tear them down again, and some VFs (QEMU's NVMe) cannot
// be probed until the PF gives them resources.
Result<bool> create_vfs(const SysfsRoot& sysfs, SysfsWriter& writer, const VfCount& count) {
  const PciAddress& pf = count.pf;
  HA_TRY(const auto now, sriov::live_vfs(sysfs, pf));
  if (static_cast<int>(now.size()) == count.vfs) return false;
  const std::string autoprobe = "/sys/bus/pci/devices/" + pf.to_string() + "/sriov_drivers_autoprobe";
  if (count.vfs > 0 && sysfs.exists(autoprobe)) HA_TRY_STATUS(writer.write(autoprobe, "0"));
  HA_TRY_STATUS(sriov::set_vf_count(sysfs, writer, pf, count.vfs));
  systemd::log(systemd::LogLevel::info, "devices: " + pf.to_string() + " has " + std::to_string(count.vfs) + " VFs",
               {.device = pf.to_string()});
  return true;
}

bool any_moved(const vfio::GroupBinding& bound) {
  return std::any_of(bound.functions.begin(), bound.functions.end(),
                     [](const vfio::BoundFunction& b) { return !b.was_vfio; });
}

// A group an earlier start bound, whose record keeps the drivers from before that start. A member
// rebound by hand since goes back to vfio-pci (what a VM's refused prepare tells the operator a
// restart does); bind_group writes nothing for members still there.
bool bind_recorded_group(vfio::VfioBinder& binder, const numa::PciAddress& device, int group) {
  const auto bound = binder.bind_group(device);
  if (bound.ok()) return any_moved(*bound);
  systemd::log(systemd::LogLevel::warning,
               "devices: IOMMU group " + std::to_string(group) + " of " + device.to_string() +
                   " left as it is: " + bound.error().message,
               {.device = device.to_string()});
  return false;
}

// Binds the groups bound_at_start names, recording each member's driver ahead (merged with what an
// earlier start recorded: a group bound then keeps its first record).
Result<bool> bind_host_groups(const numa::HostModel& host, const SysfsRoot& sysfs, HostDeviceParts& parts) {
  HA_TRY(auto records, DeviceRecords::open(parts.records_directory));
  HA_TRY(auto record, records.read(kHostDeviceOwner));
  DeviceRecord host_record = record.value_or(DeviceRecord{kHostDeviceOwner, {}, {}, {}});
  // One reading of what the host uses for this whole start.
  const auto host_use = std::make_shared<detail::HostUseReading>(parts.sysfs_root, parts.options.reserved);
  auto options = detail::binder_options(parts.options, host_use);
  options.on_bind_failure = [&parts](const numa::PciAddress& function, const std::string& why) {
    parts.start_faults.push_back(DeviceFault{function, "", "bind to vfio-pci at start", why});
  };
  vfio::VfioBinder binder(sysfs, *parts.writer, std::move(options));
  std::set<int> recorded;
  for (const auto& group : host_record.groups) recorded.insert(group.group);
  bool changed = false;
  std::set<int> seen;  // each group once per start
  for (const auto& f : host.pci_devices) {
    if (!bound_at_start(f, parts.options)) continue;
    HA_TRY(const auto now, binder.inspect_group(f.address));
    if (!seen.insert(now.group).second) continue;
    if (recorded.count(now.group) != 0) {
      changed = bind_recorded_group(binder, f.address, now.group) || changed;
      continue;
    }
    host_record.groups.push_back(now);
    HA_TRY_STATUS(records.write(host_record));
    auto bound = binder.bind_group(f.address);
    if (!bound.ok()) {
      // bind_group put the group back as it was. The daemon still starts: a function the kernel
      // refused is in start_faults, which the daemon quarantines; a group refused for a member the
      // host uses is one placement refuses too.
      systemd::log(systemd::LogLevel::warning,
                   "devices: IOMMU group " + std::to_string(now.group) + " of " + f.address.to_string() +
                       " left as it is: " + bound.error().message,
                   {.device = f.address.to_string()});
      host_record.groups.pop_back();
      HA_TRY_STATUS(records.write(host_record));
      continue;
    }
    changed = changed || any_moved(*bound);
    host_record.groups.back() = *bound;
    HA_TRY_STATUS(records.write(host_record));
  }
  return changed;
}

// The held-at-boot list: each NVMe controller of the groups the host's record holds, which
// packaging/boot/hold-at-boot gives to vfio-pci (driver_override) when the nvme module is loaded at
// the next boot, before that driver can probe it. Only NVMe: a GPU or NVSwitch on its host driver
// until hostagentd starts holds nothing the host parses. Empty without bind_at_start: the operator
// then wants the controllers on nvme.
std::string held_at_boot_text(const numa::HostModel& host, const std::optional<DeviceRecord>& record) {
  std::string text =
      "# Written by hostagentd (devices/host_preparation): the tenant NVMe controllers it keeps on vfio-pci.\n"
      "# Read at boot by /usr/libexec/hostagent/hold-at-boot before the nvme driver loads.\n"
      "# format 1: one PCI address per line; the reader skips lines starting with #.\n";
  if (!record) return text;
  for (const auto& group : record->groups) {
    for (const auto& member : group.functions) {
      const auto* f = host.find(member.address);
      if (f != nullptr && f->role == numa::PciRole::nvme) text += member.address.to_string() + "\n";
    }
  }
  return text;
}

// Rewritten only when it changes: a change makes the host rebuild its initramfs
// (hostagent-initramfs.path), which holds a copy.
Status write_held_at_boot(const numa::HostModel& host, const HostDeviceParts& parts) {
  if (parts.held_at_boot.empty()) return ok_status();
  std::optional<DeviceRecord> record;
  if (parts.options.bind_at_start) {
    HA_TRY(auto records, DeviceRecords::open(parts.records_directory));
    HA_TRY(record, records.read(kHostDeviceOwner));
  }
  if (record && parts.held_at_boot != kBootHoldList) {
    systemd::log(
        systemd::LogLevel::warning,
        "devices: the boot hold reads " + std::string(kBootHoldList) + ", but this host's list is " +
            parts.held_at_boot.string() +
            " (state_directory): name it after hold-at-boot in /etc/modprobe.d/hostagent.conf, or "
            "the tenant NVMe controllers meet the nvme driver at the next boot (docs/devices.md, \"At boot\")");
  }
  const std::string text = held_at_boot_text(host, record);
  constexpr std::size_t kMaxBytes = 1 << 20;
  const auto now = durable::read_file(parts.held_at_boot, kMaxBytes);
  if (now.ok() && *now == text) return ok_status();
  return durable::replace_file(parts.held_at_boot, text);
}

}  // namespace

Result<bool> prepare_host_devices(const numa::HostModel& host, HostDeviceParts& parts) {
  HA_TRY(const auto sysfs, SysfsRoot::open(parts.sysfs_root));
  bool changed = false;
  for (const auto& count : parts.options.vf_counts) {
    HA_TRY(const bool created, create_vfs(sysfs, *parts.writer, count));
    changed = changed || created;
  }
  if (parts.options.bind_at_start) {
    HA_TRY(const bool bound, bind_host_groups(host, sysfs, parts));
    changed = changed || bound;
  }
  HA_TRY_STATUS(write_held_at_boot(host, parts));
  return changed;
}

}  // namespace hostagent::devices
