// devices/host_device_preparer: hostagent's own device preparation. For a VM: its IOMMU groups to
// vfio-pci (vfio/), its VFs configured over netlink (sriov/), ACS/ATS set on the ports placement
// relaxed for its peer-to-peer (vfio/p2p_settings, numa/p2p_isolation); each change recorded ahead
// in the VM's device record, and all of it undone from that record, in reverse, on release or on a
// failure midway.
#include <algorithm>
#include <memory>
#include <mutex>
#include <set>
#include <thread>
#include <utility>

#include "binder_options.hpp"
#include "hostagent/devices/device_preparer.hpp"
#include "hostagent/devices/device_records.hpp"
#include "hostagent/numa/p2p_isolation.hpp"
#include "hostagent/sriov/vf_configurator.hpp"
#include "hostagent/systemd/log.hpp"
#include "hostagent/vfio/p2p_settings.hpp"
#include "hostagent/vfio/vfio_binding.hpp"

namespace hostagent::devices {
namespace {

Error with_rollback(Error error, const Status& rollback) {
  error.message += rollback.ok() ? "; rolled back" : "; rolling back: " + rollback.error().message;
  return error;
}

// The VF's place under its PF: the PF's netdev (the VF's settings live there) and N of virtfnN.
struct VfPlace {
  std::string pf_netdev;
  int index = 0;
};

Result<VfPlace> vf_place(const numa::HostModel& host, const PciAddress& vf) {
  const auto* function = host.find(vf);
  if (function == nullptr || !function->physfn) {
    return Error{ErrorCode::not_found, "VF " + vf.to_string() + ": not a virtual function of this host"};
  }
  const auto* pf = host.find(*function->physfn);
  if (pf == nullptr || !pf->sriov) {
    return Error{ErrorCode::not_found, "VF " + vf.to_string() + ": its PF " + function->physfn->to_string() +
                                           " is not an SR-IOV physical function of this host"};
  }
  if (pf->net_interfaces.empty()) {
    return Error{ErrorCode::unavailable, "VF " + vf.to_string() + ": its PF " + pf->address.to_string() +
                                             " has no network interface to configure it through: is the PF's driver "
                                             "loaded?"};
  }
  const auto& vfs = pf->sriov->vfs;
  const auto it = std::find(vfs.begin(), vfs.end(), vf);
  if (it == vfs.end()) {
    return Error{ErrorCode::not_found,
                 "VF " + vf.to_string() + ": not among the virtfn links of " + pf->address.to_string()};
  }
  return VfPlace{pf->net_interfaces.front(), static_cast<int>(it - vfs.begin())};
}

// Every passthrough function of the placement, GPUs (with their companions) first, as it is held:
// the allocation's list, so what is bound is exactly what the ledger holds.
std::vector<PciAddress> passthrough_devices(const numa::Placement& placement) {
  return numa::allocation_of({}, placement, 0).devices;
}

class HostDevicePreparer final : public DevicePreparer {
 public:
  HostDevicePreparer(numa::HostModel host, HostDeviceParts parts, SysfsRoot sysfs, DeviceRecords records)
      : host_(std::move(host)),
        parts_(std::move(parts)),
        records_(std::move(records)),
        sysfs_(sysfs),
        host_use_(std::make_shared<detail::HostUseReading>(parts_.sysfs_root, parts_.options.reserved)),
        binder_(std::move(sysfs), *parts_.writer, binder_options()) {
    // Time is the caller's to inject; a real host waits between the polls of a reset.
    auto& polling = parts_.options.hygiene.reset_polling;
    if (!polling.sleep) polling.sleep = [](std::chrono::milliseconds wait) { std::this_thread::sleep_for(wait); };
  }

  // Reads back the records of an earlier run: the host's groups, and each VM's register needs.
  Status load() {
    HA_TRY(const auto all, records_.all());
    for (const auto& record : all) {
      if (record.owner == kHostDeviceOwner) {
        for (const auto& group : record.groups) host_groups_.insert(group.group);
      } else {
        ledger_.acquire(record.owner, record.p2p);
      }
    }
    return ok_status();
  }

  bool libvirt_manages_hostdevs() const override { return false; }

  // The faults host preparation found at start go to the sink now, as no VM's.
  void report_faults_to(DeviceFaultSink sink) override {
    std::unique_lock lock(mutex_);
    sink_ = std::move(sink);
    faults_ = std::exchange(parts_.start_faults, {});
    report_faults("", lock);
  }

  Status prepare(const std::string& vm, const numa::Placement& placement, const DeviceRequest& request) override {
    std::unique_lock lock(mutex_);
    auto prepared = prepare_vm(vm, placement, request);
    report_faults(vm, lock);
    return prepared;
  }

  Result<std::vector<std::string>> reapply(const std::string& vm, const numa::Allocation& held) override {
    std::unique_lock lock(mutex_);
    auto repaired = reapply_locked(vm, held);
    report_faults(vm, lock);
    return repaired;
  }

  Status release(const std::string& vm, const numa::Allocation& /*held*/) override {
    std::lock_guard lock(mutex_);
    HA_TRY(const auto record, records_.read(vm));
    if (!record) return ok_status();
    return undo(*record);
  }

  // Each exclusive step under the preparer's lock: it shares the writer, config space and netlink
  // with preparations. The others (reset, erase, scrub) run outside it (device_cleaning.hpp says why).
  std::vector<CleaningStep> cleaning_steps(const numa::PciFunction& function) override {
    const CleaningParts cleaning{&host_,
                                 &sysfs_,
                                 parts_.writer.get(),
                                 parts_.config_space.get(),
                                 parts_.netlink.get(),
                                 &parts_.options.hygiene,
                                 parts_.nvme.get(),
                                 [reading = host_use_] { return reading->read(); }};
    auto steps = host_cleaning_steps(cleaning, function);
    for (auto& step : steps) {
      if (!step.exclusive) continue;
      step.run = [this, run = std::move(step.run)] {
        std::lock_guard lock(mutex_);
        return run();
      };
    }
    return steps;
  }

  Result<std::vector<std::string>> release_unheld(const std::vector<numa::Allocation>& held) override {
    std::lock_guard lock(mutex_);
    std::set<std::string> holders;
    for (const auto& allocation : held) holders.insert(allocation.vm);
    HA_TRY(const auto all, records_.all());
    std::vector<std::string> released;
    for (const auto& record : all) {
      if (record.owner == kHostDeviceOwner || holders.count(record.owner) != 0) continue;
      HA_TRY_STATUS(undo(record));
      released.push_back("devices of " + record.owner);
    }
    return released;
  }

 private:
  // The binder's options, with each function it could not bind kept as a fault of the preparation
  // under way (the binder runs under mutex_, so faults_ needs no lock of its own).
  vfio::BinderOptions binder_options() {
    auto options = detail::binder_options(parts_.options, host_use_);
    options.on_bind_failure = [this](const PciAddress& function, const std::string& why) {
      faults_.push_back(DeviceFault{function, "", "bind to vfio-pci", why});
    };
    return options;
  }

  // Hands the faults of the preparation just ended to the sink, as vm's, after releasing `lock`
  // (mutex_'s): the sink publishes events, which the daemon never does under a lock of its own.
  void report_faults(const std::string& vm, std::unique_lock<std::mutex>& lock) {
    auto faults = std::exchange(faults_, {});
    const auto sink = sink_;
    lock.unlock();
    if (!sink) return;
    for (auto& fault : faults) {
      fault.vm = vm;
      sink(fault);
    }
  }

  // A VM prepared before (a retried step) goes on from its record: what it names was found
  // before this VM changed anything, and is what a release must give back.
  Status prepare_vm(const std::string& vm, const numa::Placement& placement, const DeviceRequest& request) {
    HA_TRY(auto existing, records_.read(vm));
    DeviceRecord record = existing.value_or(DeviceRecord{vm, {}, {}, {}});
    auto prepared = prepare_locked(record, placement, request);
    if (prepared.ok()) {
      systemd::log(systemd::LogLevel::info,
                   "devices: " + vm + ": " + std::to_string(record.groups.size()) + " IOMMU groups on vfio-pci, " +
                       std::to_string(record.vfs.size()) + " VFs configured, " + std::to_string(record.p2p.size()) +
                       " ACS/ATS registers held",
                   {.vm = vm});
      return prepared;
    }
    return with_rollback(std::move(prepared).error(), undo(record));
  }

  Result<std::vector<std::string>> reapply_locked(const std::string& vm, const numa::Allocation& held) {
    HA_TRY(auto existing, records_.read(vm));
    DeviceRecord record = existing.value_or(DeviceRecord{vm, {}, {}, {}});
    std::vector<std::string> repaired;
    host_use_->forget();  // read again, once, at the first group bound again
    HA_TRY_STATUS(reapply_groups(record, held.devices, repaired));
    for (const auto& vf : record.vfs) {
      HA_TRY(const auto differed, sriov::reapply(*parts_.netlink, vf));
      if (differed.empty()) continue;
      std::string fields;
      for (const auto& field : differed) fields += (fields.empty() ? "" : "; ") + field;
      repaired.push_back("VF " + std::to_string(vf.vf) + " of " + vf.pf_netdev + " configured again (" + fields + ")");
    }
    ledger_.acquire(vm, record.p2p);  // idempotent: already counted when the records were loaded
    HA_TRY(const auto written, vfio::apply_p2p(*parts_.config_space, record.p2p));
    for (const auto& change : written) {
      repaired.push_back(std::string(vfio::to_string(change.reg)) + " of " + change.device.to_string() + " set again");
    }
    return repaired;
  }

  // A VF to configure: how to reach it, what it gets.
  struct VfPlan {
    VfPlace place;
    sriov::VfSettings wanted;
  };

  // Reads first (what each group is on now, each VF's place and settings, the registers
  // peer-to-peer needs), then one durable record naming all of it, then the changes: the record's
  // one write, ahead of them all rather than two per device, since every undo is idempotent anyway.
  Status prepare_locked(DeviceRecord& record, const numa::Placement& placement, const DeviceRequest& request) {
    const auto devices = passthrough_devices(placement);
    // A VM without devices has no stages to tell apart: its preparation stays one phase.
    const auto stage = [&request, &devices](std::string_view name, std::string detail) {
      if (request.on_stage && !devices.empty()) request.on_stage(name, std::move(detail));
    };
    HA_TRY(const auto groups, plan_groups(record, devices));
    HA_TRY(const auto vfs, plan_vfs(record, request));
    HA_TRY_STATUS(plan_peer_to_peer(record, placement));
    HA_TRY_STATUS(records_.write(record));
    stage("read_devices", std::to_string(devices.size()) + " functions read, the record written ahead");
    host_use_->forget();  // read again, once, at the first group this preparation binds
    for (const auto& device : groups) {
      // The record keeps what the members were on before: the result says the same, or (bound by
      // this VM before) that they are on vfio-pci now, which release must not take for the original.
      if (auto bound = binder_.bind_group(device); !bound.ok()) return std::move(bound).error();
    }
    stage("bind_groups", std::to_string(groups.size()) + " IOMMU groups to vfio-pci");
    for (const auto& vf : vfs) {
      HA_TRY_STATUS(sriov::configure(*parts_.netlink, vf.place.pf_netdev, vf.place.index, vf.wanted));
    }
    stage("configure_vfs", std::to_string(vfs.size()) + " VFs configured over netlink");
    ledger_.acquire(record.owner, record.p2p);
    HA_TRY_STATUS(vfio::apply_p2p(*parts_.config_space, record.p2p));
    stage("peer_to_peer", std::to_string(record.p2p.size()) + " ACS/ATS registers set");
    return ok_status();
  }

  // The IOMMU groups of devices as they stand, each once with a device of it, less the groups bound
  // at start: those are only checked, since they stay on vfio-pci across VMs.
  using GroupNow = std::pair<PciAddress, vfio::GroupBinding>;
  Result<std::vector<GroupNow>> own_groups(const std::vector<PciAddress>& devices) {
    std::vector<GroupNow> out;
    std::set<int> seen;
    for (const auto& device : devices) {
      HA_TRY(auto now, binder_.inspect_group(device));
      if (!seen.insert(now.group).second) continue;
      if (host_groups_.count(now.group) != 0) {
        HA_TRY_STATUS(check_still_bound(now));
        continue;
      }
      out.emplace_back(device, std::move(now));
    }
    return out;
  }

  // One device per group to bind, and the groups recorded with what their members are on now.
  Result<std::vector<PciAddress>> plan_groups(DeviceRecord& record, const std::vector<PciAddress>& devices) {
    HA_TRY(const auto groups, own_groups(devices));
    std::vector<PciAddress> to_bind;
    for (const auto& [device, now] : groups) {
      // Bound by this VM before (a retried step): bound again, a no-op on members still on
      // vfio-pci, and the record keeps the drivers they came from.
      if (!recorded_group(record, now.group)) record.groups.push_back(now);
      to_bind.push_back(device);
    }
    return to_bind;
  }

  // Each group of the VM's devices on vfio-pci again where it is not: groups bound at start are
  // only checked (they stay bound across VMs), the VM's own bound again as its record names them.
  // Group numbers are the kernel's order of discovery at boot and may differ after one: the
  // members are what must match, and the record follows the new number.
  Status reapply_groups(DeviceRecord& record, const std::vector<PciAddress>& devices,
                        std::vector<std::string>& repaired) {
    HA_TRY(const auto groups, own_groups(devices));
    bool renumbered = false;
    for (const auto& [device, now] : groups) {
      if (on_vfio(now)) continue;
      HA_TRY(auto* recorded, group_holding(record, device, now));
      HA_TRY_STATUS(binder_.bind_group(device));
      repaired.push_back("IOMMU group " + std::to_string(now.group) + " (" + device.to_string() +
                         ") bound to vfio-pci again");
      renumbered = renumbered || recorded->group != now.group;
      recorded->group = now.group;
    }
    return renumbered ? records_.write(record) : ok_status();
  }

  static bool on_vfio(const vfio::GroupBinding& group) {
    return std::all_of(group.functions.begin(), group.functions.end(),
                       [](const vfio::BoundFunction& f) { return f.was_vfio; });
  }

  static std::set<PciAddress> members(const vfio::GroupBinding& group) {
    std::set<PciAddress> out;
    for (const auto& f : group.functions) out.insert(f.address);
    return out;
  }

  // The recorded group that device was bound in, with the same members it has now: binding a
  // group whose members changed would take a function whose original driver nobody recorded.
  static Result<vfio::GroupBinding*> group_holding(DeviceRecord& record, const PciAddress& device,
                                                   const vfio::GroupBinding& now) {
    for (auto& group : record.groups) {
      if (members(group).count(device) == 0) continue;
      if (members(group) == members(now)) return &group;
      return Error{ErrorCode::conflict, "IOMMU group " + std::to_string(now.group) + " of " + device.to_string() +
                                            " holds other functions than when " + record.owner +
                                            " was prepared (the host's PCI topology changed): delete the VM and "
                                            "create it again"};
    }
    return Error{ErrorCode::conflict, device.to_string() + " of " + record.owner +
                                          " is not on vfio-pci, and its device record does not say what it was on "
                                          "before (was the VM made under devices.preparation: libvirt?): delete the "
                                          "VM and create it again"};
  }

  static bool recorded_group(const DeviceRecord& record, int group) {
    return std::any_of(record.groups.begin(), record.groups.end(),
                       [group](const vfio::GroupBinding& g) { return g.group == group; });
  }

  // A group bound at start must still be: someone may have rebound a member by hand since.
  static Status check_still_bound(const vfio::GroupBinding& group) {
    for (const auto& f : group.functions) {
      if (!f.was_vfio) {
        return Error{ErrorCode::conflict,
                     "IOMMU group " + std::to_string(group.group) +
                         " was bound to vfio-pci when hostagentd started, "
                         "but " +
                         f.address.to_string() + " is now on " +
                         (f.original_driver.empty() ? std::string("no driver") : f.original_driver) +
                         ": restart hostagentd to bind it again"};
      }
    }
    return ok_status();
  }

  Result<std::vector<VfPlan>> plan_vfs(DeviceRecord& record, const DeviceRequest& request) {
    std::vector<VfPlan> plans;
    for (const auto& [vf, mac] : request.vf_macs) {
      HA_TRY(const auto place, vf_place(host_, vf));
      if (request.mtu) HA_TRY_STATUS(check_pf_mtu(vf, place.pf_netdev, *request.mtu));
      const auto wanted = vf_settings(parts_.options, mac, request);
      auto recorded = std::find_if(record.vfs.begin(), record.vfs.end(), [&](const sriov::VfConfigRecord& r) {
        return r.pf_netdev == place.pf_netdev && r.vf == place.index;
      });
      if (recorded == record.vfs.end()) {
        // What the VF had before this VM, read now so the record written ahead of the changes has
        // it (an operator reads it there; release resets to neutral, sriov::neutral_settings).
        auto previous = parts_.netlink->read(place.pf_netdev, place.index);
        if (!previous.ok()) {
          return Error{previous.error().code, "read VF " + vf.to_string() + " (" + place.pf_netdev + " vf " +
                                                  std::to_string(place.index) + "): " + previous.error().message};
        }
        record.vfs.push_back(sriov::VfConfigRecord{place.pf_netdev, place.index, wanted, *previous});
        recorded = record.vfs.end() - 1;
      }
      recorded->applied = wanted;
      plans.push_back(VfPlan{place, wanted});
    }
    return plans;
  }

  // The PF's MTU from sysfs (net/core/net-sysfs.c mtu_show). The PF is the host's to configure
  // (its own traffic may ride on it): hostagent checks it and never changes it.
  Status check_pf_mtu(const PciAddress& vf, const std::string& pf_netdev, int wanted) const {
    HA_TRY(const auto sysfs, SysfsRoot::open(parts_.sysfs_root));
    HA_TRY(const auto mtu, sysfs.read_int("/sys/class/net/" + pf_netdev + "/mtu"));
    if (mtu >= wanted) return ok_status();
    return Error{ErrorCode::conflict, "VF " + vf.to_string() + ": its PF " + pf_netdev + " has MTU " +
                                          std::to_string(mtu) + ", below the template's nics.vf.mtu " +
                                          std::to_string(wanted) +
                                          " (a VF cannot carry frames larger than its PF's): raise the PF's MTU to " +
                                          std::to_string(wanted) + " or more in the host's network configuration"};
  }

  // Only the ports placement relaxed for this VM (numa/p2p_isolation.hpp): none for a VM that did
  // not ask for peer-to-peer, none where another tenant or the host has a device in reach.
  Status plan_peer_to_peer(DeviceRecord& record, const numa::Placement& placement) {
    for (const auto& kept : placement.p2p_kept) {
      systemd::log(
          systemd::LogLevel::info,
          "devices: " + record.owner + ": ACS on " + kept.port.to_string() + " left as the host set it: " + kept.reason,
          {.vm = record.owner});
    }
    if (placement.p2p_ports.empty()) return ok_status();
    HA_TRY(auto needs,
           vfio::p2p_needs(host_, placement.p2p_ports, numa::peer_devices(placement), *parts_.config_space));
    for (auto& need : needs) need.before = host_value(record, need);
    record.p2p = std::move(needs);
    return ok_status();
  }

  // The register's value before any VM changed it. A register this VM or another already holds
  // reads Vela's setting now; the record must keep the host's own value all the same, since after a
  // restart the records are all that says what to restore once the last VM lets the register go.
  uint16_t host_value(const DeviceRecord& record, const vfio::RegisterChange& need) const {
    for (const auto& held : record.p2p) {
      if (held.device == need.device && held.reg == need.reg) return held.before;
    }
    const auto entry = ledger_.entries().find({need.device, need.reg});
    return entry != ledger_.entries().end() ? entry->second.change.before : need.before;
  }

  // Everything the record names, in reverse: registers no VM needs any more, VF settings, groups.
  // Each undo is idempotent, so a record written ahead of a change that never happened is harmless.
  // The record goes only when all of it is undone; otherwise it stays for the next release.
  Status undo(const DeviceRecord& record) {
    std::string failures;
    auto note = [&failures](const Status& status) {
      if (!status.ok()) failures += (failures.empty() ? "" : "; ") + status.error().message;
    };
    const auto restored = vfio::restore_p2p(*parts_.config_space, ledger_.release(record.owner));
    // Still needed by this owner as far as the count goes, so the next release tries them again.
    if (!restored.ok()) ledger_.acquire(record.owner, record.p2p);
    note(restored);
    for (auto vf = record.vfs.rbegin(); vf != record.vfs.rend(); ++vf) note(sriov::reset(*parts_.netlink, *vf));
    for (auto group = record.groups.rbegin(); group != record.groups.rend(); ++group) {
      // A group the host's preparation holds stays on vfio-pci whatever this record says it came
      // from: a record written before a start bound it (an upgrade from a hostagent that left
      // tenant NVMe on nvme) would give a tenant's controller back to its host driver uncleaned.
      if (host_groups_.count(group->group) != 0) continue;
      note(binder_.release(*group));
    }
    if (!failures.empty()) {
      return Error{ErrorCode::io_error, "devices of " + record.owner + " not all given back: " + failures};
    }
    HA_TRY_STATUS(records_.remove(record.owner));
    systemd::log(systemd::LogLevel::info, "devices: " + record.owner + ": given back", {.vm = record.owner});
    return ok_status();
  }

  const numa::HostModel host_;
  HostDeviceParts parts_;
  DeviceRecords records_;
  const SysfsRoot sysfs_;                             // what cleaning reads (the binder has its own)
  std::shared_ptr<detail::HostUseReading> host_use_;  // before binder_, which holds it
  vfio::VfioBinder binder_;
  DeviceFaultSink sink_;
  std::vector<DeviceFault> faults_;  // found by the preparation under way
  std::mutex mutex_;                 // one preparation at a time: the ledger, and two VMs' groups never interleave
  std::set<int> host_groups_;
  vfio::P2pLedger ledger_;
};

}  // namespace

sriov::VfSettings vf_settings(const PreparationOptions& options, const std::string& mac, const DeviceRequest& request) {
  sriov::VfSettings wanted = options.vf_defaults;
  wanted.mac = mac;
  if (request.vlan) wanted.vlan = *request.vlan;
  if (request.trust) wanted.trust = *request.trust;
  if (request.spoofchk) wanted.spoofchk = *request.spoofchk;
  if (wanted.vlan.value_or(0) == 0) wanted.qos.reset();
  return wanted;
}

Result<std::unique_ptr<DevicePreparer>> make_host_device_preparer(const numa::HostModel& host, HostDeviceParts parts) {
  HA_ASSERT(parts.writer && parts.config_space && parts.netlink);
  HA_TRY(auto sysfs, SysfsRoot::open(parts.sysfs_root));
  HA_TRY(auto records, DeviceRecords::open(parts.records_directory));
  auto preparer = std::make_unique<HostDevicePreparer>(host, std::move(parts), std::move(sysfs), std::move(records));
  HA_TRY_STATUS(preparer->load());
  return std::unique_ptr<DevicePreparer>(std::move(preparer));
}

}  // namespace hostagent::devices
