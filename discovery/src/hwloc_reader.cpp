#include "hwloc_reader.hpp"

#include <hwloc.h>

#include <algorithm>
#include <cstdlib>
#include <memory>
#include <mutex>
#include <optional>
#include <pugixml.hpp>
#include <sstream>
#include <string>

namespace hostagent::discovery::detail {
namespace {

struct TopologyDeleter {
  void operator()(hwloc_topology* topology) const { hwloc_topology_destroy(topology); }
};
using TopologyPtr = std::unique_ptr<hwloc_topology, TopologyDeleter>;

struct BitmapDeleter {
  void operator()(hwloc_bitmap_s* bitmap) const { hwloc_bitmap_free(bitmap); }
};

std::vector<int> bitmap_ids(hwloc_const_bitmap_t bitmap) {
  std::vector<int> ids;
  if (bitmap == nullptr) return ids;
  for (int id = hwloc_bitmap_first(bitmap); id != -1; id = hwloc_bitmap_next(bitmap, id)) {
    ids.push_back(id);
  }
  return ids;
}

Result<TopologyPtr> init_topology() {
  hwloc_topology_t raw = nullptr;
  if (hwloc_topology_init(&raw) != 0) return Error{ErrorCode::internal, "hwloc_topology_init failed"};
  TopologyPtr topology(raw);
  // Keep every bridge and PCI function: the bridge chain above a device is the point of the model.
  hwloc_topology_set_io_types_filter(raw, HWLOC_TYPE_FILTER_KEEP_ALL);
  // Offline CPUs and disallowed nodes still exist on the host; placement decides what to use.
  hwloc_topology_set_flags(raw, HWLOC_TOPOLOGY_FLAG_INCLUDE_DISALLOWED);
  return topology;
}

// hwloc gives a NUMA node the cpuset of the object it hangs from, so memory-only nodes (GPU memory
// on POWER9 and Grace, MCDRAM, CXL) share the cpuset of their package. hwloc marks those with a
// subtype ("GPUMemory", "MCDRAM", ...); the kernel gives them no CPUs, and neither do we.
bool memory_only(hwloc_obj_t node) {
  return node->subtype != nullptr && node->subtype[0] != '\0';
}

std::vector<int> cpu_node_ids(hwloc_topology_t topology, int pu) {
  std::vector<int> nodes;
  hwloc_obj_t node = nullptr;
  while ((node = hwloc_get_next_obj_by_type(topology, HWLOC_OBJ_NUMANODE, node)) != nullptr) {
    if (!memory_only(node) && hwloc_bitmap_isset(node->cpuset, static_cast<unsigned>(pu))) {
      nodes.push_back(static_cast<int>(node->os_index));
    }
  }
  return nodes;
}

void read_distances(hwloc_topology_t topology, std::vector<numa::NumaNode>& nodes) {
  unsigned count = 1;
  hwloc_distances_s* distances = nullptr;
  if (hwloc_distances_get_by_type(topology, HWLOC_OBJ_NUMANODE, &count, &distances, HWLOC_DISTANCES_KIND_MEANS_LATENCY,
                                  0) != 0 ||
      count == 0) {
    return;
  }
  for (unsigned i = 0; i < distances->nbobjs; ++i) {
    const int from = static_cast<int>(distances->objs[i]->os_index);
    auto node = std::find_if(nodes.begin(), nodes.end(), [&](const numa::NumaNode& n) { return n.id == from; });
    if (node == nodes.end()) continue;
    for (unsigned j = 0; j < distances->nbobjs; ++j) {
      node->distances[static_cast<int>(distances->objs[j]->os_index)] =
          static_cast<int>(distances->values[i * distances->nbobjs + j]);
    }
  }
  hwloc_distances_release(topology, distances);
}

std::vector<numa::NumaNode> read_numa_nodes(hwloc_topology_t topology) {
  std::vector<numa::NumaNode> nodes;
  hwloc_obj_t obj = nullptr;
  while ((obj = hwloc_get_next_obj_by_type(topology, HWLOC_OBJ_NUMANODE, obj)) != nullptr) {
    numa::NumaNode node;
    node.id = static_cast<int>(obj->os_index);
    if (!memory_only(obj)) node.cpus = bitmap_ids(obj->cpuset);
    node.cpuless = node.cpus.empty();
    node.memory_bytes = obj->attr->numanode.local_memory;
    // page_types is sorted by size and starts with the base page; the rest are hugepage pools.
    for (unsigned i = 1; i < obj->attr->numanode.page_types_len; ++i) {
      const auto& type = obj->attr->numanode.page_types[i];
      if (type.size == 0) continue;
      node.hugepages.push_back(numa::HugepagePool{type.size, type.count, std::nullopt});
    }
    nodes.push_back(std::move(node));
  }
  std::sort(nodes.begin(), nodes.end(), [](const auto& a, const auto& b) { return a.id < b.id; });
  read_distances(topology, nodes);
  return nodes;
}

std::vector<numa::Cpu> read_cpus(hwloc_topology_t topology) {
  std::vector<numa::Cpu> cpus;
  hwloc_obj_t pu = nullptr;
  while ((pu = hwloc_get_next_obj_by_type(topology, HWLOC_OBJ_PU, pu)) != nullptr) {
    numa::Cpu cpu;
    cpu.id = static_cast<int>(pu->os_index);
    const hwloc_obj_t core = hwloc_get_ancestor_obj_by_type(topology, HWLOC_OBJ_CORE, pu);
    const hwloc_obj_t package = hwloc_get_ancestor_obj_by_type(topology, HWLOC_OBJ_PACKAGE, pu);
    cpu.core = core != nullptr ? static_cast<int>(core->os_index) : cpu.id;
    cpu.package = package != nullptr ? static_cast<int>(package->os_index) : 0;
    cpu.siblings = core != nullptr ? bitmap_ids(core->cpuset) : std::vector<int>{cpu.id};
    const auto nodes = cpu_node_ids(topology, cpu.id);
    if (nodes.size() == 1) cpu.numa_node = nodes.front();
    cpus.push_back(std::move(cpu));
  }
  std::sort(cpus.begin(), cpus.end(), [](const auto& a, const auto& b) { return a.id < b.id; });
  return cpus;
}

PciAddress address_of(const hwloc_obj_attr_u::hwloc_pcidev_attr_s& pci) {
  return PciAddress{pci.domain, pci.bus, pci.dev, pci.func};
}

const hwloc_obj_attr_u::hwloc_pcidev_attr_s* pci_attr(hwloc_obj_t obj) {
  if (obj->type == HWLOC_OBJ_PCI_DEVICE) return &obj->attr->pcidev;
  if (obj->type == HWLOC_OBJ_BRIDGE && obj->attr->bridge.upstream_type == HWLOC_OBJ_BRIDGE_PCI) {
    return &obj->attr->bridge.upstream.pci;
  }
  return nullptr;  // a host bridge: not a PCI function of its own
}

void collect_pci(hwloc_topology_t topology, hwloc_obj_t obj, std::vector<HwlocPci>& out) {
  for (hwloc_obj_t child = obj->io_first_child; child != nullptr; child = child->next_sibling) {
    collect_pci(topology, child, out);
  }
  const auto* attr = pci_attr(obj);
  if (attr == nullptr) return;
  HwlocPci pci;
  pci.address = address_of(*attr);
  pci.vendor_id = attr->vendor_id;
  pci.device_id = attr->device_id;
  pci.subsystem_vendor_id = attr->subvendor_id;
  pci.subsystem_device_id = attr->subdevice_id;
  pci.class_id = attr->class_id;
  pci.linkspeed_gbytes = attr->linkspeed;
  if (const auto* parent = pci_attr(obj->parent); parent != nullptr) pci.parent = address_of(*parent);
  const hwloc_obj_t local = hwloc_get_non_io_ancestor_obj(topology, obj);
  if (local != nullptr) {
    for (const int id : bitmap_ids(local->nodeset)) {
      const hwloc_obj_t node = hwloc_get_numanode_obj_by_os_index(topology, static_cast<unsigned>(id));
      if (node != nullptr && !memory_only(node)) pci.locality_nodes.push_back(id);
    }
  }
  out.push_back(std::move(pci));
}

HwlocHost extract(hwloc_topology_t topology) {
  HwlocHost host;
  host.numa_nodes = read_numa_nodes(topology);
  host.cpus = read_cpus(topology);
  hwloc_obj_t bridge = nullptr;
  // Host bridges hang off normal objects; every PCI function is below one of them.
  while ((bridge = hwloc_get_next_obj_by_type(topology, HWLOC_OBJ_BRIDGE, bridge)) != nullptr) {
    if (bridge->attr->bridge.upstream_type == HWLOC_OBJ_BRIDGE_HOST) collect_pci(topology, bridge, host.pci);
  }
  // PCI devices straight under a normal object (no host bridge object) exist on some platforms.
  hwloc_obj_t dev = nullptr;
  while ((dev = hwloc_get_next_pcidev(topology, dev)) != nullptr) {
    if (dev->parent != nullptr && dev->parent->type != HWLOC_OBJ_BRIDGE) collect_pci(topology, dev, host.pci);
  }
  std::sort(host.pci.begin(), host.pci.end(), [](const auto& a, const auto& b) { return a.address < b.address; });
  host.pci.erase(std::unique(host.pci.begin(), host.pci.end(),
                             [](const auto& a, const auto& b) { return a.address == b.address; }),
                 host.pci.end());
  return host;
}

// Sets (or, with nullptr, unsets) an environment variable for its lifetime, then restores it.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const char* value) : name_(name) {
    if (const char* old = std::getenv(name); old != nullptr) previous_ = old;
    if (value != nullptr) {
      setenv(name, value, 1);
    } else {
      unsetenv(name);
    }
  }
  ~ScopedEnv() {
    if (previous_) {
      setenv(name_, previous_->c_str(), 1);
    } else {
      unsetenv(name_);
    }
  }
  ScopedEnv(const ScopedEnv&) = delete;
  ScopedEnv& operator=(const ScopedEnv&) = delete;

 private:
  const char* name_;
  std::optional<std::string> previous_;
};

std::mutex& hwloc_env_mutex() {
  static std::mutex mutex;
  return mutex;
}

// hwloc 3.0 writes <topology version="3.0">, which hwloc 2.x refuses outright. Its object tree is
// the 2.x one; what 3.0 adds at the top level (machine-wide <info>, <pci_locality>) 2.x would only
// warn about. So a 3.x document is handed to 2.x as version 2.0 without those elements. Locality is
// not lost: the host bridges still sit under their NUMA-local objects in the tree.
Result<std::string> xml_for_this_hwloc(const std::filesystem::path& xml_file) {
  pugi::xml_document doc;
  // Keep the declaration and DOCTYPE: hwloc's built-in (non-libxml) parser expects its own layout.
  const auto parsed =
      doc.load_file(xml_file.c_str(), pugi::parse_default | pugi::parse_declaration | pugi::parse_doctype);
  if (!parsed) {
    return Error{ErrorCode::parse_error, "parse " + xml_file.string() + " at byte " + std::to_string(parsed.offset) +
                                             ": " + parsed.description()};
  }
  auto topology = doc.child("topology");
  if (!topology)
    return Error{ErrorCode::parse_error, xml_file.string() + ": no <topology> root: not an hwloc XML export"};
  const std::string version = topology.attribute("version").as_string("2.0");
  if (version.rfind("3.", 0) == 0 && HWLOC_API_VERSION < 0x00030000) {
    topology.attribute("version").set_value("2.0");
    for (const char* name : {"info", "pci_locality"}) {
      while (auto child = topology.child(name)) topology.remove_child(child);
    }
  }
  std::ostringstream out;
  doc.save(out, "  ", pugi::format_indent | pugi::format_no_declaration);
  return out.str();
}

}  // namespace

Result<HwlocHost> read_hwloc_fsroot(const std::filesystem::path& root) {
  HA_TRY(auto topology, init_topology());
  const bool this_system = root == "/";
  // The x86 backend asks this CPU (CPUID) about caches and cores; under another root that would mix
  // the machine we run on into the host we read.
  if (!this_system) hwloc_topology_set_components(topology.get(), HWLOC_TOPOLOGY_COMPONENTS_FLAG_BLACKLIST, "x86");
  int rc = 0;
  {
    // hwloc 2 dropped hwloc_topology_set_fsroot(); its Linux backend reads HWLOC_FSROOT when the
    // topology loads, so the variable is set only around the load, under a process-wide lock, and
    // whatever the environment held before is put back. hwloc also hides the NUMA nodes that hold
    // NVIDIA GPU memory on POWER9 and Grace unless told to keep them; placement must see them (as
    // CPU-less nodes) to keep VMs off them. The daemon discovers before it starts other threads:
    // setenv is not safe against a concurrent getenv.
    std::lock_guard<std::mutex> lock(hwloc_env_mutex());
    const ScopedEnv fsroot("HWLOC_FSROOT", this_system ? nullptr : root.c_str());
    const ScopedEnv keep("HWLOC_KEEP_NVIDIA_GPU_NUMA_NODES", "1");
    rc = hwloc_topology_load(topology.get());
  }
  if (rc != 0) return Error{ErrorCode::internal, "hwloc could not load the topology under " + root.string()};
  return extract(topology.get());
}

Result<HwlocHost> read_hwloc_xml(const std::filesystem::path& xml_file) {
  std::error_code ec;
  if (!std::filesystem::is_regular_file(xml_file, ec)) {
    return Error{ErrorCode::not_found, "hwloc XML " + xml_file.string() + " is not a readable file"};
  }
  HA_TRY(const auto xml, xml_for_this_hwloc(xml_file));
  HA_TRY(auto topology, init_topology());
  if (hwloc_topology_set_xmlbuffer(topology.get(), xml.data(), static_cast<int>(xml.size()) + 1) != 0 ||
      hwloc_topology_load(topology.get()) != 0) {
    return Error{ErrorCode::parse_error, "hwloc could not load " + xml_file.string() +
                                             " (an hwloc XML export of version 1.x, 2.x or 3.x is expected)"};
  }
  return extract(topology.get());
}

}  // namespace hostagent::discovery::detail
