// Test helper: the PCI driver core of the fake kernel (fake_kernel.hpp). Writes to bind, unbind,
// new_id, remove_id, driver_override, drivers_probe and reset do what drivers/base/bus.c,
// drivers/base/dd.c, drivers/pci/pci-driver.c and drivers/pci/pci-sysfs.c do with them, on the
// fixture tree: the `driver` link and the driver directory's device link appear and go, uevent's
// DRIVER= line and `enable` follow the binding, and vfio-pci's probe registers the device's group,
// which makes /dev/vfio/N (drivers/vfio/group.c) until its last vfio-pci member leaves.
//
// What a fixture cannot say, the model keeps beside the tree: each device's native driver (the one
// its modalias loads, which drivers_probe binds when no driver_override is set), captured from the
// `driver` links when the model is installed; dynamic ids (new_id, and vfio-pci.ids for devices
// bound to vfio-pci at install, which is how such a host got there); and a count of the resets each
// device took, since a reset leaves nothing in sysfs to see.
#pragma once

#include <map>
#include <memory>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "fake_kernel.hpp"

namespace hostagent::testing {

class FakePciDrivers {
 public:
  // The driver drivers_probe binds to bdf when nothing overrides it; "" for none.
  std::string native_driver(const std::string& bdf) const;
  void set_native_driver(const std::string& bdf, std::string driver);
  // Makes driver register before the others, as a module loaded earlier at boot does: device_attach
  // tries the bus's drivers in registration order, so it gets first pick of a device it matches.
  // By default the native driver comes first.
  void load_first(std::string driver) { load_order_.insert(load_order_.begin(), std::move(driver)); }
  // Function resets the device took through its `reset` attribute.
  int resets(const std::string& bdf) const;
  // Every reset, in order, by device name.
  const std::vector<std::string>& reset_log() const { return reset_log_; }
  // The driver bound to bdf at each of its resets, in order ("" for none): a reset under a host
  // driver runs that driver's reset_prepare and reset_done around it.
  std::vector<std::string> drivers_at_resets(const std::string& bdf) const;

 private:
  friend class PciDriverCore;
  std::map<std::string, std::string> native_;
  std::map<std::string, std::set<std::pair<uint32_t, uint32_t>>> dynamic_ids_;  // driver -> {vendor, device}
  std::vector<std::string> reset_log_;
  std::vector<std::string> reset_drivers_;  // beside reset_log_: the driver bound at each
  std::vector<std::string> load_order_;
};

// Registers the driver core's attributes with kernel and returns the state it keeps beside the tree.
std::shared_ptr<FakePciDrivers> install_pci_driver_model(FakeKernel& kernel);

}  // namespace hostagent::testing
