#include "hostagent/api/host_json.hpp"

#include <boost/json.hpp>
#include <cstdio>

#include "hostagent/numa/affinity.hpp"

namespace hostagent::api {
namespace json = boost::json;
namespace {

using numa::PciAddress;

std::string hex(uint32_t value, int digits) {
  char buf[16];
  std::snprintf(buf, sizeof buf, "0x%0*x", digits, value);
  return buf;
}

template <typename T>
json::value optional_value(const std::optional<T>& value) {
  return value ? json::value(*value) : json::value(nullptr);
}

json::value optional_address(const std::optional<PciAddress>& address) {
  return address ? json::value(address->to_string()) : json::value(nullptr);
}

json::array addresses(const std::vector<PciAddress>& list) {
  json::array out;
  for (const auto& a : list) out.emplace_back(a.to_string());
  return out;
}

template <typename T>
json::array numbers(const std::vector<T>& list) {
  return json::array(list.begin(), list.end());
}

json::array strings(const std::vector<std::string>& list) {
  json::array out;
  for (const auto& s : list) out.emplace_back(s);
  return out;
}

const char* port_type_name(numa::PciePortType type) {
  using numa::PciePortType;
  switch (type) {
    case PciePortType::endpoint:
      return "endpoint";
    case PciePortType::legacy_endpoint:
      return "legacy-endpoint";
    case PciePortType::root_port:
      return "root-port";
    case PciePortType::upstream:
      return "upstream";
    case PciePortType::downstream:
      return "downstream";
    case PciePortType::pcie_to_pci:
      return "pcie-to-pci";
    case PciePortType::pci_to_pcie:
      return "pci-to-pcie";
    case PciePortType::rc_integrated:
      return "rc-integrated";
    case PciePortType::rc_event_collector:
      return "rc-event-collector";
    case PciePortType::unknown:
      return "unknown";
  }
  return "unknown";
}

json::object numa_node_json(const numa::NumaNode& node) {
  json::array hugepages;
  for (const auto& pool : node.hugepages) {
    hugepages.emplace_back(json::object{
        {"page_size_bytes", pool.page_size_bytes}, {"total", pool.total}, {"free", optional_value(pool.free)}});
  }
  json::object distances;
  for (const auto& [id, distance] : node.distances) distances[std::to_string(id)] = distance;
  return json::object{{"id", node.id},
                      {"cpus", numbers(node.cpus)},
                      {"cpuless", node.cpuless},
                      {"memory_bytes", optional_value(node.memory_bytes)},
                      {"memory_free_bytes", optional_value(node.memory_free_bytes)},
                      {"hugepages", std::move(hugepages)},
                      {"distances", std::move(distances)}};
}

json::object cpu_json(const numa::Cpu& cpu) {
  return json::object{{"id", cpu.id},
                      {"core", cpu.core},
                      {"package", cpu.package},
                      {"numa_node", optional_value(cpu.numa_node)},
                      {"siblings", numbers(cpu.siblings)},
                      {"online", cpu.online}};
}

json::value link_json(const numa::PcieLink& link) {
  return json::object{{"max_speed_gts", optional_value(link.max_speed_gts)},
                      {"max_width", optional_value(link.max_width)},
                      {"speed_gts", optional_value(link.speed_gts)},
                      {"width", optional_value(link.width)}};
}

json::array bars_json(const std::vector<numa::Bar>& bars) {
  json::array out;
  for (const auto& bar : bars) {
    out.emplace_back(json::object{{"index", bar.index},
                                  {"size_bytes", bar.size_bytes},
                                  {"is_64bit", bar.is_64bit},
                                  {"prefetchable", bar.prefetchable}});
  }
  return out;
}

json::value sriov_json(const std::optional<numa::Sriov>& sriov) {
  if (!sriov) return nullptr;
  return json::object{{"total_vfs", sriov->total_vfs}, {"num_vfs", sriov->num_vfs}, {"vfs", addresses(sriov->vfs)}};
}

json::value acs_json(const std::optional<numa::AcsState>& acs) {
  if (!acs) return nullptr;
  return json::object{{"capability", hex(acs->capability, 4)}, {"control", hex(acs->control, 4)}};
}

json::value ats_json(const std::optional<numa::AtsState>& ats) {
  if (!ats) return nullptr;
  return json::object{{"enabled", ats->enabled}, {"smallest_translation_unit", ats->smallest_translation_unit}};
}

json::object pci_json(const numa::PciFunction& f) {
  json::value port_type = nullptr;
  if (f.port_type) port_type = port_type_name(*f.port_type);
  return json::object{
      {"address", f.address.to_string()},
      {"vendor_id", hex(f.vendor_id, 4)},
      {"device_id", hex(f.device_id, 4)},
      {"subsystem_vendor_id", f.subsystem_vendor_id ? json::value(hex(*f.subsystem_vendor_id, 4)) : nullptr},
      {"subsystem_device_id", f.subsystem_device_id ? json::value(hex(*f.subsystem_device_id, 4)) : nullptr},
      {"class", hex(f.class_code, 6)},
      {"role", numa::to_string(f.role)},
      {"port_type", std::move(port_type)},
      {"numa_node", optional_value(f.numa_node)},
      {"numa_node_reported", optional_value(f.numa_node_reported)},
      {"locality_numa_nodes", numbers(f.locality_numa_nodes)},
      {"iommu_group", optional_value(f.iommu_group)},
      {"driver", optional_value(f.driver)},
      {"switch", optional_address(f.pcie_switch)},
      {"parent", optional_address(f.parent)},
      {"bridge_chain", addresses(f.bridge_chain)},
      {"link", link_json(f.link)},
      {"bars", bars_json(f.bars)},
      {"sriov", sriov_json(f.sriov)},
      {"physfn", optional_address(f.physfn)},
      {"net_interfaces", strings(f.net_interfaces)},
      {"rdma_devices", strings(f.rdma_devices)},
      {"config_space_known", f.config_space_known},
      {"acs", acs_json(f.acs)},
      {"ats", ats_json(f.ats)},
      {"host_use", f.host_use ? json::value(*f.host_use) : nullptr}};
}

json::object switch_json(const numa::PcieSwitch& sw) {
  return json::object{{"upstream", sw.upstream.to_string()},
                      {"downstream", addresses(sw.downstream)},
                      {"numa_node", optional_value(sw.numa_node)},
                      {"devices", addresses(sw.devices)}};
}

void pretty(const json::value& value, std::string& out, int indent);

void pretty_array(const json::array& array, std::string& out, int indent) {
  const bool scalars =
      std::all_of(array.begin(), array.end(), [](const json::value& v) { return !v.is_object() && !v.is_array(); });
  if (array.empty() || scalars) {  // short lists of ids stay on one line
    out += '[';
    for (size_t i = 0; i < array.size(); ++i) {
      if (i > 0) out += ", ";
      out += json::serialize(array[i]);
    }
    out += ']';
    return;
  }
  out += "[\n";
  for (size_t i = 0; i < array.size(); ++i) {
    out.append(indent + 2, ' ');
    pretty(array[i], out, indent + 2);
    out += i + 1 < array.size() ? ",\n" : "\n";
  }
  out.append(indent, ' ');
  out += ']';
}

void pretty(const json::value& value, std::string& out, int indent) {
  if (value.is_array()) return pretty_array(value.as_array(), out, indent);
  if (!value.is_object() || value.as_object().empty()) {
    out += json::serialize(value);
    return;
  }
  const auto& object = value.as_object();
  out += "{\n";
  size_t i = 0;
  for (const auto& [key, member] : object) {
    out.append(indent + 2, ' ');
    out += json::serialize(json::value(key)) + ": ";
    pretty(member, out, indent + 2);
    out += ++i < object.size() ? ",\n" : "\n";
  }
  out.append(indent, ' ');
  out += '}';
}

// For each GPU and NIC PF, the code of its path to every other (numa/affinity), keyed by address.
json::object affinity_json(const numa::HostModel& model) {
  const auto subjects = numa::affinity_subjects(model);
  json::object out;
  for (const auto* a : subjects) {
    json::object row;
    for (const auto* b : subjects) row[b->address.to_string()] = numa::affinity_label(numa::affinity(model, *a, *b));
    out[a->address.to_string()] = std::move(row);
  }
  return out;
}

}  // namespace

json::value to_json(const numa::HostModel& model) {
  json::array nodes, cpus, devices, switches, groups;
  for (const auto& node : model.numa_nodes) nodes.emplace_back(numa_node_json(node));
  for (const auto& cpu : model.cpus) cpus.emplace_back(cpu_json(cpu));
  for (const auto& f : model.pci_devices) devices.emplace_back(pci_json(f));
  for (const auto& sw : model.switches) switches.emplace_back(switch_json(sw));
  for (const auto& g : model.iommu_groups) {
    groups.emplace_back(json::object{{"id", g.id}, {"members", addresses(g.members)}});
  }
  return json::object{{"format_version", kTopologyFormatVersion}, {"source", model.source},
                      {"numa_nodes", std::move(nodes)},           {"cpus", std::move(cpus)},
                      {"pci_devices", std::move(devices)},        {"switches", std::move(switches)},
                      {"iommu_groups", std::move(groups)},        {"affinity", affinity_json(model)}};
}

std::string to_pretty_json(const json::value& value) {
  std::string out;
  pretty(value, out, 0);
  out += '\n';
  return out;
}

}  // namespace hostagent::api
