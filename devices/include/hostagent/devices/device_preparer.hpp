// hostagent/devices/device_preparer: the one module that prepares host devices: readying a VM's
// devices before its domain starts and giving them back after, and readying the host's at start. An interface with two
// implementations: hostagent's own (vfio/ binds the IOMMU groups, sriov/ configures the VFs over netlink, ACS/ATS are
// set for peer-to-peer; the domain XML says managed='no'), and libvirt's managed hostdevs (libvirt binds at start and
// restores at stop), which a simulated host uses because its sysfs tree does not act on writes.
#pragma once

#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "hostagent/common/hardware_ids.hpp"
#include "hostagent/common/result.hpp"
#include "hostagent/common/sysfs_writer.hpp"
#include "hostagent/devices/device_cleaning.hpp"
#include "hostagent/numa/host_model.hpp"
#include "hostagent/numa/host_use.hpp"
#include "hostagent/numa/placement.hpp"
#include "hostagent/sriov/vf_netlink.hpp"
#include "hostagent/vfio/config_space_access.hpp"

namespace hostagent::devices {

// What the VM asks of its devices beyond the placement.
struct DeviceRequest {
  std::vector<std::pair<PciAddress, MacAddress>> vf_macs;  // each VF's MAC, as the domain XML gives it
  std::optional<int> vlan;                                 // the template's VLAN; else the configured one
  std::optional<bool> trust;                               // the template's; else the configured one
  std::optional<bool> spoofchk;                            // the template's; else the configured one
  // The template's MTU for the VFs: each VF's PF must carry at least this much (a VF cannot send a
  // frame larger than its PF's MTU), or the VM is refused before any change.
  std::optional<int> mtu;
  // Told as each stage of a preparation ends (read_devices, bind_groups, configure_vfs,
  // peer_to_peer), with what it did ("8 IOMMU groups"): the create's timeline (daemon/timeline).
  // Not called for a VM without devices, nor by a preparer whose devices libvirt prepares.
  std::function<void(std::string_view stage, std::string detail)> on_stage;
};

// A device that failed on its own while it was prepared: the kernel would not put it on vfio-pci.
// A refusal (the host uses a member, vfio-pci is not loaded) is not one: nothing is wrong with the
// device. The daemon keeps a faulted device out of placement until an operator clears it, so a
// broken GPU is not handed to every create after it.
struct DeviceFault {
  PciAddress address;
  std::string vm;      // whose preparation found it
  std::string step;    // what failed: "bind to vfio-pci"
  std::string reason;  // the kernel's answer, as the binder worded it
};
using DeviceFaultSink = std::function<void(const DeviceFault&)>;

class DevicePreparer {
 public:
  virtual ~DevicePreparer() = default;
  // Where faults found by prepare and reapply go; set once, before the first preparation. A
  // preparation that faults a device still fails and rolls back as any other.
  virtual void report_faults_to(DeviceFaultSink sink) = 0;
  // True when libvirt binds and unbinds the devices itself (<hostdev managed='yes'>).
  virtual bool libvirt_manages_hostdevs() const = 0;
  // Readies what the placement assigns to vm. On failure, leaves nothing half-prepared.
  virtual Status prepare(const std::string& vm, const numa::Placement& placement, const DeviceRequest& request) = 0;
  // Before a prepared VM's domain starts, and at reconcile for each running one: puts its devices
  // back as its record says they were prepared, writing only what differs (a host reboot left its
  // groups on their host drivers, its VFs blank and its ACS/ATS registers reset; a PF driver reload
  // blanks VFs under a running guest). Returns what it put back, worded for the log; empty when
  // all held. On a failure what was put back stays (the VM holds those devices either way, and a
  // release gives them back from the record).
  virtual Result<std::vector<std::string>> reapply(const std::string& vm, const numa::Allocation& held) = 0;
  // Gives back what vm held. Idempotent: rollback and crash recovery call it for steps that may
  // never have run.
  virtual Status release(const std::string& vm, const numa::Allocation& held) = 0;
  // At reconcile: gives back anything prepared that no VM in `held` holds (a crash between prepare
  // and the record that would have named it). Returns what it released, for the report.
  virtual Result<std::vector<std::string>> release_unheld(const std::vector<numa::Allocation>& held) = 0;
  // The steps that clean `function` between tenants (device_cleaning.hpp), for the daemon to run
  // once no VM holds it. Each step takes what it needs of the preparer while it runs.
  virtual std::vector<CleaningStep> cleaning_steps(const numa::PciFunction& function) = 0;
};

// Leaves binding to libvirt (managed hostdevs): prepare and release have nothing to do; its
// cleaning steps are libvirt_managed_cleaning_steps for `host`.
std::unique_ptr<DevicePreparer> make_libvirt_managed_preparer(ManagedHost host);

// One PF whose VFs are made at start.
struct VfCount {
  PciAddress pf;
  int vfs = 0;
};

// What the operator asked of hostagent's own preparation (the daemon's configuration, translated
// where the daemon is assembled).
struct PreparationOptions {
  bool bind_at_start = true;       // GPU, NVSwitch and tenant NVMe groups to vfio-pci at start
  std::vector<VfCount> vf_counts;  // VFs to make at start (sriov_numvfs)
  // What a VF is set to before a VM gets it, every field but the MAC set (the VM gives it); vlan 0
  // is untagged, and qos applies only with a VLAN. A VM's own VLAN replaces this one.
  sriov::VfSettings vf_defaults{.mac = std::nullopt,
                                .vlan = 0,
                                .qos = 0,
                                .trust = false,
                                .spoofchk = true,
                                .link_state = sriov::LinkState::automatic,
                                .min_tx_rate_mbps = 0,
                                .max_tx_rate_mbps = 0};
  // Drivers a group member may be taken from; any other means the host uses it and the group is
  // refused. Empty: the built-in list (numa/host_use.hpp).
  std::vector<std::string> releasable_drivers;
  // The operator's reservations (devices.reserved). With what the host is seen using when a group
  // is bound (discovery's detect_host_use, read again then), a group holding one is refused.
  std::vector<numa::HostUse> reserved;
  HygieneOptions hygiene;  // what cleaning checks a device against (hygiene.firmware)
};

// What a VF is set to for a VM: the options' defaults with the VM's MAC, and the VLAN, trust and
// spoofchk the request names (the template's, which win over the host's); a QoS only rides on a VLAN tag.
sriov::VfSettings vf_settings(const PreparationOptions& options, const std::string& mac, const DeviceRequest& request);

// Where the package's boot hold (packaging/boot/modprobe.conf) reads the held-at-boot list: the
// default state_directory's. A list kept elsewhere is one the next boot does not see unless the
// operator points the hold at it; prepare_host_devices says so at every start.
inline constexpr const char* kBootHoldList = "/var/lib/hostagent/held-at-boot";

// The OS interfaces hostagent's own preparation works through: tests give it a fake kernel.
struct HostDeviceParts {
  std::filesystem::path sysfs_root = "/";
  std::unique_ptr<SysfsWriter> writer;
  std::unique_ptr<vfio::ConfigSpace> config_space;
  std::unique_ptr<sriov::VfNetlink> netlink;
  std::unique_ptr<nvme::ControllerOpener> nvme;  // the erase of a tenant's NVMe
  PreparationOptions options;
  std::filesystem::path records_directory;  // one record per VM, written ahead of each change
  // The held-at-boot list prepare_host_devices keeps (state_directory/held-at-boot): the tenant
  // NVMe controllers no host driver may bind at the next boot. "" none (tests that do not boot).
  std::filesystem::path held_at_boot;
  // What prepare_host_devices could not bind (the kernel refused, not a refusal of hostagent's):
  // handed by the preparer made from these parts to its fault sink once one is set.
  std::vector<DeviceFault> start_faults;
};

// hostagent's preparation. The host's groups already bound at start (host preparation) are
// verified, not bound again, and stay on vfio-pci when the VM lets them go. Reads back every
// record left by an earlier run, so the ACS/ATS registers shared by VMs keep their count.
Result<std::unique_ptr<DevicePreparer>> make_host_device_preparer(const numa::HostModel& host, HostDeviceParts parts);

// At start, before the host model is final: creates the configured VFs (sriov_numvfs, with
// sriov_drivers_autoprobe off so they wait, unbound, for vfio-pci) and, with bind_at_start, binds
// every GPU, NVSwitch and tenant NVMe controller group to vfio-pci, recording the original drivers
// ahead as the host's device record, then writes the held-at-boot list from that record. A VF count that cannot be set
// is an error (the configuration names a PF that is not there, or not SR-IOV); a group that cannot be bound is logged
// and left as it was, and a function the kernel would not bind is kept in parts.start_faults (the daemon quarantines
// it, so no VM is placed on it). Returns whether anything changed: the model must then be discovered again.
Result<bool> prepare_host_devices(const numa::HostModel& host, HostDeviceParts& parts);

}  // namespace hostagent::devices
