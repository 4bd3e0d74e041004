// Test helper: the fake kernel's SR-IOV, drivers/pci/iov.c sriov_numvfs_store and what enabling and
// disabling VFs does to sysfs. Writing N to a PF's sriov_numvfs creates N VF functions beside the PF
// (the same parent bridge) at PF routing ID + sriov_offset + n * sriov_stride (PCIe Base Spec 6.0
// §9.3.3.10-11), each with its attributes, physfn link, /sys/bus/pci/devices link and a new IOMMU
// group of its own (as with an IOMMU and ACS: pci_device_group); the PF gains virtfnN links. Writing
// 0 removes them with their driver links, class links (net, infiniband) and emptied groups.
//
// The kernel's answers: not a number EINVAL, above sriov_totalvfs ERANGE, the current count a no-op,
// no PF driver ENOENT, a different non-zero count while VFs exist EBUSY ("Disable before enabling").
#pragma once

#include <map>
#include <string>

#include "fake_kernel.hpp"

namespace hostagent::testing {

struct SriovModelOptions {
  // PF address -> the driver its VFs bind to when the PF's sriov_drivers_autoprobe is 1 (the VF's
  // match_driver, pci_iov_add_virtfn). A PF not named here uses the driver its virtfn0 had when the
  // model was installed; one without VFs then leaves them unbound. The binding happens only when
  // /sys/bus/pci/drivers/NAME exists (the driver is loaded).
  std::map<std::string, std::string> vf_drivers;
  // PF address -> the most VFs its driver's sriov_configure enables; the kernel then only warns
  // "%d VFs requested; only %d enabled" and sriov_numvfs reads the smaller number.
  std::map<std::string, int> vf_limit;
};

void install_sriov_model(FakeKernel& kernel, SriovModelOptions options = {});

}  // namespace hostagent::testing
