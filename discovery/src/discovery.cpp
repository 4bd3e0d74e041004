#include "hostagent/discovery/discovery.hpp"

#include <algorithm>
#include <charconv>
#include <map>
#include <set>
#include <sstream>

#include "config_space_reader.hpp"
#include "hostagent/common/sysfs_root.hpp"
#include "hostagent/common/text.hpp"
#include "hostagent/discovery/host_use_reader.hpp"
#include "hostagent/discovery/hugepage_reader.hpp"
#include "hwloc_reader.hpp"
#include "model_builder.hpp"

namespace hostagent::discovery {
namespace {

// The functions hwloc found, as model values, with hwloc's locality kept beside them.
void adopt_hwloc_pci(const detail::HwlocHost& hwloc, numa::HostModel& model) {
  for (const auto& pci : hwloc.pci) {
    numa::PciFunction f;
    f.address = pci.address;
    f.vendor_id = pci.vendor_id;
    f.device_id = pci.device_id;
    f.subsystem_vendor_id = pci.subsystem_vendor_id;
    f.subsystem_device_id = pci.subsystem_device_id;
    f.class_code = static_cast<uint32_t>(pci.class_id) << 8;
    f.parent = pci.parent;
    f.locality_numa_nodes = pci.locality_nodes;
    model.pci_devices.push_back(std::move(f));
  }
}

Result<std::optional<PciAddress>> read_address_link(const SysfsRoot& sysfs, const std::string& path) {
  HA_TRY(const auto name, sysfs.read_link_name(path));
  if (!name) return std::optional<PciAddress>{};
  HA_TRY(const auto address, PciAddress::parse(*name));
  return std::optional<PciAddress>{address};
}

// resource: one "start end flags" line per BAR, then the ROM (drivers/pci/pci-sysfs.c resource_show).
Result<std::vector<numa::Bar>> read_bars(const SysfsRoot& sysfs, const std::string& dir) {
  std::vector<numa::Bar> bars;
  if (!sysfs.exists(dir + "/resource")) return bars;
  HA_TRY(const auto text, sysfs.read(dir + "/resource"));
  std::istringstream lines(text);
  std::string line;
  for (int index = 0; index <= 6 && std::getline(lines, line); ++index) {
    unsigned long long start = 0, end = 0, flags = 0;
    if (std::sscanf(line.c_str(), "%llx %llx %llx", &start, &end, &flags) != 3) {
      return Error{ErrorCode::parse_error, "parse " + sysfs.host_path(dir + "/resource").string() + ": line " +
                                               text::quoted(line) + ", expected \"start end flags\""};
    }
    if (end == 0 || end < start) continue;
    // include/linux/ioport.h: IORESOURCE_PREFETCH 0x2000, IORESOURCE_MEM_64 0x00100000.
    bars.push_back(numa::Bar{index, end - start + 1, (flags & 0x00100000) != 0, (flags & 0x2000) != 0});
  }
  return bars;
}

Result<std::optional<numa::Sriov>> read_sriov(const SysfsRoot& sysfs, const std::string& dir) {
  HA_TRY(const auto total, sysfs.read_optional_int(dir + "/sriov_totalvfs"));
  if (!total) return std::optional<numa::Sriov>{};
  numa::Sriov sriov;
  sriov.total_vfs = static_cast<int>(*total);
  HA_TRY(const auto num, sysfs.read_int(dir + "/sriov_numvfs"));
  sriov.num_vfs = static_cast<int>(num);
  for (int n = 0; n < sriov.total_vfs; ++n) {
    HA_TRY(const auto vf, read_address_link(sysfs, dir + "/virtfn" + std::to_string(n)));
    if (vf) sriov.vfs.push_back(*vf);
  }
  return std::optional<numa::Sriov>{std::move(sriov)};
}

// hwloc already read the ids; sysfs adds the programming interface of the class. Snapshots taken
// by hwloc-gather-topology may lack some of these files: then hwloc's values stand.
Status read_identity(const SysfsRoot& sysfs, const std::string& dir, numa::PciFunction& f) {
  const auto read_field = [&](const char* name, auto apply) -> Status {
    if (!sysfs.exists(dir + "/" + name)) return ok_status();
    HA_TRY(const auto value, sysfs.read_hex(dir + "/" + name));
    apply(value);
    return ok_status();
  };
  HA_TRY_STATUS(read_field("vendor", [&](uint64_t v) { f.vendor_id = static_cast<uint16_t>(v); }));
  HA_TRY_STATUS(read_field("device", [&](uint64_t v) { f.device_id = static_cast<uint16_t>(v); }));
  HA_TRY_STATUS(read_field("class", [&](uint64_t v) { f.class_code = static_cast<uint32_t>(v); }));
  HA_TRY_STATUS(read_field("subsystem_vendor", [&](uint64_t v) { f.subsystem_vendor_id = static_cast<uint16_t>(v); }));
  HA_TRY_STATUS(read_field("subsystem_device", [&](uint64_t v) { f.subsystem_device_id = static_cast<uint16_t>(v); }));
  return ok_status();
}

Status read_sysfs_attributes(const SysfsRoot& sysfs, numa::PciFunction& f) {
  const std::string dir = kPciDevicesDir + f.address.to_string();
  HA_TRY_STATUS(read_identity(sysfs, dir, f));
  HA_TRY(const auto numa, sysfs.read_optional_int(dir + "/numa_node"));
  if (numa) f.numa_node_reported = static_cast<int>(*numa);
  HA_TRY(f.iommu_group, sysfs.read_link_number(dir + "/iommu_group"));
  HA_TRY(const auto driver, sysfs.read_link_name(dir + "/driver"));
  f.driver = driver.value_or("");
  HA_TRY(f.bars, read_bars(sysfs, dir));
  HA_TRY(f.sriov, read_sriov(sysfs, dir));
  HA_TRY(f.physfn, read_address_link(sysfs, dir + "/physfn"));
  HA_TRY(f.net_interfaces, sysfs.list(dir + "/net", true));
  HA_TRY(f.rdma_devices, sysfs.list(dir + "/infiniband", true));
  return ok_status();
}

void apply_config_space(const detail::ConfigSpaceInfo& info, uintmax_t config_size, numa::PciFunction& f) {
  // Unprivileged snapshots hold only the first 64 bytes: no capability list to trust there.
  f.config_space_known = info.readable && config_size >= 256;
  f.port_type = info.port_type;
  f.link = info.link;
  f.max_read_request_bytes = info.max_read_request_bytes;
  f.acs = info.acs;
  f.ats = info.ats;
}

Result<uintmax_t> config_size(const SysfsRoot& sysfs, const PciAddress& address) {
  std::error_code ec;
  const auto size = std::filesystem::file_size(sysfs.host_path(kPciDevicesDir + address.to_string() + "/config"), ec);
  return ec ? uintmax_t{0} : size;
}

// Functions that sysfs lists but hwloc left out (it drops some host-bridge functions) still count.
Status add_missing_functions(const SysfsRoot& sysfs, numa::HostModel& model) {
  HA_TRY(const auto names, sysfs.list(kPciDevicesDir, true));
  std::set<PciAddress> known;
  for (const auto& f : model.pci_devices) known.insert(f.address);
  for (const auto& name : names) {
    HA_TRY(const auto address, PciAddress::parse(name));
    if (known.count(address) != 0) continue;
    numa::PciFunction f;
    f.address = address;
    // The kernel nests a function's directory under its upstream bridge's (drivers/pci/probe.c).
    std::error_code ec;
    const auto real = std::filesystem::canonical(sysfs.host_path(kPciDevicesDir + name), ec);
    if (ec) return errno_error(ec.value(), "resolve", sysfs.host_path(kPciDevicesDir + name).string());
    if (auto parent = PciAddress::parse(real.parent_path().filename().string()); parent.ok()) {
      f.parent = *parent;
    }
    model.pci_devices.push_back(std::move(f));
  }
  return ok_status();
}

// The kernel's cpulist is the truth about which CPUs a node has; hwloc's cpuset is its locality.
Status read_node_cpus(const SysfsRoot& sysfs, numa::NumaNode& node, std::vector<numa::Cpu>& cpus) {
  const std::string path = "/sys/devices/system/node/node" + std::to_string(node.id) + "/cpulist";
  if (!sysfs.exists(path)) return ok_status();
  HA_TRY(const auto text, sysfs.read(path));
  HA_TRY(const auto listed, parse_cpu_list(text));
  // On POWER the node mask spans possible CPUs too; keep those that exist.
  node.cpus.clear();
  for (const int id : listed) {
    if (std::any_of(cpus.begin(), cpus.end(), [&](const numa::Cpu& c) { return c.id == id; })) node.cpus.push_back(id);
  }
  node.cpuless = node.cpus.empty();
  for (auto& cpu : cpus) {
    if (std::binary_search(node.cpus.begin(), node.cpus.end(), cpu.id)) cpu.numa_node = node.id;
  }
  return ok_status();
}

Status read_node_memory(const SysfsRoot& sysfs, numa::NumaNode& node) {
  const std::string dir = "/sys/devices/system/node/node" + std::to_string(node.id);
  if (sysfs.exists(dir + "/meminfo")) {
    HA_TRY(const auto meminfo, sysfs.read(dir + "/meminfo"));
    std::istringstream lines(meminfo);
    std::string line;
    while (std::getline(lines, line)) {
      int id = 0;
      unsigned long long kb = 0;
      char key[64] = {};
      if (std::sscanf(line.c_str(), "Node %d %63[^:]: %llu kB", &id, key, &kb) != 3) continue;
      if (std::string(key) == "MemTotal") node.memory_bytes = kb * 1024;
      if (std::string(key) == "MemFree") node.memory_free_bytes = kb * 1024;
    }
  }
  for (auto& pool : node.hugepages) {
    const auto path = hugepage_pool_dir(node.id, pool.page_size_bytes);
    HA_TRY(const auto total, sysfs.read_optional_int(path + "/nr_hugepages"));
    HA_TRY(const auto free, sysfs.read_optional_int(path + "/free_hugepages"));
    if (total) pool.total = static_cast<uint64_t>(*total);
    if (free) pool.free = static_cast<uint64_t>(*free);
  }
  return ok_status();
}

// hwloc lists online CPUs only. The kernel's present list adds the offline ones, whose core and
// package ids it still exports (Documentation/ABI/stable/sysfs-devices-system-cpu).
Status add_offline_cpus(const SysfsRoot& sysfs, std::vector<numa::Cpu>& cpus) {
  const std::string base = "/sys/devices/system/cpu/";
  if (!sysfs.exists(base + "present")) return ok_status();
  HA_TRY(const auto text, sysfs.read(base + "present"));
  HA_TRY(const auto present, parse_cpu_list(text));
  for (const int id : present) {
    if (std::any_of(cpus.begin(), cpus.end(), [&](const numa::Cpu& c) { return c.id == id; })) continue;
    const std::string topology = base + "cpu" + std::to_string(id) + "/topology/";
    HA_TRY(const auto core, sysfs.read_optional_int(topology + "core_id"));
    HA_TRY(const auto package, sysfs.read_optional_int(topology + "physical_package_id"));
    numa::Cpu cpu;
    cpu.id = id;
    cpu.core = static_cast<int>(core.value_or(id));
    cpu.package = static_cast<int>(package.value_or(0));
    cpu.siblings = {id};
    cpu.online = false;
    cpus.push_back(std::move(cpu));
  }
  std::sort(cpus.begin(), cpus.end(), [](const numa::Cpu& a, const numa::Cpu& b) { return a.id < b.id; });
  return ok_status();
}

void sort_functions(numa::HostModel& model) {
  std::sort(model.pci_devices.begin(), model.pci_devices.end(),
            [](const numa::PciFunction& a, const numa::PciFunction& b) { return a.address < b.address; });
}

}  // namespace

Result<numa::HostModel> discover_from_sysfs(const std::filesystem::path& root) {
  HA_TRY(const auto sysfs, SysfsRoot::open(root));
  if (!sysfs.exists("/sys/devices/system/cpu")) {
    return Error{ErrorCode::not_found, sysfs.host_path("/sys/devices/system/cpu").string() +
                                           " does not exist: " + root.string() + " is not a sysfs root"};
  }
  HA_TRY(const auto hwloc, detail::read_hwloc_fsroot(root));
  numa::HostModel model;
  model.source = "sysfs:" + root.string();
  model.numa_nodes = hwloc.numa_nodes;
  model.cpus = hwloc.cpus;
  HA_TRY_STATUS(add_offline_cpus(sysfs, model.cpus));
  for (auto& node : model.numa_nodes) {
    HA_TRY_STATUS(read_node_cpus(sysfs, node, model.cpus));
    HA_TRY_STATUS(read_node_memory(sysfs, node));
  }
  adopt_hwloc_pci(hwloc, model);
  HA_TRY_STATUS(add_missing_functions(sysfs, model));
  sort_functions(model);
  HA_TRY(const auto config, detail::ConfigSpaceReader::open(sysfs.host_path("/sys/bus/pci")));
  for (auto& f : model.pci_devices) {
    HA_TRY_STATUS(read_sysfs_attributes(sysfs, f));
    HA_TRY(const auto size, config_size(sysfs, f.address));
    apply_config_space(config.read(f.address), size, f);
  }
  detail::finish_model(model);
  // Every function the host uses is one the model has: the trace ends at a function sysfs lists.
  HA_TRY(const auto uses, detect_host_use(root));
  mark_host_use(model, uses);
  return model;
}

Result<numa::HostModel> discover_from_hwloc_xml(const std::filesystem::path& xml_file) {
  HA_TRY(const auto hwloc, detail::read_hwloc_xml(xml_file));
  numa::HostModel model;
  model.source = "hwloc-xml:" + xml_file.string();
  model.numa_nodes = hwloc.numa_nodes;
  model.cpus = hwloc.cpus;
  adopt_hwloc_pci(hwloc, model);
  detail::finish_model(model);
  return model;
}

int treat_as_gpus(numa::HostModel& model, const std::vector<std::pair<uint16_t, uint16_t>>& vendor_device_ids) {
  int changed = 0;
  for (auto& f : model.pci_devices) {
    if (f.is_bridge() || f.role == numa::PciRole::gpu) continue;
    const std::pair<uint16_t, uint16_t> id{f.vendor_id, f.device_id};
    if (std::find(vendor_device_ids.begin(), vendor_device_ids.end(), id) == vendor_device_ids.end()) continue;
    f.role = numa::PciRole::gpu;
    ++changed;
  }
  return changed;
}

}  // namespace hostagent::discovery
