#include "topology_report.hpp"

#include <algorithm>
#include <cstdio>
#include <set>
#include <sstream>

#include "hostagent/common/sysfs_root.hpp"
#include "hostagent/numa/affinity.hpp"

namespace hostagent::ctl {
namespace {

using numa::affinity;
using numa::affinity_label;
using numa::HostModel;
using numa::PciFunction;
using numa::PciRole;

std::string bytes_human(uint64_t bytes) {
  static const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  double value = static_cast<double>(bytes);
  int unit = 0;
  while (value >= 1024 && unit < 4) {
    value /= 1024;
    ++unit;
  }
  char buf[32];
  std::snprintf(buf, sizeof buf, unit == 0 ? "%.0f %s" : "%.1f %s", value, units[unit]);
  return buf;
}

std::string page_size_label(uint64_t bytes) {
  if (bytes >= (1ULL << 30)) return std::to_string(bytes >> 30) + "G";
  if (bytes >= (1ULL << 20)) return std::to_string(bytes >> 20) + "M";
  return std::to_string(bytes >> 10) + "K";
}

std::string count(size_t n, const std::string& noun) {
  return std::to_string(n) + " " + noun + (n == 1 ? "" : (noun.back() == 'h' ? "es" : "s"));
}

std::string optional_int(const std::optional<int>& value) {
  return value ? std::to_string(*value) : "?";
}

void render_nodes(const HostModel& model, std::ostream& out) {
  for (const auto& node : model.numa_nodes) {
    out << "NUMA node " << node.id << ": ";
    if (node.cpuless) {
      out << "no CPUs";
    } else {
      out << "CPUs " << format_cpu_list(node.cpus) << " (" << node.cpus.size() << ")";
    }
    out << ", memory " << (node.memory_bytes ? bytes_human(*node.memory_bytes) : "?");
    if (node.memory_free_bytes) out << " (" << bytes_human(*node.memory_free_bytes) << " free)";
    out << "\n";
    if (!node.hugepages.empty()) {
      out << "  hugepages:";
      for (const auto& pool : node.hugepages) {
        out << " " << page_size_label(pool.page_size_bytes) << " " << (pool.free ? std::to_string(*pool.free) : "?")
            << "/" << pool.total << " free";
      }
      out << "\n";
    }
    if (!node.distances.empty()) {
      out << "  distances:";
      for (const auto& [id, d] : node.distances) out << " " << id << ":" << d;
      out << "\n";
    }
  }
}

std::string link_label(const numa::PcieLink& link) {
  if (!link.speed_gts || !link.width) return "link ?";
  char buf[64];
  std::snprintf(buf, sizeof buf, "%g GT/s x%d", *link.speed_gts, *link.width);
  std::string label = buf;
  const bool degraded = (link.max_speed_gts && *link.max_speed_gts > *link.speed_gts) ||
                        (link.max_width && *link.max_width > *link.width);
  if (degraded) {
    std::snprintf(buf, sizeof buf, " (DEGRADED: capable of %g GT/s x%d)", link.max_speed_gts.value_or(0),
                  link.max_width.value_or(0));
    label += buf;
  }
  return label;
}

void render_device_line(const PciFunction& f, std::ostream& out) {
  char ids[16];
  std::snprintf(ids, sizeof ids, "%04x:%04x", f.vendor_id, f.device_id);
  out << "    " << numa::to_string(f.role)
      << std::string(8 - std::min<size_t>(7, std::string(numa::to_string(f.role)).size()), ' ') << f.address.to_string()
      << "  " << ids << "  driver " << (f.driver ? (f.driver->empty() ? "-" : *f.driver) : "?") << "  iommu "
      << optional_int(f.iommu_group) << "  " << link_label(f.link);
  if (f.sriov) out << "  VFs " << f.sriov->num_vfs << "/" << f.sriov->total_vfs;
  if (!f.net_interfaces.empty()) out << "  net " << f.net_interfaces.front();
  if (f.host_use) out << "  HOST: " << *f.host_use;
  out << "\n";
}

bool interesting(const PciFunction& f) {
  return f.role == PciRole::gpu || f.role == PciRole::nvswitch || f.role == PciRole::nic || f.role == PciRole::nvme;
}

void render_switches(const HostModel& model, std::ostream& out) {
  for (const auto& sw : model.switches) {
    out << "PCIe switch " << sw.upstream.to_string() << " (NUMA node " << optional_int(sw.numa_node) << ", "
        << sw.downstream.size() << " downstream ports)\n";
    for (const auto& address : sw.devices) {
      const auto* f = model.find(address);
      // A nested switch lists its own devices; show each device under its nearest switch only.
      if (f != nullptr && interesting(*f) && f->pcie_switch == sw.upstream && !f->physfn) render_device_line(*f, out);
    }
  }
  bool header = false;
  for (const auto& f : model.pci_devices) {
    if (!interesting(f) || f.pcie_switch || f.physfn) continue;
    if (!header) out << "Not behind a PCIe switch:\n";
    header = true;
    render_device_line(f, out);
  }
}

void render_matrix(const HostModel& model, std::ostream& out) {
  const auto devices = numa::affinity_subjects(model);
  std::vector<std::string> labels;
  labels.reserve(devices.size());
  int gpus = 0, nics = 0;
  for (const auto* f : devices) {
    labels.push_back(f->role == PciRole::gpu ? "GPU" + std::to_string(gpus++) : "NIC" + std::to_string(nics++));
  }
  if (devices.empty()) return;
  out << "\nGPU/NIC affinity:\n        ";
  for (const auto& label : labels) out << std::string(7 - std::min<size_t>(6, label.size()), ' ') << label;
  out << "   NUMA\n";
  for (size_t i = 0; i < devices.size(); ++i) {
    out << labels[i] << std::string(8 - std::min<size_t>(7, labels[i].size()), ' ');
    for (const auto* other : devices) {
      const std::string cell = affinity_label(affinity(model, *devices[i], *other));
      out << std::string(7 - cell.size(), ' ') << cell;
    }
    out << "   " << optional_int(devices[i]->numa_node) << "\n";
  }
  out << "\nLegend:\n";
  for (const auto code : numa::kAffinityCodes) {
    const std::string label = affinity_label(code);
    out << "  " << label << std::string(5 - label.size(), ' ') << "= " << numa::affinity_meaning(code) << "\n";
  }
  for (size_t i = 0; i < devices.size(); ++i) {
    out << "  " << labels[i] << " = " << devices[i]->address.to_string();
    if (!devices[i]->rdma_devices.empty()) out << " (" << devices[i]->rdma_devices.front() << ")";
    out << "\n";
  }
}

}  // namespace

std::string render_topology_report(const HostModel& model) {
  std::ostringstream out;
  size_t online = std::count_if(model.cpus.begin(), model.cpus.end(), [](const auto& c) { return c.online; });
  out << "Host " << model.source << ": " << count(model.numa_nodes.size(), "NUMA node") << ", "
      << count(model.cpus.size(), "CPU") << " (" << online << " online), "
      << count(model.pci_devices.size(), "PCI function") << ", " << count(model.switches.size(), "PCIe switch") << ", "
      << (model.iommu_groups.empty() ? std::string("IOMMU groups unknown")
                                     : count(model.iommu_groups.size(), "IOMMU group"))
      << "\n\n";
  render_nodes(model, out);
  out << "\n";
  render_switches(model, out);
  render_matrix(model, out);
  return out.str();
}

}  // namespace hostagent::ctl
