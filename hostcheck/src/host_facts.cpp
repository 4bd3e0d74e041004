// hostcheck/host_facts: what the checks read from procfs and sysfs under a root. Only reading: a
// file the root lacks is a fact unknown (the check says so), an unreadable one an error.
#include <algorithm>
#include <cctype>
#include <charconv>
#include <sstream>

#include "hostagent/hostcheck/host_check.hpp"

namespace hostagent::hostcheck {
namespace {

Result<std::optional<std::string>> read_if_there(const SysfsRoot& root, const std::string& path) {
  if (!root.exists(path)) return std::optional<std::string>{};
  HA_TRY(auto text, root.read(path));
  return std::optional<std::string>(std::move(text));
}

bool all_digits(const std::string& text) {
  return !text.empty() && std::all_of(text.begin(), text.end(), [](char c) { return c >= '0' && c <= '9'; });
}

// CapEff from /proc/PID/status ("CapEff:\t000001ffffffffff", proc(5)); nullopt without the line.
std::optional<uint64_t> effective_capabilities(const std::string& status) {
  std::istringstream lines(status);
  for (std::string line; std::getline(lines, line);) {
    if (!line.starts_with("CapEff:")) continue;
    auto hex = line.substr(7);
    hex.erase(0, hex.find_first_not_of(" \t"));
    uint64_t value = 0;
    const auto [end, ec] = std::from_chars(hex.data(), hex.data() + hex.size(), value, 16);
    if (ec == std::errc() && end == hex.data() + hex.size()) return value;
  }
  return std::nullopt;
}

// libvirtd, or virtqemud where libvirt runs as modular daemons: the process that starts QEMU and
// sets its limits. A process that exits while it is read is not it.
std::optional<LibvirtProcess> find_libvirt(const SysfsRoot& root) {
  const auto pids = root.list("/proc", true);
  if (!pids.ok()) return std::nullopt;
  for (const auto& pid : *pids) {
    if (!all_digits(pid)) continue;
    const auto comm = root.read("/proc/" + pid + "/comm");
    if (!comm.ok() || (*comm != "libvirtd" && *comm != "virtqemud")) continue;
    const auto status = root.read("/proc/" + pid + "/status");
    if (!status.ok()) continue;
    const auto capabilities = effective_capabilities(*status);
    if (!capabilities) continue;
    return LibvirtProcess{*comm, std::stoi(pid), *capabilities};
  }
  return std::nullopt;
}

}  // namespace

Result<HostFacts> read_facts(const SysfsRoot& root) {
  HostFacts facts;
  HA_TRY(facts.cmdline, read_if_there(root, "/proc/cmdline"));
  HA_TRY(facts.kernel_release, read_if_there(root, "/proc/sys/kernel/osrelease"));
  HA_TRY(facts.iommu_units, root.list("/sys/class/iommu", true));
  HA_TRY(const auto groups, root.list("/sys/kernel/iommu_groups", true));
  for (const auto& group : groups) {
    if (!all_digits(group)) continue;
    ++facts.iommu_groups;
    // The group's default domain type (Linux 5.11+, drivers/iommu/iommu.c iommu_group_show_type):
    // "identity" under iommu=pt, "DMA" or "DMA-FQ" when the host's own DMA is translated.
    HA_TRY(const auto type, read_if_there(root, "/sys/kernel/iommu_groups/" + group + "/type"));
    ++facts.group_types[type.value_or("unknown")];
  }
  // A driver registered with the PCI core has its directory there, loaded as a module or built in.
  facts.vfio_pci = root.exists("/sys/bus/pci/drivers/vfio-pci");
  facts.libvirt = find_libvirt(root);
  return facts;
}

}  // namespace hostagent::hostcheck
