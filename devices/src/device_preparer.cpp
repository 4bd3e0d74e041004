// devices/device_preparer: the preparer for hosts whose devices libvirt binds (simulated hosts). libvirt's managed
// hostdevs do the binding: at start libvirt detaches each <hostdev managed='yes'> from its driver and binds it to
// vfio-pci, and at stop it rebinds the original driver (virHostdevPreparePCIDevices / virHostdevReAttachPCIDevices), so
// there is nothing to prepare ahead and nothing left over after a crash of ours.
#include "hostagent/devices/device_preparer.hpp"

namespace hostagent::devices {
namespace {

class LibvirtManagedPreparer final : public DevicePreparer {
 public:
  explicit LibvirtManagedPreparer(ManagedHost host) : host_(host) {}
  bool libvirt_manages_hostdevs() const override { return true; }
  // libvirt binds at the domain's start, and a failure there is virDomainCreate's error, naming no
  // device this side can tell apart: nothing to report.
  void report_faults_to(DeviceFaultSink /*sink*/) override {}
  Status prepare(const std::string& /*vm*/, const numa::Placement& /*placement*/,
                 const DeviceRequest& /*request*/) override {
    return ok_status();
  }
  // libvirt binds again at each start, and a VF it configured goes back to it at each start too.
  Result<std::vector<std::string>> reapply(const std::string& /*vm*/, const numa::Allocation& /*held*/) override {
    return std::vector<std::string>{};
  }
  Status release(const std::string& /*vm*/, const numa::Allocation& /*held*/) override { return ok_status(); }
  Result<std::vector<std::string>> release_unheld(const std::vector<numa::Allocation>& /*held*/) override {
    return std::vector<std::string>{};
  }
  std::vector<CleaningStep> cleaning_steps(const numa::PciFunction& function) override {
    return libvirt_managed_cleaning_steps(function, host_);
  }

 private:
  const ManagedHost host_;
};

}  // namespace

std::unique_ptr<DevicePreparer> make_libvirt_managed_preparer(ManagedHost host) {
  return std::make_unique<LibvirtManagedPreparer>(host);
}

}  // namespace hostagent::devices
