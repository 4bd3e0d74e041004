// Test helper: the fake kernel's PCI driver core (see fake_pci_drivers.hpp). Each store() below
// cites the kernel function it stands for; the errno each returns is the one that function returns.
#include "fake_pci_drivers.hpp"

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <optional>
#include <sstream>
#include <vector>

#include "hostagent/common/pci_address.hpp"

namespace fs = std::filesystem;

namespace hostagent::testing {
namespace {

const std::string kDevices = "/sys/bus/pci/devices";
const std::string kDrivers = "/sys/bus/pci/drivers";
const std::string kGroups = "/sys/kernel/iommu_groups";
const std::string kVfioPci = "vfio-pci";
constexpr uint32_t kPciAnyId = 0xffffffff;

// sysfs_streq (lib/string.c), as bus_find_device_by_name uses it: one trailing newline is ignored.
std::string device_name(std::string_view value) {
  if (!value.empty() && value.back() == '\n') value.remove_suffix(1);
  return std::string(value);
}

std::string read_file(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

std::string trimmed(std::string text) {
  while (!text.empty() && (text.back() == '\n' || text.back() == ' ')) text.pop_back();
  return text;
}

// A link written as simhost writes them: relative to the link's directory, so it resolves in the root.
std::string relative_target(const std::string& link_kernel_path, const std::string& target_kernel_path) {
  return fs::path(target_kernel_path).lexically_relative(fs::path(link_kernel_path).parent_path()).string();
}

// kstrtoul(buf, 0, &val) (lib/kstrtox.c): the whole buffer, one trailing newline allowed.
std::optional<unsigned long> parse_ulong(std::string_view value) {
  if (!value.empty() && value.back() == '\n') value.remove_suffix(1);
  const std::string text(value);
  if (text.empty() || text[0] == '-' || text[0] == ' ') return std::nullopt;
  char* end = nullptr;
  errno = 0;
  const unsigned long parsed = std::strtoul(text.c_str(), &end, 0);
  if (errno != 0 || end != text.c_str() + text.size()) return std::nullopt;
  return parsed;
}

}  // namespace

// The driver core over the fixture. Kept alive by the models registered with the kernel.
class PciDriverCore {
 public:
  PciDriverCore(FakeKernel& kernel, std::shared_ptr<FakePciDrivers> state)
      : kernel_(kernel), state_(std::move(state)) {}

  void capture_natives();

  // drivers/base/bus.c bind_store: the named device, if driver_match_device; then
  // device_driver_attach, EBUSY when a driver already has it, the probe's error when probe fails.
  Status bind(const std::string& driver, const std::string& path, std::string_view value) {
    const std::string name = device_name(value);
    const auto dir = device_dir(name);
    if (!dir || !matches(driver, name, *dir)) return kernel_.refuse(ENODEV, path, value);
    if (!bound_driver(*dir).empty()) return kernel_.refuse(EBUSY, path, value);
    if (const int err = probe(driver, *dir); err != 0) return kernel_.refuse(err, path, value);
    attach(name, *dir, driver);
    return ok_status();
  }

  // bus.c unbind_store: ENODEV unless this driver is the one bound (dev->driver == drv).
  Status unbind(const std::string& driver, const std::string& path, std::string_view value) {
    const std::string name = device_name(value);
    const auto dir = device_dir(name);
    if (!dir || bound_driver(*dir) != driver) return kernel_.refuse(ENODEV, path, value);
    detach(name, *dir, driver);
    return ok_status();
  }

  // bus.c drivers_probe_store -> bus_rescan_devices_helper: an unbound device goes through
  // device_attach; a bound one is left alone. Finding no driver, or a probe that fails, is not an
  // error of the write (really_probe's failures are positive, so the walk goes on).
  Status drivers_probe(const std::string& path, std::string_view value) {
    const std::string name = device_name(value);
    const auto dir = device_dir(name);
    if (!dir) return kernel_.refuse(ENODEV, path, value);
    if (bound_driver(*dir).empty()) attach_first_match(name, *dir);
    return ok_status();
  }

  // pci-driver.c new_id_store: "vendor device [subvendor subdevice class class_mask data]" in hex;
  // EEXIST when the driver already matches such a device; pci_add_dynid then runs driver_attach.
  Status new_id(const std::string& driver, const std::string& path, std::string_view value) {
    unsigned vendor = 0;
    unsigned device = 0;
    if (std::sscanf(std::string(value).c_str(), "%x %x", &vendor, &device) < 2) {
      return kernel_.refuse(EINVAL, path, value);
    }
    if (static_id_matches(driver, vendor, device) || !state_->dynamic_ids_[driver].insert({vendor, device}).second) {
      return kernel_.refuse(EEXIST, path, value);
    }
    for (const auto& entry : fs::directory_iterator(kernel_.host_path(kDevices))) {
      const std::string name = entry.path().filename().string();
      const auto dir = device_dir(name);
      if (dir && bound_driver(*dir).empty() && matches(driver, name, *dir) && probe(driver, *dir) == 0) {
        attach(name, *dir, driver);
      }
    }
    return ok_status();
  }

  // pci-driver.c remove_id_store: ENODEV when no such dynamic id; bound devices stay bound.
  Status remove_id(const std::string& driver, const std::string& path, std::string_view value) {
    unsigned vendor = 0;
    unsigned device = 0;
    if (std::sscanf(std::string(value).c_str(), "%x %x", &vendor, &device) < 2) {
      return kernel_.refuse(EINVAL, path, value);
    }
    if (state_->dynamic_ids_[driver].erase({vendor, device}) == 0) return kernel_.refuse(ENODEV, path, value);
    return ok_status();
  }

  // pci-sysfs.c driver_override_store -> driver_set_override (drivers/base/driver.c): the value up to
  // its first newline; empty or "\n" clears it. driver_override_show prints "%s\n" of the pointer,
  // which is "(null)" when cleared. Nothing is bound or unbound by the write itself.
  Status driver_override(const std::string& path, std::string_view value) {
    std::string text(value.substr(0, value.find('\0')));
    if (text.size() >= 4096 - 1) return kernel_.refuse(EINVAL, path, value);
    text = text.substr(0, text.find('\n'));
    kernel_.store(path, text.empty() ? "(null)\n" : text + "\n");
    return ok_status();
  }

  // pci-sysfs.c reset_store: only "1" (EINVAL otherwise); pci_reset_function tries the methods in
  // reset_method and fails ENOTTY when none is enabled.
  Status reset(const std::string& path, std::string_view value) {
    const auto parsed = parse_ulong(value);
    if (!parsed || *parsed != 1) return kernel_.refuse(EINVAL, path, value);
    const fs::path methods = kernel_.host_path(path).parent_path() / "reset_method";
    if (fs::exists(methods) && trimmed(read_file(methods)).empty()) return kernel_.refuse(ENOTTY, path, value);
    const std::string name = kernel_.host_path(path).parent_path().filename().string();
    state_->reset_log_.push_back(name);
    const auto dir = device_dir(name);
    state_->reset_drivers_.push_back(dir ? bound_driver(*dir) : "");
    return ok_status();
  }

  // A write to .../bind, .../unbind, .../new_id or .../remove_id: only the ones in a PCI driver's
  // directory (reached directly or through a device's `driver` link) are the driver core's.
  Status driver_attribute(const std::string& path, std::string_view value) {
    std::error_code ec;
    const fs::path file = fs::canonical(kernel_.host_path(path), ec);
    const fs::path drivers = fs::canonical(kernel_.host_path(kDrivers), ec);
    if (ec || file.parent_path().parent_path() != drivers) {
      kernel_.store(path, value);
      return ok_status();
    }
    const std::string driver = file.parent_path().filename().string();
    const std::string attribute = file.filename().string();
    if (attribute == "bind") return bind(driver, path, value);
    if (attribute == "unbind") return unbind(driver, path, value);
    if (attribute == "new_id") return new_id(driver, path, value);
    return remove_id(driver, path, value);
  }

 private:
  // The device's directory under /sys/devices, from its /sys/bus/pci/devices link; nullopt when
  // no device has that name (bus_find_device_by_name finding nothing).
  std::optional<std::string> device_dir(const std::string& name) const {
    const auto address = PciAddress::parse(name);
    if (!address.ok() || address->to_string() != name) return std::nullopt;
    const std::string link = kDevices + "/" + name;
    std::error_code ec;
    const fs::path target = fs::read_symlink(kernel_.host_path(link), ec);
    if (ec) return std::nullopt;
    return (fs::path(kDevices) / target).lexically_normal().string();
  }

  std::string link_name(const std::string& kernel_path) const {
    std::error_code ec;
    const fs::path target = fs::read_symlink(kernel_.host_path(kernel_path), ec);
    return ec ? "" : target.filename().string();
  }
  std::string bound_driver(const std::string& dir) const { return link_name(dir + "/driver"); }
  std::string group_of(const std::string& dir) const { return link_name(dir + "/iommu_group"); }

  std::string override_of(const std::string& dir) const {
    const std::string value = trimmed(read_file(kernel_.host_path(dir + "/driver_override")));
    return value == "(null)" ? "" : value;
  }

  uint32_t id_attribute(const std::string& dir, const char* attribute) const {
    return static_cast<uint32_t>(
        std::strtoul(read_file(kernel_.host_path(dir + "/" + attribute)).c_str(), nullptr, 16));
  }

  bool dynamic_id_matches(const std::string& driver, const std::string& dir) const {
    const auto found = state_->dynamic_ids_.find(driver);
    if (found == state_->dynamic_ids_.end()) return false;
    const uint32_t vendor = id_attribute(dir, "vendor");
    const uint32_t device = id_attribute(dir, "device");
    for (const auto& [v, d] : found->second) {
      if ((v == kPciAnyId || v == vendor) && (d == kPciAnyId || d == device)) return true;
    }
    return false;
  }

  // The driver's static id table, as far as the tree tells it: the ids of the devices it is native to.
  bool static_id_matches(const std::string& driver, uint32_t vendor, uint32_t device) const {
    for (const auto& [name, native] : state_->native_) {
      const auto dir = device_dir(name);
      if (native == driver && dir && id_attribute(*dir, "vendor") == vendor && id_attribute(*dir, "device") == device) {
        return true;
      }
    }
    return false;
  }

  // pci-driver.c pci_match_device: a driver_override names the only driver that may match, and
  // matches that driver even without an id ("driver_override will always match"); otherwise the
  // dynamic ids, then the static table (here: the device's native driver).
  bool matches(const std::string& driver, const std::string& name, const std::string& dir) const {
    const std::string override_name = override_of(dir);
    if (!override_name.empty()) return override_name == driver;
    return dynamic_id_matches(driver, dir) || state_->native_driver(name) == driver;
  }

  // vfio_pci_core_register_device refuses anything but a normal (type 0) header, and a device
  // without an IOMMU group (vfio_device_set_group), with EINVAL. Other drivers' probes succeed.
  int probe(const std::string& driver, const std::string& dir) const {
    if (driver != kVfioPci) return 0;
    const std::string config = read_file(kernel_.host_path(dir + "/config"));
    if (config.size() <= 0x0e || (static_cast<uint8_t>(config[0x0e]) & 0x7f) != 0) return EINVAL;
    return group_of(dir).empty() ? EINVAL : 0;
  }

  bool driver_loaded(const std::string& driver) const {
    return fs::is_directory(kernel_.host_path(kDrivers + "/" + driver));
  }

  // dd.c __device_attach: the drivers in registration order, the first whose match and probe
  // succeed binds. A driver_override admits only its driver (matches() refuses the others).
  void attach_first_match(const std::string& name, const std::string& dir) {
    std::vector<std::string> candidates = state_->load_order_;
    const std::string override_name = override_of(dir);
    if (!override_name.empty()) candidates.push_back(override_name);
    if (!state_->native_driver(name).empty()) candidates.push_back(state_->native_driver(name));
    for (const auto& [driver, ids] : state_->dynamic_ids_) candidates.push_back(driver);
    for (const auto& driver : candidates) {
      if (driver_loaded(driver) && matches(driver, name, dir) && probe(driver, dir) == 0) {
        attach(name, dir, driver);
        return;
      }
    }
  }

  // dev_uevent (drivers/base/core.c) prints DRIVER= first while a driver is bound.
  void set_uevent_driver(const std::string& dir, const std::string& driver) const {
    const fs::path file = kernel_.host_path(dir + "/uevent");
    if (!fs::exists(file)) return;
    std::istringstream in(read_file(file));
    std::string out = driver.empty() ? "" : "DRIVER=" + driver + "\n";
    for (std::string line; std::getline(in, line);) {
      if (line.rfind("DRIVER=", 0) != 0) out += line + "\n";
    }
    kernel_.store(dir + "/uevent", out);
  }

  // A host driver enables the device in probe and disables it in remove (pci_enable_device,
  // pci_disable_device: `enable` shows enable_cnt). vfio-pci enables only while a user has the
  // device open (vfio_pci_core_enable), which no fixture models.
  void set_enabled(const std::string& dir, bool enabled) const {
    if (fs::exists(kernel_.host_path(dir + "/enable"))) kernel_.store(dir + "/enable", enabled ? "1\n" : "0\n");
  }

  // really_probe -> driver_sysfs_add: the device's `driver` link and the driver's link to the
  // device. vfio-pci's probe adds the device to its group, creating /dev/vfio/N with the group.
  void attach(const std::string& name, const std::string& dir, const std::string& driver) {
    const std::string driver_dir = kDrivers + "/" + driver;
    fs::create_symlink(relative_target(dir + "/driver", driver_dir), kernel_.host_path(dir + "/driver"));
    fs::create_symlink(relative_target(driver_dir + "/" + name, dir), kernel_.host_path(driver_dir + "/" + name));
    set_uevent_driver(dir, driver);
    if (driver != kVfioPci) {
      set_enabled(dir, true);
      return;
    }
    const fs::path node = kernel_.host_path("/dev/vfio/" + group_of(dir));
    fs::create_directories(node.parent_path());
    std::ofstream created(node);
  }

  // __device_release_driver -> driver_sysfs_remove; vfio_pci_remove unregisters the device, and the
  // group's node goes with the group's last device (vfio_device_remove_group). devtmpfs removes a
  // directory it emptied (delete_path).
  void detach(const std::string& name, const std::string& dir, const std::string& driver) {
    fs::remove(kernel_.host_path(dir + "/driver"));
    fs::remove(kernel_.host_path(kDrivers + "/" + driver + "/" + name));
    set_uevent_driver(dir, "");
    if (driver != kVfioPci) {
      set_enabled(dir, false);
      return;
    }
    const std::string group = group_of(dir);
    for (const auto& member : fs::directory_iterator(kernel_.host_path(kGroups + "/" + group + "/devices"))) {
      const auto member_dir = device_dir(member.path().filename().string());
      if (member_dir && bound_driver(*member_dir) == kVfioPci) return;
    }
    const fs::path node = kernel_.host_path("/dev/vfio/" + group);
    fs::remove(node);
    std::error_code ec;
    if (fs::is_empty(node.parent_path(), ec)) fs::remove(node.parent_path(), ec);
  }

  FakeKernel& kernel_;
  std::shared_ptr<FakePciDrivers> state_;
};

void PciDriverCore::capture_natives() {
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(kernel_.host_path(kDevices), ec)) {
    const std::string name = entry.path().filename().string();
    const auto dir = device_dir(name);
    if (!dir) continue;
    const std::string driver = bound_driver(*dir);
    // A device on vfio-pci at boot got there through vfio-pci.ids, which are dynamic ids
    // (vfio_pci_fill_ids -> pci_add_dynid); its own driver is not known from the tree.
    if (driver == kVfioPci) {
      state_->dynamic_ids_[kVfioPci].insert({id_attribute(*dir, "vendor"), id_attribute(*dir, "device")});
    } else if (!driver.empty()) {
      state_->native_[name] = driver;
    }
  }
}

std::string FakePciDrivers::native_driver(const std::string& bdf) const {
  const auto found = native_.find(bdf);
  return found == native_.end() ? "" : found->second;
}

void FakePciDrivers::set_native_driver(const std::string& bdf, std::string driver) {
  native_[bdf] = std::move(driver);
}

int FakePciDrivers::resets(const std::string& bdf) const {
  int count = 0;
  for (const auto& name : reset_log_) count += name == bdf ? 1 : 0;
  return count;
}

std::vector<std::string> FakePciDrivers::drivers_at_resets(const std::string& bdf) const {
  std::vector<std::string> drivers;
  for (std::size_t i = 0; i < reset_log_.size(); ++i) {
    if (reset_log_[i] == bdf) drivers.push_back(reset_drivers_[i]);
  }
  return drivers;
}

std::shared_ptr<FakePciDrivers> install_pci_driver_model(FakeKernel& kernel) {
  auto state = std::make_shared<FakePciDrivers>();
  auto core = std::make_shared<PciDriverCore>(kernel, state);
  core->capture_natives();
  const std::string device = R"(/sys/(bus/pci/devices|devices/.+)/[0-9a-f]{4,8}:[0-9a-f]{2}:[0-9a-f]{2}\.[0-7]/)";
  kernel.model("/sys/bus/pci/drivers_probe", [core](FakeKernel&, const std::string& path, std::string_view value) {
    return core->drivers_probe(path, value);
  });
  kernel.model(device + "driver_override", [core](FakeKernel&, const std::string& path, std::string_view value) {
    return core->driver_override(path, value);
  });
  kernel.model(device + "reset", [core](FakeKernel&, const std::string& path, std::string_view value) {
    return core->reset(path, value);
  });
  kernel.model("/sys/.+/(bind|unbind|new_id|remove_id)",
               [core](FakeKernel&, const std::string& path, std::string_view value) {
                 return core->driver_attribute(path, value);
               });
  return state;
}

}  // namespace hostagent::testing
