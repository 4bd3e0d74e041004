// sriov/vf_provisioning: creating and removing a PF's virtual functions through sriov_numvfs, from
// the host configuration. The live tree (not the host model) says what exists, because VFs come and
// go with each write; every write goes through a SysfsWriter so tests run it against the fake kernel.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "hostagent/common/result.hpp"
#include "hostagent/common/sysfs_root.hpp"
#include "hostagent/common/sysfs_writer.hpp"
#include "hostagent/numa/pci_address.hpp"

namespace hostagent::sriov {

// One virtfnN link of a PF as the kernel shows it now.
struct LiveVf {
  int index = 0;  // N of virtfnN
  numa::PciAddress address;
  std::optional<std::string> driver;  // nullopt: unbound
};

// The PF's VFs in virtfnN order; empty when SR-IOV is off. not_found when the PF does not exist.
Result<std::vector<LiveVf>> live_vfs(const SysfsRoot& sysfs, const numa::PciAddress& pf);

// Makes the PF have exactly count VFs. Idempotent: the same count writes nothing. The kernel takes a
// new non-zero count only from 0 (drivers/pci/iov.c sriov_numvfs_store answers EBUSY otherwise), so a
// change goes through 0, which destroys the current VFs: refused (conflict, naming them) while any of
// them is bound to vfio-pci, i.e. given to a VM. A failure after the VFs were removed restores the
// previous count; the VFs the kernel then reports are checked (sriov_numvfs, virtfnN links).
Status set_vf_count(const SysfsRoot& sysfs, SysfsWriter& writer, const numa::PciAddress& pf, int count);

}  // namespace hostagent::sriov
