// Test helper: the fake kernel's SR-IOV model (see fake_sriov.hpp).
#include "fake_sriov.hpp"

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <optional>
#include <set>
#include <sstream>

#include "hostagent/common/pci_address.hpp"

namespace fs = std::filesystem;

namespace hostagent::testing {
namespace {

const std::string kPciDriversDir = "/sys/bus/pci/drivers/";
const std::string kIommuGroupsDir = "/sys/kernel/iommu_groups/";

std::string read_attr(const FakeKernel& k, const std::string& kernel_path) {
  std::ifstream in(k.host_path(kernel_path));
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  while (!text.empty() && text.back() == '\n') text.pop_back();
  return text;
}

int read_int(const FakeKernel& k, const std::string& kernel_path) {
  return std::atoi(read_attr(k, kernel_path).c_str());
}

// The kernel path of what a host path resolves to (a /sys/bus/pci/devices link -> /sys/devices/...).
std::string resolved_kernel_path(const FakeKernel& k, const std::string& kernel_path) {
  const fs::path real = fs::canonical(k.host_path(kernel_path));
  return "/" + fs::relative(real, fs::canonical(k.root())).string();
}

void make_link(const FakeKernel& k, const std::string& kernel_path, const std::string& target) {
  const fs::path from = fs::path(kernel_path).parent_path();
  fs::create_directories(k.host_path(from.string()));
  fs::create_symlink(fs::path(target).lexically_relative(from), k.host_path(kernel_path));
}

std::optional<std::string> link_name(const FakeKernel& k, const std::string& kernel_path) {
  std::error_code ec;
  const auto target = fs::read_symlink(k.host_path(kernel_path), ec);
  if (ec) return std::nullopt;
  return target.filename().string();
}

// kstrtou16(buf, 0, ...): decimal, 0x hex or 0 octal, one trailing newline allowed.
std::optional<int> parse_u16(std::string_view value) {
  std::string text(value);
  if (!text.empty() && text.back() == '\n') text.pop_back();
  if (text.empty() || text.front() == '-' || text.front() == '+' || text.front() == ' ') return std::nullopt;
  char* end = nullptr;
  errno = 0;
  const unsigned long n = std::strtoul(text.c_str(), &end, 0);
  if (errno != 0 || *end != '\0' || n > 0xffff) return std::nullopt;
  return static_cast<int>(n);
}

PciAddress vf_address(const PciAddress& pf, int offset, int stride, int n) {
  const int rid = (pf.bus << 8 | pf.device << 3 | pf.function) + offset + n * stride;
  return PciAddress{pf.domain, static_cast<uint8_t>((rid >> 8) & 0xff), static_cast<uint8_t>((rid >> 3) & 0x1f),
                    static_cast<uint8_t>(rid & 0x7)};
}

// iommu_group_alloc takes the lowest free id (ida_alloc).
int lowest_free_group(const FakeKernel& k) {
  std::set<int> taken;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(k.host_path(kIommuGroupsDir), ec)) {
    taken.insert(std::atoi(entry.path().filename().c_str()));
  }
  int id = 0;
  while (taken.count(id) != 0) ++id;
  return id;
}

class SriovModel {
 public:
  explicit SriovModel(SriovModelOptions options) : options_(std::move(options)) {}

  // The VF driver of each PF that has VFs now, for PFs the options leave out.
  void remember_fixture_drivers(const FakeKernel& k) {
    std::error_code ec;
    for (const auto& entry : fs::directory_iterator(k.host_path(kPciDevicesDir), ec)) {
      const std::string pf = entry.path().filename().string();
      if (options_.vf_drivers.count(pf) != 0) continue;
      const auto vf = link_name(k, kPciDevicesDir + pf + "/virtfn0");
      if (!vf) continue;
      if (const auto driver = link_name(k, kPciDevicesDir + *vf + "/driver")) options_.vf_drivers[pf] = *driver;
    }
  }

  Status store(FakeKernel& k, const std::string& kernel_path, std::string_view value) {
    const std::string dir = resolved_kernel_path(k, fs::path(kernel_path).parent_path().string());
    const auto wanted = parse_u16(value);
    if (!wanted) return k.refuse(EINVAL, kernel_path, value);
    if (*wanted > read_int(k, dir + "/sriov_totalvfs")) return k.refuse(ERANGE, kernel_path, value);
    const int current = read_int(k, dir + "/sriov_numvfs");
    if (*wanted == current) return ok_status();
    if (!link_name(k, dir + "/driver")) return k.refuse(ENOENT, kernel_path, value);
    if (*wanted == 0) {
      disable(k, dir, current);
      return ok_status();
    }
    if (current != 0) return k.refuse(EBUSY, kernel_path, value);
    enable(k, dir, *wanted);
    return ok_status();
  }

 private:
  void enable(FakeKernel& k, const std::string& pf_dir, int wanted) {
    const std::string pf_name = fs::path(pf_dir).filename().string();
    const PciAddress pf = PciAddress::parse(pf_name).value();
    const auto limit = options_.vf_limit.find(pf_name);
    const int count = limit == options_.vf_limit.end() ? wanted : std::min(wanted, limit->second);
    const int offset = read_int(k, pf_dir + "/sriov_offset");
    const int stride = read_int(k, pf_dir + "/sriov_stride");
    for (int n = 0; n < count; ++n) add_vf(k, pf_dir, vf_address(pf, offset, stride, n), n);
    k.store(pf_dir + "/sriov_numvfs", std::to_string(count) + "\n");
  }

  void add_vf(FakeKernel& k, const std::string& pf_dir, const PciAddress& address, int n) {
    const std::string name = address.to_string();
    // A VF sits on the PF's bus (or a virtual one) under the same bridge: a sibling directory.
    const std::string dir = fs::path(pf_dir).parent_path().string() + "/" + name;
    write_identity(k, pf_dir, dir);
    make_link(k, dir + "/physfn", pf_dir);
    make_link(k, dir + "/subsystem", "/sys/bus/pci");
    make_link(k, kPciDevicesDir + name, dir);
    make_link(k, pf_dir + "/virtfn" + std::to_string(n), dir);
    const std::string group = kIommuGroupsDir + std::to_string(lowest_free_group(k));
    k.store(group + "/type", "DMA-FQ\n");
    k.store(group + "/reserved_regions", "0x00000000fee00000 0x00000000feefffff msi\n");
    make_link(k, group + "/devices/" + name, dir);
    make_link(k, dir + "/iommu_group", group);
    probe(k, pf_dir, dir, name);
  }

  // pci-sysfs.c attributes of a VF: the PF's identity with the VF device ID (pci_read_vf_config_common
  // copies vendor, class, revision and subsystem IDs from the PF), its NUMA node and CPUs.
  void write_identity(FakeKernel& k, const std::string& pf_dir, const std::string& dir) {
    fs::create_directories(k.host_path(dir));
    for (const char* attr : {"vendor", "subsystem_vendor", "subsystem_device", "class", "revision", "numa_node",
                             "local_cpus", "local_cpulist"}) {
      k.store(dir + "/" + attr, read_attr(k, pf_dir + "/" + attr) + "\n");
    }
    char device[16];
    std::snprintf(device, sizeof(device), "0x%04lx\n",
                  std::strtoul(read_attr(k, pf_dir + "/sriov_vf_device").c_str(), nullptr, 16));
    k.store(dir + "/device", device);
    k.store(dir + "/enable", "0\n");
    k.store(dir + "/irq", "0\n");
    k.store(dir + "/driver_override", "(null)\n");
    k.store(dir + "/broken_parity_status", "0\n");
    k.store(dir + "/msi_bus", "1\n");
    k.store(dir + "/d3cold_allowed", "1\n");
    k.store(dir + "/reset_method", "flr\n");
    for (const char* trigger : {"remove", "rescan", "reset"}) k.store(dir + "/" + trigger, "");
  }

  void probe(FakeKernel& k, const std::string& pf_dir, const std::string& dir, const std::string& name) {
    if (read_attr(k, pf_dir + "/sriov_drivers_autoprobe") != "1") return;
    const auto driver = options_.vf_drivers.find(fs::path(pf_dir).filename().string());
    if (driver == options_.vf_drivers.end()) return;
    const std::string driver_dir = kPciDriversDir + driver->second;
    if (!fs::is_directory(k.host_path(driver_dir))) return;
    make_link(k, dir + "/driver", driver_dir);
    make_link(k, driver_dir + "/" + name, dir);
    k.store(dir + "/enable", "1\n");
  }

  void disable(FakeKernel& k, const std::string& pf_dir, int current) {
    // sriov_disable removes the last VF first (pci_iov_remove_virtfn).
    for (int n = current - 1; n >= 0; --n) {
      const std::string link = pf_dir + "/virtfn" + std::to_string(n);
      if (!fs::is_symlink(k.host_path(link))) continue;
      remove_vf(k, resolved_kernel_path(k, link));
      fs::remove(k.host_path(link));
    }
    k.store(pf_dir + "/sriov_numvfs", "0\n");
  }

  void remove_vf(FakeKernel& k, const std::string& dir) {
    const std::string name = fs::path(dir).filename().string();
    // Unbinding: the driver's link goes, and with the driver's remove() the netdevs and RDMA
    // devices it registered, whose class links point into the VF.
    if (const auto driver = link_name(k, dir + "/driver"))
      fs::remove(k.host_path(kPciDriversDir + *driver + "/" + name));
    for (const char* cls : {"/sys/class/net", "/sys/class/infiniband"}) remove_links_into(k, cls, dir);
    if (const auto group = link_name(k, dir + "/iommu_group")) {
      const std::string group_dir = kIommuGroupsDir + *group;
      fs::remove(k.host_path(group_dir + "/devices/" + name));
      // The group goes with its last device (iommu_group_release).
      if (fs::is_empty(k.host_path(group_dir + "/devices"))) fs::remove_all(k.host_path(group_dir));
    }
    fs::remove(k.host_path(kPciDevicesDir + name));
    fs::remove_all(k.host_path(dir));
  }

  static void remove_links_into(FakeKernel& k, const std::string& cls, const std::string& dir) {
    std::error_code ec;
    const fs::path real_dir = fs::canonical(k.host_path(dir));
    for (const auto& entry : fs::directory_iterator(k.host_path(cls), ec)) {
      const fs::path target = fs::weakly_canonical(entry.path());
      const auto rel = target.lexically_relative(real_dir);
      if (!rel.empty() && *rel.begin() != "..") fs::remove(entry.path());
    }
  }

  SriovModelOptions options_;
};

}  // namespace

void install_sriov_model(FakeKernel& kernel, SriovModelOptions options) {
  auto model = std::make_shared<SriovModel>(std::move(options));
  model->remember_fixture_drivers(kernel);
  kernel.model(".*/sriov_numvfs", [model](FakeKernel& k, const std::string& path, std::string_view value) {
    return model->store(k, path, value);
  });
}

}  // namespace hostagent::testing
