// Render test fixtures: hosts, hand-built placements and templates, XML helpers.
#include "render_fixture.hpp"

#include <doctest/doctest.h>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <functional>
#include <set>

#include "hostagent/discovery/discovery.hpp"
#include "hostagent/simhost/sim_host.hpp"
#include "simulated_hosts.hpp"

namespace hostagent::render::testing {
namespace {

std::string address_text(int routing_id) {
  char buf[16];
  std::snprintf(buf, sizeof buf, "0000:%02x:%02x.%x", (routing_id >> 8) & 0xff, (routing_id >> 3) & 0x1f,
                routing_id & 7);
  return buf;
}

int routing_id(const std::string& address) {
  const auto a = pci(address);
  return (a.bus << 8) | (a.device << 3) | a.function;
}

// VF n of a PF sits at routing ID PF + offset + n * stride (PCIe Base Spec 6.0 section 9.3.3.10).
void enable_vfs(simhost::HostSpec& spec, int per_pf) {
  std::vector<simhost::SimFunction> vfs;
  for (auto& pf : spec.functions) {
    if (pf.sriov_total_vfs == 0 || pf.sriov_num_vfs != 0) continue;
    pf.sriov_num_vfs = std::min(per_pf, pf.sriov_total_vfs);
    for (int n = 0; n < pf.sriov_num_vfs; ++n) {
      simhost::SimFunction vf = pf;
      vf.address = address_text(routing_id(pf.address) + pf.sriov_vf_offset + n * pf.sriov_vf_stride);
      vf.device = pf.sriov_vf_device;
      vf.physfn = pf.address;
      vf.iommu_group.reset();
      vf.sriov_total_vfs = vf.sriov_num_vfs = 0;
      vf.sriov_vf_bars.clear();
      vf.link_sta_gen = vf.link_sta_width = 0;  // VFs have no link of their own
      vf.net_interfaces.clear();
      vf.rdma_devices.clear();
      vfs.push_back(vf);
    }
  }
  spec.functions.insert(spec.functions.end(), vfs.begin(), vfs.end());
}

// Host CPUs of a node for vCPUs: whole cores (both threads) when smt, housekeeping CPUs never.
std::vector<int> free_cpus(const numa::HostModel& host, int node, const Want& want, const std::set<int>& used) {
  std::set<int> reserved(want.housekeeping.begin(), want.housekeeping.end());
  reserved.insert(used.begin(), used.end());
  std::vector<int> out;
  for (const auto& cpu : host.cpus) {
    if (cpu.numa_node != node || reserved.count(cpu.id) != 0) continue;
    if (!want.smt) {
      out.push_back(cpu.id);
      continue;
    }
    if (cpu.siblings.empty() || cpu.siblings.front() != cpu.id) continue;  // the core's first thread
    const bool whole = std::none_of(cpu.siblings.begin(), cpu.siblings.end(), [&](int s) { return reserved.count(s); });
    if (whole) out.insert(out.end(), cpu.siblings.begin(), cpu.siblings.end());
  }
  return out;
}

numa::PlacedDevice placed(const numa::PciFunction& f, int cell) {
  return numa::PlacedDevice{f.address, f.numa_node, f.pcie_switch, cell};
}

class Picker {
 public:
  Picker(const numa::HostModel& host) : host_(host) {}

  std::vector<const numa::PciFunction*> all(const std::function<bool(const numa::PciFunction&)>& pred) const {
    std::vector<const numa::PciFunction*> out;
    for (const auto& f : host_.pci_devices) {
      if (pred(f) && used_.count(f.address) == 0) out.push_back(&f);
    }
    return out;
  }
  const numa::PciFunction* take(const numa::PciFunction* f) {
    if (f != nullptr) used_.insert(f->address);
    return f;
  }
  const numa::PciFunction* first(const std::function<bool(const numa::PciFunction&)>& pred) {
    const auto found = all(pred);
    return take(found.empty() ? nullptr : found.front());
  }

 private:
  const numa::HostModel& host_;
  std::set<numa::PciAddress> used_;
};

bool is_vf(const numa::PciFunction& f) {
  return f.role == numa::PciRole::nic && f.physfn.has_value();
}

// A VF of the NIC under the GPU's switch; the `ordinal`-th GPU of a switch takes its PFs in turn.
const numa::PciFunction* vf_for(Picker& picker, const numa::HostModel& host, const numa::PciFunction& gpu,
                                int ordinal) {
  std::vector<numa::PciAddress> pfs;
  for (const auto& f : host.pci_devices) {
    if (f.role == numa::PciRole::nic && f.sriov && f.pcie_switch == gpu.pcie_switch) pfs.push_back(f.address);
  }
  if (!pfs.empty()) {
    const auto pf = pfs[static_cast<std::size_t>(ordinal) % pfs.size()];
    if (const auto* vf = picker.first([&](const auto& f) { return is_vf(f) && f.physfn == pf; })) return vf;
  }
  return picker.first([&](const auto& f) { return is_vf(f) && f.pcie_switch == gpu.pcie_switch; });
}

void place_gpus(numa::Placement& out, Picker& picker, const numa::HostModel& host, const Want& want) {
  // clique: the root port above the GPU's switch tree (as numa::place), in order seen; switch-less
  // GPUs share one
  std::vector<std::optional<numa::PciAddress>> switches;
  for (std::size_t c = 0; c < want.host_nodes.size(); ++c) {
    const int node = want.host_nodes[c];
    auto gpus = picker.all([&](const auto& f) { return f.role == numa::PciRole::gpu && f.numa_node == node; });
    gpus.resize(std::min(gpus.size(), static_cast<std::size_t>(want.gpus_per_cell)));
    std::map<std::optional<numa::PciAddress>, int> per_switch;
    for (const auto* gpu : gpus) {
      picker.take(gpu);
      numa::PlacedGpu g;
      g.gpu = placed(*gpu, static_cast<int>(c));
      for (const auto& group : host.iommu_groups) {
        const bool mine = std::find(group.members.begin(), group.members.end(), gpu->address) != group.members.end();
        for (const auto& m : group.members) {
          if (mine && m != gpu->address && !host.find(m)->is_bridge()) g.companions.push_back(m);
        }
      }
      const int ordinal = per_switch[gpu->pcie_switch]++;
      for (int v = 0; v < want.vfs_per_gpu; ++v) {
        const auto* vf = vf_for(picker, host, *gpu, ordinal + v);
        REQUIRE_MESSAGE(vf != nullptr, "no free VF for GPU " << gpu->address.to_string());
        g.vfs.push_back(placed(*vf, static_cast<int>(c)));
      }
      const auto tree = gpu->pcie_switch ? std::optional(gpu->bridge_chain.back()) : std::nullopt;
      auto it = std::find(switches.begin(), switches.end(), tree);
      if (it == switches.end()) it = switches.insert(switches.end(), tree);
      g.clique = static_cast<int>(it - switches.begin());
      out.gpus.push_back(std::move(g));
    }
  }
}

void place_spread(std::vector<numa::PlacedDevice>& out, Picker& picker, const Want& want, int count,
                  const std::function<bool(const numa::PciFunction&)>& pred) {
  for (int k = 0; k < count; ++k) {
    const int cell = k % static_cast<int>(want.host_nodes.size());
    const int node = want.host_nodes[static_cast<std::size_t>(cell)];
    const auto* f = picker.first([&](const auto& fn) { return pred(fn) && fn.numa_node == node; });
    REQUIRE_MESSAGE(f != nullptr, "no free device for cell " << cell);
    out.push_back(placed(*f, cell));
  }
}

}  // namespace

numa::PciAddress pci(const std::string& text) {
  auto parsed = numa::PciAddress::parse(text);
  REQUIRE_MESSAGE(parsed.ok(), text);
  return *parsed;
}

uint64_t attr_u64(const pugi::xml_node& node, const char* name) {
  return std::stoull(node.attribute(name).value(), nullptr, 0);
}

std::shared_ptr<const Host> discover(const std::string& name, int vfs_per_pf) {
  static std::map<std::pair<std::string, int>, std::shared_ptr<const Host>> cache;
  auto& host = cache[{name, vfs_per_pf}];
  if (!host) host = discover_uncached(name, vfs_per_pf);
  return host;
}

std::unique_ptr<Host> discover_uncached(const std::string& name, int vfs_per_pf) {
  auto out = std::make_unique<Host>();
  auto spec = simhost::builtin_host(name);
  REQUIRE_MESSAGE(spec.ok(), spec.error().message);
  if (vfs_per_pf > 0) enable_vfs(*spec, vfs_per_pf);
  out->model = testing::discover_shared(*spec);
  return out;
}

numa::Placement make_placement(const numa::HostModel& host, const Want& want) {
  numa::Placement out;
  int next_vcpu = 0;
  std::set<int> used;
  for (std::size_t c = 0; c < want.host_nodes.size(); ++c) {
    numa::GuestCell cell;
    cell.id = static_cast<int>(c);
    cell.host_node = want.host_nodes[c];
    auto cpus = free_cpus(host, cell.host_node, want, used);
    REQUIRE(cpus.size() >= static_cast<std::size_t>(want.vcpus_per_cell));
    cpus.resize(static_cast<std::size_t>(want.vcpus_per_cell));
    for (const int cpu : cpus) {
      used.insert(cpu);
      cell.vcpus.push_back(next_vcpu++);
      cell.host_cpus.push_back(cpu);
    }
    cell.memory_bytes = want.memory_per_cell;
    cell.hugepages = want.memory_per_cell / want.page_size;
    out.cells.push_back(std::move(cell));
  }
  Picker picker(host);
  place_gpus(out, picker, host, want);
  place_spread(out.extra_vfs, picker, want, want.extra_vfs, is_vf);
  place_spread(out.nvme, picker, want, want.nvme,
               [](const auto& f) { return f.role == numa::PciRole::nvme && !f.host_use; });
  out.emulator_cpus = want.housekeeping;
  out.topology.sockets = static_cast<int>(want.host_nodes.size());
  out.topology.threads = want.smt ? 2 : 1;
  out.topology.cores = want.vcpus_per_cell / out.topology.threads;
  return out;
}

vmtemplates::VmTemplate make_shape(const std::string& name, const Want& want) {
  vmtemplates::VmTemplate shape;
  shape.name = name;
  shape.vcpus = want.vcpus_per_cell * static_cast<int>(want.host_nodes.size());
  shape.memory_bytes = want.memory_per_cell * want.host_nodes.size();
  shape.gpus.count = want.gpus_per_cell * static_cast<int>(want.host_nodes.size());
  shape.nics.vfs_per_gpu = want.vfs_per_gpu;
  shape.nics.count = want.extra_vfs;
  shape.nvme = want.nvme;
  shape.hugepage_size_bytes = want.page_size;
  return shape;
}

GuestOptions options(const std::string& name) {
  GuestOptions opts;
  opts.name = name;
  return opts;
}

RenderedGuest render_ok(const numa::HostModel& host, const vmtemplates::VmTemplate& shape,
                        const numa::Placement& placement, const GuestOptions& opts) {
  auto rendered = render_guest(host, shape, placement, opts);
  REQUIRE_MESSAGE(rendered.ok(), rendered.error().message);
  return std::move(rendered).value();
}

std::unique_ptr<pugi::xml_document> parse(const std::string& xml) {
  auto doc = std::make_unique<pugi::xml_document>();
  const auto result = doc->load_string(xml.c_str(), pugi::parse_default | pugi::parse_comments);
  REQUIRE_MESSAGE(result, result.description());
  return doc;
}

std::optional<CommandResult> virt_xml_validate(const std::string& xml) {
  const auto tool = find_program("virt-xml-validate");
  if (!tool) return std::nullopt;
  TempDir dir;
  const auto file = dir.path() / "domain.xml";
  std::ofstream(file, std::ios::binary) << xml;
  return run_command({tool->string(), file.string(), "domain"});
}

namespace {

struct Ctl {
  std::string model;
  int parent = -1;
  int slot = 0;
  int function = 0;
  int bus_nr = -1;
  int node = -1;
};

numa::PciAddress address_of(const pugi::xml_node& address) {
  numa::PciAddress a;
  a.domain = static_cast<uint32_t>(attr_u64(address, "domain"));
  a.bus = static_cast<uint8_t>(attr_u64(address, "bus"));
  a.device = static_cast<uint8_t>(attr_u64(address, "slot"));
  a.function = static_cast<uint8_t>(attr_u64(address, "function"));
  return a;
}

std::map<int, Ctl> controllers(const pugi::xml_node& devices) {
  std::map<int, Ctl> out;
  for (const auto& c : devices.children("controller")) {
    if (std::string(c.attribute("type").value()) != "pci") continue;
    Ctl ctl;
    ctl.model = c.attribute("model").value();
    if (const auto address = c.child("address")) {
      const auto a = address_of(address);
      ctl.parent = a.bus, ctl.slot = a.device, ctl.function = a.function;
    }
    if (const auto target = c.child("target"); target.attribute("busNr")) {
      ctl.bus_nr = target.attribute("busNr").as_int();
      ctl.node = target.child("node").text().as_int(-1);
    }
    out[c.attribute("index").as_int()] = ctl;
  }
  return out;
}

// Depth-first, in slot order, as OVMF's PciBusDxe and SeaBIOS's pci_bios_init_bus_rec number buses.
class Numbering {
 public:
  explicit Numbering(const std::map<int, Ctl>& ctls) : ctls_(ctls) {
    for (const auto& [index, ctl] : ctls) {
      if (ctl.parent >= 0) children_[ctl.parent].push_back(index);
    }
    for (auto& [parent, kids] : children_) {
      std::sort(kids.begin(), kids.end(), [&](int a, int b) {
        return std::pair(ctls.at(a).slot, ctls.at(a).function) < std::pair(ctls.at(b).slot, ctls.at(b).function);
      });
    }
    bus_[0] = 0;
    walk(0);
    for (const auto& [index, ctl] : ctls) {
      if (ctl.model != "pcie-expander-bus") continue;
      bus_[index] = next_ = ctl.bus_nr;
      walk(index);
    }
  }
  int bus(int controller) const { return bus_.at(controller); }

 private:
  void walk(int controller) {
    for (const int child : children_[controller]) {
      if (ctls_.at(child).model == "pcie-expander-bus") continue;  // a root bus of its own
      bus_[child] = ++next_;
      walk(child);
    }
  }
  const std::map<int, Ctl>& ctls_;
  std::map<int, std::vector<int>> children_;
  std::map<int, int> bus_;
  int next_ = 0;
};

}  // namespace

GuestView guest_view(const pugi::xml_document& domain) {
  const auto devices = domain.child("domain").child("devices");
  const auto ctls = controllers(devices);
  const Numbering numbering(ctls);
  GuestView view;
  for (const auto& [index, ctl] : ctls) {
    if (ctl.parent < 0) continue;
    view.controller_guest[index] = numa::PciAddress{0, static_cast<uint8_t>(numbering.bus(ctl.parent)),
                                                    static_cast<uint8_t>(ctl.slot), static_cast<uint8_t>(ctl.function)};
    int up = index;
    while (up >= 0 && ctls.at(up).model != "pcie-expander-bus") up = ctls.at(up).parent;
    view.controller_cell[index] = up >= 0 ? ctls.at(up).node : -1;
    view.controller_expander[index] = up;
  }
  for (const auto& node : devices.children()) {
    const std::string name = node.name();
    if (name != "hostdev" && name != "interface") continue;
    const auto host = address_of(node.child("source").child("address"));
    const auto at = address_of(node.child("address"));
    view.guest[host] = numa::PciAddress{0, static_cast<uint8_t>(numbering.bus(at.bus)), at.device, at.function};
    view.port[host] = at.bus;
    const auto& port = ctls.at(at.bus);
    view.upstream[host] = port.model == "pcie-switch-downstream-port" ? port.parent : -1;
  }
  return view;
}

}  // namespace hostagent::render::testing
