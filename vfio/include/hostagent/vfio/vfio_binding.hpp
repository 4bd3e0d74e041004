// vfio/vfio_binding: moving the endpoints of an IOMMU group to vfio-pci, and giving them back to the
// drivers they came from. Owns the order of the sysfs writes, what counts as a member the host is
// using, the check that the group's /dev/vfio/N exists, the function-level reset on release, and
// the rollback of a bind that fails midway. Every call reads the live tree (SysfsRoot) when it runs,
// never a cached HostModel: a device's driver changes under us. Writes go through a SysfsWriter.
//
// The kernel interface it relies on (Documentation/ABI/testing/sysfs-bus-pci):
//  - devices/B/driver_override: once it names a driver, only that driver may bind B, and a write
//    of "\n" clears it. It binds nothing by itself.
//  - drivers/X/unbind, drivers/X/bind: detach B from X, attach B to X (ENODEV when X does not match).
//  - drivers_probe: an unbound B is probed again, which honours driver_override.
//  - devices/B/reset, reset_method: a function reset through the methods reset_method lists.
// vfio-pci's probe creates the group's /dev/vfio/N (drivers/vfio/group.c), and VFIO lets a group be
// opened only when each member is on a VFIO driver, unbound, or a bridge (vfio_dev_driver_allowed).
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "hostagent/common/result.hpp"
#include "hostagent/common/sysfs_root.hpp"
#include "hostagent/common/sysfs_writer.hpp"
#include "hostagent/numa/host_use.hpp"
#include "hostagent/numa/pci_address.hpp"

namespace hostagent::vfio {

// vfio-pci itself, and the vfio-pci-core variant drivers (mlx5_vfio_pci, nvgrace-gpu-vfio-pci,
// hisi-acc-vfio-pci), each of which VFIO accepts in a group as it accepts vfio-pci.
bool is_vfio_driver(const std::string& driver);
// What a kernel module's name can be: a driver name goes into a path (drivers/NAME/bind) and into
// driver_override, and a journaled binding is input. "" (no driver) passes.
bool is_driver_name(const std::string& name);

// One endpoint of a group as it was before bind_group, so release can put it back. A record the
// daemon journals: release validates it before any of it reaches a path.
struct BoundFunction {
  numa::PciAddress address;
  std::string original_driver;    // "" was unbound
  std::string original_override;  // "" none
  bool was_vfio = false;          // already on a VFIO driver: bind and release leave it alone
  bool operator==(const BoundFunction&) const = default;
};

struct GroupBinding {
  int group = -1;
  std::vector<BoundFunction> functions;  // endpoints of the group in bind order
  bool operator==(const GroupBinding&) const = default;
};

// What a group member may be taken from. A member bound to any other driver is one the host is
// using (its disk, its network, its console), and the group is refused whole until an operator
// frees that member. Unbound members and members on a VFIO driver never block.
struct BinderOptions {
  std::vector<std::string> unbindable_drivers = default_unbindable_drivers();
  // What the host uses now (mounted disks, routed NICs, the operator's reservations), asked once per
  // group bound: a group with such a member is refused whatever its drivers, since a disk the
  // host mounted since the model was read is the host's all the same. Empty: not asked.
  std::function<Result<std::vector<numa::HostUse>>()> host_use;
  // Told of each function the kernel would not put on vfio-pci (a write to its driver files failed,
  // or after them it is not on vfio-pci with its group's node present): the device's own failure,
  // where a refusal (a member the host uses, vfio-pci not loaded) is not one. Called before the
  // rollback; the caller decides what a failed device is (the daemon quarantines it). Empty: not told.
  std::function<void(const numa::PciAddress& function, const std::string& why)> on_bind_failure;

  // nvidia, nvidia-nvswitch, nouveau (GPUs and NVSwitches), snd_hda_intel (a GPU's HDMI audio
  // function, which shares the GPU's group), mlx5_core (ConnectX functions), nvme, vfio-pci,
  // pci-stub. QEMU's edu and pci-testdev stand-ins (real-kernel tests) have no in-tree driver:
  // they are unbound, which never blocks.
  static std::vector<std::string> default_unbindable_drivers();
};

class VfioBinder {
 public:
  VfioBinder(SysfsRoot sysfs, SysfsWriter& writer, BinderOptions options = {});

  // Binds every endpoint of device's group to vfio-pci; bridges stay with their driver. Refuses,
  // before any write, a group with a member the host is using, naming that member and its driver.
  // Idempotent: members already on VFIO are left as they are. On a failure midway, every member
  // already moved goes back, in reverse, and the error says so.
  Result<GroupBinding> bind_group(const numa::PciAddress& device);

  // Gives every function back to its original driver, in reverse order, resetting each (FLR)
  // before its host driver sees it again. Idempotent: a function already back is left alone. A
  // function that does not go back does not stop the others; the error lists each one.
  Status release(const GroupBinding& binding);

  // The group of device as it stands: each endpoint with its driver and driver_override now.
  Result<GroupBinding> inspect_group(const numa::PciAddress& device) const;

 private:
  struct Member;
  Result<int> group_of(const numa::PciAddress& device) const;
  Result<Member> read_member(const numa::PciAddress& address) const;
  Status check_not_used_by_host(const GroupBinding& binding) const;
  Status check_not_in_use(const GroupBinding& binding) const;
  Status check_vfio_pci_loaded(const GroupBinding& binding) const;
  Status move_to_vfio(const BoundFunction& function, int group);
  Status verify_on_vfio(const BoundFunction& function, int group) const;
  void report_failure(const BoundFunction& function, const Error& error) const;
  Status restore(const BoundFunction& function, bool reset);
  Status unbind_current(const BoundFunction& function, const std::string& driver, bool reset);
  Status bind_original(const BoundFunction& function);
  Status reset_function(const BoundFunction& function);
  Status write_override(const BoundFunction& function, const std::string& driver);
  Status rollback(const std::vector<BoundFunction>& moved);

  SysfsRoot sysfs_;
  SysfsWriter& writer_;
  BinderOptions options_;
};

}  // namespace hostagent::vfio
