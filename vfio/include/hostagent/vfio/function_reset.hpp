// vfio/function_reset: a function's reset between tenants, and the check that it came back as the
// device it was: the first step of cleaning a device between tenants. The reset itself is the kernel's (the `reset`
// attribute, pci-sysfs.c reset_store -> pci_reset_function: the methods `reset_method` lists, in
// order, FLR first where the function has it); the write returns once the kernel's own wait for
// the device is over (pci_dev_wait). What this adds is the proof: config space read until it
// answers as the function it was (FunctionIdentity), within a bounded number of polls. A device
// still answering 0xffff (nothing on the link) or another ID did not come back, and must not be given.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "hostagent/common/pci_address.hpp"
#include "hostagent/common/result.hpp"
#include "hostagent/common/sysfs_root.hpp"
#include "hostagent/common/sysfs_writer.hpp"
#include "hostagent/vfio/config_space_access.hpp"

namespace hostagent::vfio {

struct ResetPolling {
  std::chrono::milliseconds interval{100};
  int polls = 50;  // 5 s at the default interval, after the kernel's own wait
  // How to wait between polls: time injected (tests pass one that does not sleep).
  std::function<void(std::chrono::milliseconds)> sleep;
};

// The registers that say the function answers as itself, and their values. Any function but a VF:
// its vendor and device ID (0x00, 0x02). A VF's ID registers read 0xFFFF by definition (PCIe Base
// 6.0, 9.3.4.1.1 and 9.3.4.1.2: its IDs are in the PF's SR-IOV capability; the kernel takes them
// from there, pci_iov_add_virtfn), so its class code's upper word (0x0a: base class and subclass)
// stands in: it reads all ones only when nothing answers.
struct FunctionIdentity {
  std::vector<std::pair<int, uint16_t>> registers;
  std::string name;  // how a message names it: "10de:2330", "a VF of class 0108"
};
FunctionIdentity function_identity(uint16_t vendor, uint16_t device);
FunctionIdentity vf_identity(uint32_t class_code);

struct ResetReport {
  std::string methods;      // reset_method as the kernel listed it ("flr bus"); "" when it has no such attribute
  int polls = 0;            // config space reads until the IDs answered (1: at once)
  std::string host_driver;  // the host driver it was taken off for the reset and given back to; "" none
};

// Resets `function` and waits for it to answer as `identity`. unsupported when the kernel lists
// no reset method for it (it cannot be reset, so it cannot be proved clean); io_error when the
// write is refused or the function does not come back, naming what config space answered.
Result<ResetReport> reset_and_verify(const SysfsRoot& sysfs, SysfsWriter& writer, ConfigSpace& config,
                                     const PciAddress& function, const FunctionIdentity& identity,
                                     const ResetPolling& polling);

// The same, with no host driver bound during the reset: a function on a host driver (anything but
// a VFIO driver) is unbound from it first and bound to it again once it answered. A reset under a
// bound driver runs that driver's reset_prepare and reset_done around it (pci_reset_function ->
// pci_dev_save_and_disable, pci_dev_restore), and the nvme driver's schedule a controller reset
// and wait for it (nvme_reset_prepare, nvme_reset_done -> flush_work(reset_work)); on 6.1 that
// reset waits forever in nvme_wait_freeze when it meets the namespace scan the driver began at its
// probe a moment earlier (nvme_scan_work -> nvme_remove_invalid_namespaces), which is where every
// controller a VM let go stands when its cleaning begins. The unbind instead waits for the
// driver's own work to end (nvme_remove flushes reset_work and scan_work) and leaves a function
// nothing drives. A reset that fails leaves the function on no driver: its host driver never sees
// what the tenant left on a device not shown clean.
Result<ResetReport> reset_unbound_and_verify(const SysfsRoot& sysfs, SysfsWriter& writer, ConfigSpace& config,
                                             const PciAddress& function, const FunctionIdentity& identity,
                                             const ResetPolling& polling);

}  // namespace hostagent::vfio
