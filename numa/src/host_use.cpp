#include "hostagent/numa/host_use.hpp"

#include <algorithm>

namespace hostagent::numa {

std::vector<HostUse> mark_host_use(HostModel& model, const std::vector<HostUse>& uses) {
  std::vector<HostUse> unknown;
  for (const auto& use : uses) {
    auto it = std::lower_bound(model.pci_devices.begin(), model.pci_devices.end(), use.address,
                               [](const PciFunction& f, const PciAddress& a) { return f.address < a; });
    if (it == model.pci_devices.end() || it->address != use.address) {
      unknown.push_back(use);
      continue;
    }
    auto& text = it->host_use;
    if (!text) {
      text = use.reason;
    } else if (("; " + *text + "; ").find("; " + use.reason + "; ") == std::string::npos) {
      *text += "; " + use.reason;
    }
  }
  return unknown;
}

std::vector<std::string> default_releasable_drivers() {
  return {"nvidia", "nvidia-nvswitch", "nouveau", "snd_hda_intel", "mlx5_core", "nvme", "vfio-pci", "pci-stub"};
}

std::optional<std::string> kept_by_host(const PciFunction& f, const std::vector<std::string>& releasable) {
  if (f.host_use) return "used by the host (" + *f.host_use + ")";
  if (!f.driver || f.driver->empty() || *f.driver == "vfio-pci") return std::nullopt;
  const auto drivers = releasable.empty() ? default_releasable_drivers() : releasable;
  if (std::find(drivers.begin(), drivers.end(), *f.driver) != drivers.end()) return std::nullopt;
  return "bound to " + *f.driver +
         ", which is not among the drivers hostagent may take a device from "
         "(devices.releasable_drivers)";
}

}  // namespace hostagent::numa
