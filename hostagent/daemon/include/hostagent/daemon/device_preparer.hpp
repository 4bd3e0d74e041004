// hostagent/daemon/device_preparer: readying a VM's host devices before its domain starts, and
// giving them back after. An interface, because the first implementation leaves binding to libvirt's
// managed hostdevs (libvirt binds vfio-pci at start and restores the driver at stop), and the device
// work of vfio/ and sriov/ replaces it without the operations changing.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "hostagent/common/result.hpp"
#include "hostagent/numa/placement.hpp"

namespace hostagent::daemon {

class DevicePreparer {
 public:
  virtual ~DevicePreparer() = default;
  // True when libvirt binds and unbinds the devices itself (<hostdev managed='yes'>).
  virtual bool libvirt_manages_hostdevs() const = 0;
  // Readies what the placement assigns to vm. On failure, leaves nothing half-prepared.
  virtual Status prepare(const std::string& vm, const numa::Placement& placement) = 0;
  // Gives back what vm held. Idempotent: rollback and crash recovery call it for steps that may
  // never have run.
  virtual Status release(const std::string& vm, const numa::Allocation& held) = 0;
  // At reconcile: gives back anything prepared that no VM in `held` holds (a crash between prepare
  // and the record that would have named it). Returns what it released, for the report.
  virtual Result<std::vector<std::string>> release_unheld(const std::vector<numa::Allocation>& held) = 0;
};

// Leaves binding to libvirt (managed hostdevs): prepare and release have nothing to do.
std::unique_ptr<DevicePreparer> make_libvirt_managed_preparer();

}  // namespace hostagent::daemon
