// vfio/vfio_binding: the writes that move a group to vfio-pci and back (see vfio_binding.hpp).
// Restoring a function is driven by what the tree says now, not by which steps ran: the same
// restore() undoes half a bind, finishes half a release, and does nothing to a function already back.
#include "hostagent/vfio/vfio_binding.hpp"

#include <algorithm>

namespace hostagent::vfio {
namespace {

const std::string kDrivers = "/sys/bus/pci/drivers/";
const std::string kDriversProbe = "/sys/bus/pci/drivers_probe";
const std::string kVfioPci = "vfio-pci";

std::string device_path(const numa::PciAddress& address, const std::string& attribute) {
  return kPciDevicesDir + address.to_string() + "/" + attribute;
}

std::string shown(const std::string& driver) {
  return driver.empty() ? "no driver" : driver;
}

}  // namespace

bool is_vfio_driver(const std::string& driver) {
  const auto ends_with = [&](const std::string& suffix) {
    return driver.size() >= suffix.size() && driver.compare(driver.size() - suffix.size(), suffix.size(), suffix) == 0;
  };
  return ends_with("vfio-pci") || ends_with("vfio_pci");
}

bool is_driver_name(const std::string& name) {
  if (name.empty()) return true;
  if (name.size() > 64 || name == "." || name == "..") return false;
  return std::all_of(name.begin(), name.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '-' ||
           c == '.';
  });
}

struct VfioBinder::Member {
  BoundFunction function;  // as it stands now
  bool bridge = false;
};

// One list with placement's, so placement never chooses a group the binder then refuses.
std::vector<std::string> BinderOptions::default_unbindable_drivers() {
  return numa::default_releasable_drivers();
}

VfioBinder::VfioBinder(SysfsRoot sysfs, SysfsWriter& writer, BinderOptions options)
    : sysfs_(std::move(sysfs)), writer_(writer), options_(std::move(options)) {}

Result<int> VfioBinder::group_of(const numa::PciAddress& device) const {
  if (!sysfs_.exists(kPciDevicesDir + device.to_string())) {
    return Error{ErrorCode::not_found, "PCI device " + device.to_string() + " is not on this host (" +
                                           sysfs_.host_path(kPciDevicesDir + device.to_string()).string() +
                                           " is missing)"};
  }
  HA_TRY(const auto group, sysfs_.read_link_number(device_path(device, "iommu_group")));
  if (!group) {
    return Error{ErrorCode::unsupported, "PCI device " + device.to_string() +
                                             " has no IOMMU group, so VFIO cannot take it: boot with "
                                             "intel_iommu=on or amd_iommu=on"};
  }
  return *group;
}

// A bridge is what vfio_pci_core_register_device refuses and VFIO leaves out of the group's
// viability: any header type but 0 (config byte 0x0e, multi-function bit masked). Config space
// unreadable: the class code says the same for PCI and CardBus bridges.
Result<VfioBinder::Member> VfioBinder::read_member(const numa::PciAddress& address) const {
  Member member;
  member.function.address = address;
  HA_TRY(const auto driver, sysfs_.read_link_name(device_path(address, "driver")));
  member.function.original_driver = driver.value_or("");
  member.function.was_vfio = is_vfio_driver(member.function.original_driver);
  if (sysfs_.exists(device_path(address, "driver_override"))) {
    // driver_override_show prints a cleared override as "(null)" (sysfs-bus-pci driver_override).
    HA_TRY(const auto override_name, sysfs_.read(device_path(address, "driver_override")));
    member.function.original_override = override_name == "(null)" ? "" : override_name;
  }
  const auto config = sysfs_.read_binary(device_path(address, "config"));
  if (config.ok() && config->size() > 0x0e) {
    member.bridge = (static_cast<uint8_t>((*config)[0x0e]) & 0x7f) != 0;
  } else {
    HA_TRY(const uint64_t class_code, sysfs_.read_hex(device_path(address, "class")));
    const uint64_t kind = class_code >> 8;
    member.bridge = kind == 0x0604 || kind == 0x0607 || kind == 0x0609;
  }
  return member;
}

Result<GroupBinding> VfioBinder::inspect_group(const numa::PciAddress& device) const {
  HA_TRY(const int group, group_of(device));
  HA_TRY(const auto names, sysfs_.list("/sys/kernel/iommu_groups/" + std::to_string(group) + "/devices", false));
  GroupBinding binding;
  binding.group = group;
  for (const auto& name : names) {
    HA_TRY(const auto address, numa::PciAddress::parse(name));
    HA_TRY(auto member, read_member(address));
    if (!member.bridge) binding.functions.push_back(std::move(member.function));
  }
  return binding;
}

// The host's own devices are never taken, whatever driver they are on: a boot disk on nvme is on a
// driver a VM's NVMe also comes from.
Status VfioBinder::check_not_used_by_host(const GroupBinding& binding) const {
  if (!options_.host_use) return ok_status();
  HA_TRY(const auto uses, options_.host_use());
  std::string used;
  for (const auto& f : binding.functions) {
    for (const auto& use : uses) {
      if (use.address == f.address)
        used += (used.empty() ? "" : "; ") + f.address.to_string() + " (" + use.reason + ")";
    }
  }
  if (used.empty()) return ok_status();
  return Error{ErrorCode::conflict, "IOMMU group " + std::to_string(binding.group) +
                                        " cannot go to vfio-pci: the host uses " + used +
                                        ". hostagent never takes a device the host uses"};
}

Status VfioBinder::check_not_in_use(const GroupBinding& binding) const {
  HA_TRY_STATUS(check_not_used_by_host(binding));
  std::string in_use;
  for (const auto& f : binding.functions) {
    const auto& allowed = options_.unbindable_drivers;
    if (f.was_vfio || f.original_driver.empty() ||
        std::find(allowed.begin(), allowed.end(), f.original_driver) != allowed.end()) {
      continue;
    }
    in_use += (in_use.empty() ? "" : ", ") + f.address.to_string() + " (driver " + f.original_driver + ")";
  }
  if (in_use.empty()) return ok_status();
  return Error{ErrorCode::conflict,
               "IOMMU group " + std::to_string(binding.group) + " cannot go to vfio-pci: the host is using " + in_use +
                   ". A group goes to a VM whole, so free that member first: unbind it and keep it unbound, give "
                   "it an IOMMU group of its own (ACS on the port above it), or add its driver to the drivers "
                   "hostagent may unbind if the host does not need it"};
}

Status VfioBinder::check_vfio_pci_loaded(const GroupBinding& binding) const {
  const bool needed = std::any_of(binding.functions.begin(), binding.functions.end(),
                                  [](const BoundFunction& f) { return !f.was_vfio; });
  if (!needed || sysfs_.exists(kDrivers + kVfioPci)) return ok_status();
  return Error{ErrorCode::not_found, "vfio-pci is not loaded (" + sysfs_.host_path(kDrivers + kVfioPci).string() +
                                         " is missing): run `modprobe vfio-pci`, and list vfio-pci in "
                                         "/etc/modules-load.d/ so it loads at boot"};
}

Status VfioBinder::write_override(const BoundFunction& function, const std::string& driver) {
  // A write of "\n" clears driver_override (sysfs-bus-pci).
  return writer_.write(device_path(function.address, "driver_override"), driver + "\n");
}

// driver_override first: from then on only vfio-pci may bind the function, so nothing else (udev,
// an autoprobing driver) can take it between the unbind and the probe. drivers_probe then binds it
// to vfio-pci, whose probe registers the group (sysfs-bus-pci driver_override, drivers_probe).
Status VfioBinder::move_to_vfio(const BoundFunction& function, int group) {
  const std::string address = function.address.to_string();
  if (function.original_override != kVfioPci) HA_TRY_STATUS(write_override(function, kVfioPci));
  if (!function.original_driver.empty()) {
    HA_TRY_STATUS(writer_.write(kDrivers + function.original_driver + "/unbind", address));
  }
  HA_TRY_STATUS(writer_.write(kDriversProbe, address));
  return verify_on_vfio(function, group);
}

Status VfioBinder::verify_on_vfio(const BoundFunction& function, int group) const {
  const std::string node = "/dev/vfio/" + std::to_string(group);
  HA_TRY(const auto driver, sysfs_.read_link_name(device_path(function.address, "driver")));
  const bool node_exists = sysfs_.exists(node);
  if (is_vfio_driver(driver.value_or("")) && node_exists) return ok_status();
  return Error{ErrorCode::io_error,
               function.address.to_string() +
                   " did not bind to vfio-pci: " + sysfs_.host_path(device_path(function.address, "driver")).string() +
                   " names " + shown(driver.value_or("")) + " and " + sysfs_.host_path(node).string() +
                   (node_exists ? " exists" : " is missing") +
                   ". Check that vfio-pci is loaded (`modprobe vfio-pci`) and what its probe said in dmesg"};
}

Status VfioBinder::rollback(const std::vector<BoundFunction>& moved) {
  std::string failed;
  for (auto it = moved.rbegin(); it != moved.rend(); ++it) {
    // No reset: the function never reached a VM.
    const auto restored = restore(*it, /*reset=*/false);
    if (!restored.ok())
      failed += (failed.empty() ? "" : "; ") + it->address.to_string() + ": " + restored.error().message;
  }
  if (failed.empty()) return ok_status();
  return Error{ErrorCode::io_error, failed};
}

void VfioBinder::report_failure(const BoundFunction& function, const Error& error) const {
  if (options_.on_bind_failure) options_.on_bind_failure(function.address, error.message);
}

Result<GroupBinding> VfioBinder::bind_group(const numa::PciAddress& device) {
  HA_TRY(auto binding, inspect_group(device));
  const bool endpoint = std::any_of(binding.functions.begin(), binding.functions.end(),
                                    [&](const BoundFunction& f) { return f.address == device; });
  if (!endpoint) {
    return Error{ErrorCode::invalid_argument,
                 "PCI device " + device.to_string() + " is a bridge: vfio-pci takes only endpoints (type 0 header)"};
  }
  HA_TRY_STATUS(check_not_in_use(binding));
  HA_TRY_STATUS(check_vfio_pci_loaded(binding));
  std::vector<BoundFunction> moved;
  for (const auto& function : binding.functions) {
    if (function.was_vfio) {
      const auto on_vfio = verify_on_vfio(function, binding.group);
      if (on_vfio.ok()) continue;
      report_failure(function, on_vfio.error());
      const auto undone = rollback(moved);
      return Error{
          on_vfio.error().code,
          on_vfio.error().message + (undone.ok() ? "" : "; rolling back also failed: " + undone.error().message)};
    }
    moved.push_back(function);
    const auto result = move_to_vfio(function, binding.group);
    if (result.ok()) continue;
    report_failure(function, result.error());
    const auto undone = rollback(moved);
    return Error{result.error().code, "binding IOMMU group " + std::to_string(binding.group) +
                                          " to vfio-pci: " + result.error().message +
                                          (undone.ok() ? "; the members moved went back to their drivers"
                                                       : "; rolling back also failed: " + undone.error().message)};
  }
  return binding;
}

// reset_method (Linux 5.15+) lists the methods a reset may use; before it, `reset` existed only
// for a device that had one (pci-sysfs.c reset_attr_is_visible). No method: nothing to do.
Status VfioBinder::reset_function(const BoundFunction& function) {
  const std::string methods = device_path(function.address, "reset_method");
  if (sysfs_.exists(methods)) {
    HA_TRY(const auto text, sysfs_.read(methods));
    if (text.empty()) return ok_status();
  } else if (!sysfs_.exists(device_path(function.address, "reset"))) {
    return ok_status();
  }
  const auto reset = writer_.write(device_path(function.address, "reset"), "1");
  if (reset.ok()) return ok_status();
  return Error{reset.error().code, "function reset failed, so it stays on vfio-pci rather than reach " +
                                       shown(function.original_driver) +
                                       " with the VM's state: " + reset.error().message};
}

Status VfioBinder::unbind_current(const BoundFunction& function, const std::string& driver, bool reset) {
  if (reset) HA_TRY_STATUS(reset_function(function));
  return writer_.write(kDrivers + driver + "/unbind", function.address.to_string());
}

// drivers_probe lets the driver core choose, as it did at boot; when it chooses another driver
// (a vfio-pci.ids entry, say), that one lets go and the original is bound by name.
Status VfioBinder::bind_original(const BoundFunction& function) {
  const std::string address = function.address.to_string();
  HA_TRY_STATUS(writer_.write(kDriversProbe, address));
  HA_TRY(const auto chosen, sysfs_.read_link_name(device_path(function.address, "driver")));
  if (chosen.value_or("") == function.original_driver) return ok_status();
  if (chosen && !is_driver_name(*chosen)) {
    return Error{ErrorCode::parse_error, sysfs_.host_path(device_path(function.address, "driver")).string() +
                                             " names '" + *chosen + "', which is not a driver name"};
  }
  if (chosen) HA_TRY_STATUS(writer_.write(kDrivers + *chosen + "/unbind", address));
  return writer_.write(kDrivers + function.original_driver + "/bind", address);
}

Status VfioBinder::restore(const BoundFunction& f, bool reset) {
  if (f.was_vfio) return ok_status();
  if (!is_driver_name(f.original_driver) || !is_driver_name(f.original_override)) {
    return Error{ErrorCode::invalid_argument, "the binding names driver '" + f.original_driver + "' and override '" +
                                                  f.original_override + "', which are not kernel driver names"};
  }
  HA_TRY(const auto now, read_member(f.address));
  const std::string& driver = now.function.original_driver;
  if (driver == f.original_driver && now.function.original_override == f.original_override) return ok_status();
  if (!driver.empty() && driver != f.original_driver) {
    if (driver != kVfioPci) {
      return Error{ErrorCode::conflict, "is bound to " + driver + ", neither vfio-pci nor its original " +
                                            shown(f.original_driver) + ": something else bound it; unbind it from " +
                                            driver + " and release again"};
    }
    HA_TRY_STATUS(unbind_current(f, driver, reset));
  }
  // Probing honours driver_override, so the override the original driver can bind under goes first;
  // one naming another driver is restored after the bind. An unbound original binds nothing.
  const bool override_binds =
      f.original_driver.empty() || f.original_override.empty() || f.original_override == f.original_driver;
  const std::string during_bind = override_binds ? f.original_override : "";
  if (now.function.original_override != during_bind) HA_TRY_STATUS(write_override(f, during_bind));
  if (!f.original_driver.empty() && driver != f.original_driver) HA_TRY_STATUS(bind_original(f));
  if (during_bind != f.original_override) HA_TRY_STATUS(write_override(f, f.original_override));
  HA_TRY(const auto after, read_member(f.address));
  if (after.function.original_driver == f.original_driver && after.function.original_override == f.original_override) {
    return ok_status();
  }
  return Error{ErrorCode::io_error, "is on " + shown(after.function.original_driver) + " with driver_override '" +
                                        after.function.original_override + "' after the writes, not " +
                                        shown(f.original_driver) + " with '" + f.original_override + "'"};
}

Status VfioBinder::release(const GroupBinding& binding) {
  std::vector<std::string> failed;
  ErrorCode code = ErrorCode::io_error;
  for (auto it = binding.functions.rbegin(); it != binding.functions.rend(); ++it) {
    const auto restored = restore(*it, /*reset=*/true);
    if (restored.ok()) continue;
    if (failed.empty()) code = restored.error().code;
    failed.push_back(it->address.to_string() + " (to " + shown(it->original_driver) + "): " + restored.error().message);
  }
  if (failed.empty()) return ok_status();
  std::string message = "IOMMU group " + std::to_string(binding.group) + ": " + std::to_string(failed.size()) + " of " +
                        std::to_string(binding.functions.size()) + " functions did not go back: ";
  for (std::size_t i = 0; i < failed.size(); ++i) message += (i == 0 ? "" : "; ") + failed[i];
  return Error{code, message + ". Release is idempotent: fix what is named and release again"};
}

}  // namespace hostagent::vfio
