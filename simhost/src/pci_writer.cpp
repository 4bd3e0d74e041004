// simhost/pci_writer: the PCI part of sysfs. Each function's directory nests under its bridge as in
// /sys/devices/pci0000:00/0000:00:01.0/0000:01:00.0, with the attributes drivers/pci/pci-sysfs.c
// and iov.c create; /sys/bus/pci/{devices,drivers,slots} and /sys/kernel/iommu_groups link to it.
// The vfio nodes under /dev come with the drivers, as the vfio modules create them.
#include <cstdio>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "kernel_format.hpp"
#include "writers.hpp"

namespace hostagent::simhost::detail {
namespace {

const std::string kDevices = "/sys/bus/pci/devices";
const std::string kDrivers = "/sys/bus/pci/drivers";
const std::string kGroups = "/sys/kernel/iommu_groups";

// include/linux/ioport.h resource flags, plus the BAR's own low type bits as the kernel keeps them.
constexpr uint64_t kResMem = 0x200;
constexpr uint64_t kResPrefetch = 0x2000;
constexpr uint64_t kResSizeAlign = 0x40000;
constexpr uint64_t kResMem64 = 0x100000;

uint64_t bar_resource_flags(const PlacedBar& bar) {
  uint64_t flags = kResMem | kResSizeAlign;
  if (bar.is_64bit) flags |= kResMem64 | 0x4;
  if (bar.prefetchable) flags |= kResPrefetch | 0x8;
  return flags;
}

std::string resource_line(uint64_t start, uint64_t end, uint64_t flags) {
  char line[80];
  std::snprintf(line, sizeof(line), "0x%016llx 0x%016llx 0x%016llx\n", static_cast<unsigned long long>(start),
                static_cast<unsigned long long>(end), static_cast<unsigned long long>(flags));
  return line;
}

std::string window_line(const std::optional<Window>& window, uint64_t flags) {
  return window ? resource_line(window->base, window->limit, flags) : resource_line(0, 0, 0);
}

// pci-sysfs.c resource_show: 6 BARs, the ROM, 6 SR-IOV BARs (CONFIG_PCI_IOV), and on a bridge its
// 4 windows (I/O, memory, prefetchable memory, unused).
std::string resource_attr(const PlannedFunction& f) {
  std::vector<std::string> lines(13, resource_line(0, 0, 0));
  for (const auto& bar : f.placement.bars) {
    lines[static_cast<std::size_t>(bar.index)] =
        resource_line(bar.address, bar.address + bar.size - 1, bar_resource_flags(bar));
  }
  const uint64_t total_vfs = static_cast<uint64_t>(f.spec->sriov_total_vfs);
  for (const auto& bar : f.placement.vf_bars) {
    lines[7 + static_cast<std::size_t>(bar.index)] =
        resource_line(bar.address, bar.address + bar.size * total_vfs - 1, bar_resource_flags(bar));
  }
  if (f.is_bridge()) {
    lines.push_back(resource_line(0, 0, 0));
    lines.push_back(window_line(f.placement.memory_window, kResMem));
    // PCI_PREF_RANGE_TYPE_64 (0x1) | IORESOURCE_MEM | IORESOURCE_PREFETCH | IORESOURCE_MEM_64.
    lines.push_back(window_line(f.placement.prefetchable_window, 0x1 | kResMem | kResPrefetch | kResMem64));
    lines.push_back(resource_line(0, 0, 0));
  }
  std::string out;
  for (const auto& line : lines) out += line;
  return out;
}

std::string modalias(const SimFunction& fn) {
  char buf[96];
  std::snprintf(buf, sizeof(buf), "pci:v%08Xd%08Xsv%08Xsd%08Xbc%02Xsc%02Xi%02X", fn.vendor, fn.device,
                fn.subsystem_vendor, fn.subsystem_device, (fn.class_code >> 16) & 0xff, (fn.class_code >> 8) & 0xff,
                fn.class_code & 0xff);
  return buf;
}

std::string uevent(const SimFunction& fn) {
  char buf[256];
  std::snprintf(buf, sizeof(buf),
                "PCI_CLASS=%X\nPCI_ID=%04X:%04X\nPCI_SUBSYS_ID=%04X:%04X\nPCI_SLOT_NAME=%s\n"
                "MODALIAS=%s\n",
                fn.class_code, fn.vendor, fn.device, fn.subsystem_vendor, fn.subsystem_device, fn.address.c_str(),
                modalias(fn).c_str());
  return (fn.driver.empty() ? "" : "DRIVER=" + fn.driver + "\n") + buf;
}

// local_cpus is cpumask_of_node(numa_node), every CPU when the node is unknown (pci-sysfs.c).
std::vector<int> local_cpus(const HostSpec& spec, const CpuLayout& cpus, int numa_node) {
  for (std::size_t i = 0; i < spec.nodes.size(); ++i) {
    if (spec.nodes[i].id == numa_node) return cpus.node_cpus[i];
  }
  return cpus.all_cpus();
}

void write_identity(TreeWriter& w, const PlannedFunction& f) {
  const auto& fn = *f.spec;
  w.file(f.dir + "/vendor", hex_attr(fn.vendor, 4));
  w.file(f.dir + "/device", hex_attr(fn.device, 4));
  w.file(f.dir + "/subsystem_vendor", hex_attr(fn.subsystem_vendor, 4));
  w.file(f.dir + "/subsystem_device", hex_attr(fn.subsystem_device, 4));
  w.file(f.dir + "/class", hex_attr(fn.class_code, 6));
  w.file(f.dir + "/revision", hex_attr(fn.revision, 2));
  w.file(f.dir + "/modalias", modalias(fn) + "\n");
  w.file(f.dir + "/uevent", uevent(fn));
  w.binary(f.dir + "/config", build_config_space(fn, f.placement));
}

void write_resources(TreeWriter& w, const PlannedFunction& f) {
  w.file(f.dir + "/resource", resource_attr(f));
  for (const auto& bar : f.placement.bars) {
    const std::string name = f.dir + "/resource" + std::to_string(bar.index);
    w.file(name, "");
    if (bar.prefetchable) w.file(name + "_wc", "");
  }
}

void write_state(TreeWriter& w, const PlannedFunction& f, int irq) {
  const auto& fn = *f.spec;
  w.file(f.dir + "/enable", fn.driver.empty() ? "0\n" : "1\n");
  w.file(f.dir + "/irq", decimal_attr(irq));
  w.file(f.dir + "/driver_override", "(null)\n");
  w.file(f.dir + "/broken_parity_status", "0\n");
  w.file(f.dir + "/msi_bus", "1\n");
  w.file(f.dir + "/d3cold_allowed", "1\n");
  // Write-only triggers on a real host; plain files here, so a test can see what was written.
  w.file(f.dir + "/remove", "");
  w.file(f.dir + "/rescan", "");
  if (!f.is_bridge()) {
    w.file(f.dir + "/reset", "");
    w.file(f.dir + "/reset_method", f.placement.is_vf ? "flr\n" : "flr bus\n");
  }
  w.link(f.dir + "/subsystem", "/sys/bus/pci");
}

// pci-sysfs.c current_link_{speed,width} read Link Status, max_link_* read Link Capabilities.
void write_link(TreeWriter& w, const PlannedFunction& f) {
  const auto& fn = *f.spec;
  w.file(f.dir + "/max_link_speed", link_speed_attr(fn.link_cap_gen));
  w.file(f.dir + "/max_link_width", decimal_attr(fn.link_cap_width));
  w.file(f.dir + "/current_link_speed", link_speed_attr(fn.link_sta_gen));
  w.file(f.dir + "/current_link_width", decimal_attr(fn.link_sta_width));
}

// drivers/pci/pcie/aer.c (Linux 6.1) names the error status bits it counts; unnamed bits print only
// when non-zero, so a fresh device lists exactly these.
constexpr const char* kAerCorrectable[] = {"RxErr",   "BadTLP",      "BadDLLP",    "Rollover",
                                           "Timeout", "NonFatalErr", "CorrIntErr", "HeaderOF"};
constexpr const char* kAerUncorrectable[] = {"Undefined",     "DLP",
                                             "SDES",          "TLP",
                                             "FCP",           "CmpltTO",
                                             "CmpltAbrt",     "UnxCmplt",
                                             "RxOF",          "MalfTLP",
                                             "ECRC",          "UnsupReq",
                                             "ACSViol",       "UncorrIntErr",
                                             "BlockedTLP",    "AtomicOpBlocked",
                                             "TLPBlockedErr", "PoisonTLPBlocked"};

// aer_stats_dev_attr: one "NAME COUNT" line per named bit, then "TOTAL_<kind> COUNT". A booted host
// that has seen no errors reads all zeros.
template <std::size_t N>
std::string aer_counters_attr(const char* const (&names)[N], const char* total) {
  std::string out;
  for (const char* name : names) out += std::string(name) + " 0\n";
  return out + "TOTAL_" + total + " 0\n";
}

// The kernel shows aer_dev_* only on a device with the AER extended capability (pci_aer_init
// allocates aer_stats). Simulated here for the physical GPUs, NICs and NVMe drives, which have it on
// real hardware; not for VFs (AER is optional on a VF) nor other functions.
bool has_aer(const PlannedFunction& f) {
  const uint32_t base = f.spec->class_code >> 16;
  const bool kind = base == 0x03 || base == 0x02 || (f.spec->class_code >> 8) == 0x0108;
  return kind && !f.placement.is_vf && f.spec->port_type == SimPortType::endpoint;
}

void write_aer(TreeWriter& w, const PlannedFunction& f) {
  if (!has_aer(f)) return;
  w.file(f.dir + "/aer_dev_correctable", aer_counters_attr(kAerCorrectable, "ERR_COR"));
  w.file(f.dir + "/aer_dev_fatal", aer_counters_attr(kAerUncorrectable, "ERR_FATAL"));
  w.file(f.dir + "/aer_dev_nonfatal", aer_counters_attr(kAerUncorrectable, "ERR_NONFATAL"));
}

void write_locality(TreeWriter& w, const HostSpec& spec, const CpuLayout& cpus, const PlannedFunction& f) {
  const auto local = local_cpus(spec, cpus, f.spec->numa_node);
  w.file(f.dir + "/numa_node", decimal_attr(f.spec->numa_node));
  w.file(f.dir + "/local_cpus", cpumask(local, static_cast<int>(cpus.cpus.size())));
  w.file(f.dir + "/local_cpulist", cpulist_attr(local));
}

void write_bridge(TreeWriter& w, const PlannedFunction& f) {
  if (!f.is_bridge()) return;
  w.file(f.dir + "/secondary_bus_number", decimal_attr(f.placement.secondary_bus));
  w.file(f.dir + "/subordinate_bus_number", decimal_attr(f.placement.subordinate_bus));
}

// drivers/pci/iov.c: the PF's sriov_* attributes and virtfnN links; each VF's physfn link.
void write_sriov(TreeWriter& w, const PciPlan& plan, const PlannedFunction& f) {
  const auto& fn = *f.spec;
  if (f.physfn >= 0) {
    w.link(f.dir + "/physfn", plan.functions[static_cast<std::size_t>(f.physfn)].dir);
  }
  if (fn.sriov_total_vfs <= 0) return;
  w.file(f.dir + "/sriov_totalvfs", decimal_attr(fn.sriov_total_vfs));
  w.file(f.dir + "/sriov_numvfs", decimal_attr(fn.sriov_num_vfs));
  w.file(f.dir + "/sriov_offset", decimal_attr(fn.sriov_vf_offset));
  w.file(f.dir + "/sriov_stride", decimal_attr(fn.sriov_vf_stride));
  char device[16];
  std::snprintf(device, sizeof(device), "%x\n", fn.sriov_vf_device);
  w.file(f.dir + "/sriov_vf_device", device);
  w.file(f.dir + "/sriov_drivers_autoprobe", "1\n");
  for (std::size_t n = 0; n < f.virtfns.size(); ++n) {
    w.link(f.dir + "/virtfn" + std::to_string(n), plan.functions[static_cast<std::size_t>(f.virtfns[n])].dir);
  }
}

void write_bindings(TreeWriter& w, const PlannedFunction& f) {
  const std::string& address = f.spec->address;
  w.link(kDevices + "/" + address, f.dir);
  const std::string group = kGroups + "/" + std::to_string(f.iommu_group);
  w.link(f.dir + "/iommu_group", group);
  w.link(group + "/devices/" + address, f.dir);
  if (!f.spec->driver.empty()) {
    const std::string driver = kDrivers + "/" + f.spec->driver;
    w.link(f.dir + "/driver", driver);
    w.link(driver + "/" + address, f.dir);
  }
}

void write_function(TreeWriter& w, const HostSpec& spec, const PciPlan& plan, const CpuLayout& cpus,
                    std::size_t index) {
  const auto& f = plan.functions[index];
  write_identity(w, f);
  write_resources(w, f);
  // VFs have no INTx and report irq 0; others get a distinct legacy-looking number.
  write_state(w, f, f.placement.is_vf ? 0 : 24 + static_cast<int>(index % 200));
  write_link(w, f);
  write_aer(w, f);
  write_locality(w, spec, cpus, f);
  write_bridge(w, f);
  write_sriov(w, plan, f);
  write_bindings(w, f);
}

// A GPU host loads vfio-pci at boot (the module's directory is there whether or not a device is
// bound to it), and loading it brings the vfio core's container node, /dev/vfio/vfio
// (drivers/vfio/container.c, a misc device). Each group with a member bound to vfio-pci has its
// /dev/vfio/N (drivers/vfio/group.c, vfio_create_group).
void write_drivers(TreeWriter& w, const PciPlan& plan) {
  std::set<std::string> drivers{"vfio-pci"};
  for (const auto& f : plan.functions) {
    if (!f.spec->driver.empty()) drivers.insert(f.spec->driver);
    if (f.spec->driver == "vfio-pci") w.file("/dev/vfio/" + std::to_string(f.iommu_group), "");
  }
  for (const auto& name : drivers) {
    for (const char* attr : {"bind", "unbind", "new_id", "remove_id", "uevent"}) {
      w.file(kDrivers + "/" + name + "/" + attr, "");
    }
  }
  w.file("/dev/vfio/vfio", "");
}

void write_groups(TreeWriter& w, const PciPlan& plan) {
  std::set<int> groups;
  for (const auto& f : plan.functions) groups.insert(f.iommu_group);
  for (const int group : groups) {
    const std::string dir = kGroups + "/" + std::to_string(group);
    // The group's default domain type (iommu_group_show_type): identity, the host booted with
    // iommu=pt (system_writer's /proc/cmdline); "DMA-FQ" where the host's own DMA is translated.
    w.file(dir + "/type", "identity\n");
    w.file(dir + "/reserved_regions", "0x00000000fee00000 0x00000000feefffff msi\n");
  }
}

// A slot's address names the bus beneath its port, without a function (pci/slot.c
// address_read_file).
void write_slots(TreeWriter& w, const PciPlan& plan) {
  for (const auto& f : plan.functions) {
    if (f.placement.physical_slot == 0) continue;
    char address[16];
    std::snprintf(address, sizeof(address), "%04x:%02x:00\n", f.addr.domain, f.placement.secondary_bus);
    w.file("/sys/bus/pci/slots/" + std::to_string(f.placement.physical_slot) + "/address", address);
  }
}

}  // namespace

void write_pci(TreeWriter& w, const HostSpec& spec, const PciPlan& plan, const CpuLayout& cpus) {
  w.dir(kDevices);
  w.file("/sys/bus/pci/drivers_autoprobe", "1\n");
  // drivers/base/bus.c: write-only; a device name written here is probed again (drivers_probe_store).
  w.file("/sys/bus/pci/drivers_probe", "");
  w.file("/sys/bus/pci/rescan", "");
  for (const auto& dir : plan.host_bridge_dirs) w.dir(dir);
  for (std::size_t i = 0; i < plan.functions.size(); ++i) write_function(w, spec, plan, cpus, i);
  write_drivers(w, plan);
  write_groups(w, plan);
  write_slots(w, plan);
}

}  // namespace hostagent::simhost::detail
