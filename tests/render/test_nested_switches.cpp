// Hosts whose PCIe switches nest (the DGX-2 puts two GPU switches under one): the guest mirrors the
// hierarchy, pruned to the placed devices. Checked by reading the domain back: devices share an
// emulated switch exactly when they share a host switch, each emulated switch mirrors the host switch
// its comment names with its children in host address order, the guest addresses are what firmware
// numbering depth-first in slot order gives, and the NCCL file nests switch inside switch.
#include <doctest/doctest.h>

#include <algorithm>
#include <map>
#include <set>

#include "hostagent/discovery/discovery.hpp"
#include "render_fixture.hpp"
#include "text_format.hpp"

namespace hostagent::render::testing {
namespace {

using numa::PciAddress;
using numa::PciRole;

constexpr const char* kUpstream = "pcie-switch-upstream-port";
constexpr const char* kDownstream = "pcie-switch-downstream-port";
constexpr const char* kBridgeClass = "0x060400";

// ---- reading the rendered guest back ----

// The domain's PCI controllers as its XML states them, the host switch each upstream port's comment
// says it mirrors, and the fixture's firmware-numbering view of where everything lands.
struct GuestTree {
  struct Ctl {
    std::string model;
    int parent = -1;  // the controller it plugs into
    int slot = 0;
    std::optional<PciAddress> mirrors;
  };
  std::map<int, Ctl> ctls;
  GuestView view;
};

std::optional<PciAddress> mirrored_switch(const pugi::xml_node& controller) {
  const auto comment = controller.previous_sibling();
  const std::string prefix = " mirrors host switch ";
  const std::string text = comment.type() == pugi::node_comment ? comment.value() : "";
  if (text.rfind(prefix, 0) != 0) return std::nullopt;
  return pci(text.substr(prefix.size(), text.size() - prefix.size() - 1));
}

GuestTree guest_tree(const pugi::xml_document& domain) {
  GuestTree tree;
  for (const auto& c : domain.child("domain").child("devices").children("controller")) {
    if (std::string(c.attribute("type").value()) != "pci") continue;
    GuestTree::Ctl ctl;
    ctl.model = c.attribute("model").value();
    if (const auto address = c.child("address")) {
      ctl.parent = static_cast<int>(attr_u64(address, "bus"));
      ctl.slot = static_cast<int>(attr_u64(address, "slot"));
    }
    ctl.mirrors = mirrored_switch(c);
    tree.ctls[c.attribute("index").as_int()] = ctl;
  }
  tree.view = guest_view(domain);
  return tree;
}

// The upstream ports above a controller (itself included), nearest first, following what each
// controller plugs into.
std::vector<int> upstreams_above(const GuestTree& tree, int controller) {
  std::vector<int> out;
  for (int c = controller; c >= 0; c = tree.ctls.at(c).parent) {
    if (tree.ctls.at(c).model == kUpstream) out.push_back(c);
  }
  return out;
}

std::vector<int> device_upstreams(const GuestTree& tree, const PciAddress& host) {
  return upstreams_above(tree, tree.view.port.at(host));
}

// The host switches above f: the switch upstream ports of its bridge_chain, nearest first.
std::vector<PciAddress> host_switches(const numa::HostModel& host, const PciAddress& address) {
  std::vector<PciAddress> out;
  for (const auto& bridge : host.find(address)->bridge_chain) {
    if (host.find(bridge)->role == PciRole::switch_upstream) out.push_back(bridge);
  }
  return out;
}

template <typename T>
bool any_common(const std::vector<T>& a, const std::vector<T>& b) {
  return std::any_of(a.begin(), a.end(), [&](const T& x) { return std::find(b.begin(), b.end(), x) != b.end(); });
}

struct RenderedTree {
  const numa::HostModel* host = nullptr;
  RenderedGuest guest;
  std::unique_ptr<pugi::xml_document> domain;
  std::unique_ptr<pugi::xml_document> nccl;
  GuestTree tree;
};

RenderedTree render(const numa::HostModel& host, const vmtemplates::VmTemplate& shape, const numa::Placement& placement,
                    const std::string& name) {
  RenderedTree r;
  r.host = &host;
  r.guest = render_ok(host, shape, placement, options(name));
  r.domain = parse(r.guest.domain_xml);
  r.nccl = parse(r.guest.nccl_topology_xml);
  r.tree = guest_tree(*r.domain);
  return r;
}

// ---- the properties every render must have ----

// Every device's chain of emulated switches mirrors its chain of host switches, switch by switch.
void check_mirrors(const RenderedTree& r) {
  for (const auto& a : r.guest.addresses) {
    CAPTURE(a.host.to_string());
    std::vector<PciAddress> mirrored;
    for (const int up : device_upstreams(r.tree, a.host)) {
      const auto& mirrors = r.tree.ctls.at(up).mirrors;
      REQUIRE_MESSAGE(mirrors.has_value(), "upstream port " << up << " has no 'mirrors host switch' comment");
      mirrored.push_back(*mirrors);
    }
    CHECK(mirrored == host_switches(*r.host, a.host));
  }
}

// For every pair of devices: an emulated switch above both exactly when a host switch is above both.
// Returns how many pairs share a host switch other than their nearest ones (NCCL's PXB on the host).
int check_pairs(const RenderedTree& r) {
  int outer_only = 0;
  for (const auto& a : r.guest.addresses) {
    for (const auto& b : r.guest.addresses) {
      if (!(a.host < b.host)) continue;
      CAPTURE(a.host.to_string());
      CAPTURE(b.host.to_string());
      const auto host_a = host_switches(*r.host, a.host);
      const auto host_b = host_switches(*r.host, b.host);
      const bool on_host = any_common(host_a, host_b);
      CHECK(on_host == any_common(device_upstreams(r.tree, a.host), device_upstreams(r.tree, b.host)));
      if (on_host && host_a.front() != host_b.front()) ++outer_only;
    }
  }
  return outer_only;
}

// Each emulated switch: downstream ports in slots 0..n-1, one child behind each (a device, its
// companions beside it, or a nested switch's upstream port), children in host address order.
// Returns the number of downstream ports per mirrored host switch.
std::map<PciAddress, int> check_switch_children(const RenderedTree& r) {
  std::map<int, std::vector<PciAddress>> devices_on;  // controller -> host addresses plugged into it
  for (const auto& [host, port] : r.tree.view.port) devices_on[port].push_back(host);
  std::map<PciAddress, int> ports_of;
  for (const auto& entry : r.tree.ctls) {
    // Named copies: doctest's CAPTURE is a lambda, and clang 14 cannot capture structured bindings.
    const int up = entry.first;
    const auto& ctl = entry.second;
    if (ctl.model != kUpstream) continue;
    CAPTURE(up);
    std::map<int, PciAddress> key_at_slot;
    for (const auto& downstream : r.tree.ctls) {
      const int dp = downstream.first;
      const auto& port = downstream.second;
      if (port.parent != up) continue;
      CHECK(port.model == kDownstream);
      std::vector<PciAddress> keys = devices_on[dp];
      for (const auto& [child, nested] : r.tree.ctls) {
        if (nested.parent == dp && nested.mirrors) keys.push_back(*nested.mirrors);
      }
      const bool devices = !devices_on[dp].empty();
      CHECK_MESSAGE(keys.size() == (devices ? devices_on[dp].size() : 1), "downstream port " << dp);
      REQUIRE(!keys.empty());
      CHECK(key_at_slot.emplace(port.slot, *std::min_element(keys.begin(), keys.end())).second);
    }
    REQUIRE(!key_at_slot.empty());
    CHECK(key_at_slot.begin()->first == 0);
    CHECK(key_at_slot.rbegin()->first == static_cast<int>(key_at_slot.size()) - 1);
    std::vector<PciAddress> keys;
    keys.reserve(key_at_slot.size());
    for (const auto& [slot, key] : key_at_slot) keys.push_back(key);
    CHECK(std::is_sorted(keys.begin(), keys.end()));
    CHECK(std::adjacent_find(keys.begin(), keys.end()) == keys.end());
    REQUIRE(ctl.mirrors.has_value());
    CHECK(ports_of.emplace(*ctl.mirrors, static_cast<int>(keys.size())).second);
  }
  return ports_of;
}

// libvirt rejects a controller whose index is not above that of the bus it plugs into.
void check_controller_order(const RenderedTree& r) {
  for (const auto& entry : r.tree.ctls) {
    const int index = entry.first;
    CAPTURE(index);
    if (entry.second.parent >= 0) CHECK(index > entry.second.parent);
  }
}

// The addresses the renderer reports are where the fixture's firmware walk (depth-first, slot order,
// over the controllers as written) puts the devices.
void check_bus_numbers(const RenderedTree& r) {
  REQUIRE(r.guest.addresses.size() == r.tree.view.guest.size());
  for (const auto& a : r.guest.addresses) {
    CAPTURE(a.host.to_string());
    CHECK(r.tree.view.guest.at(a.host) == a.guest);
  }
}

// Every GPU and VF of the NCCL file sits inside the <pci> bridges of exactly its emulated switches,
// nearest innermost; each bridge is listed once and takes its host switch's link speed.
void check_nccl_nesting(const RenderedTree& r) {
  std::map<PciAddress, PciAddress> host_of;  // guest -> host
  for (const auto& a : r.guest.addresses) host_of[a.guest] = a.host;
  std::set<PciAddress> expected_bridges;
  int devices = 0;
  for (const auto& x : r.nccl->select_nodes("//pci")) {
    const auto node = x.node();
    if (std::string(node.attribute("class").value()) == kBridgeClass) continue;
    const auto host = host_of.at(pci(node.attribute("busid").value()));
    CAPTURE(host.to_string());
    std::vector<PciAddress> enclosing;
    for (auto p = node.parent(); std::string(p.name()) == "pci"; p = p.parent())
      enclosing.push_back(pci(p.attribute("busid").value()));
    std::vector<PciAddress> expected;
    for (const int up : device_upstreams(r.tree, host)) expected.push_back(r.tree.view.controller_guest.at(up));
    CHECK(enclosing == expected);
    expected_bridges.insert(expected.begin(), expected.end());
    ++devices;
  }
  CHECK(devices > 0);
  std::map<PciAddress, int> mirrors_at;  // upstream port's guest address -> its controller
  for (const auto& [index, ctl] : r.tree.ctls) {
    if (ctl.model == kUpstream) mirrors_at[r.tree.view.controller_guest.at(index)] = index;
  }
  std::multiset<PciAddress> bridges;
  for (const auto& x : r.nccl->select_nodes("//pci[@class='0x060400']")) {
    const auto busid = pci(x.node().attribute("busid").value());
    bridges.insert(busid);
    const auto& mirrors = r.tree.ctls.at(mirrors_at.at(busid)).mirrors;
    REQUIRE(mirrors.has_value());
    const auto speed = r.host->find(*mirrors)->link.speed_gts;
    const auto expected = speed ? detail::nccl_link_speed(*speed) : std::nullopt;
    CHECK(x.node().attribute("link_speed").value() == expected.value_or(""));
  }
  CHECK(bridges == std::multiset<PciAddress>(expected_bridges.begin(), expected_bridges.end()));
}

void check_all(const RenderedTree& r) {
  check_mirrors(r);
  check_pairs(r);
  check_switch_children(r);
  check_controller_order(r);
  check_bus_numbers(r);
  check_nccl_nesting(r);
}

// ---- the DGX-2 (hwloc export, reference data) ----

const numa::HostModel* dgx2() {
  const auto data = reference_data_or_skip();
  if (!data) return nullptr;
  static const auto model = [&] {
    auto discovered = discovery::discover_from_hwloc_xml(*data / "hwloc/nvidiaDGX2.xml");
    REQUIRE_MESSAGE(discovered.ok(), discovered.error().message);
    return std::move(discovered).value();
  }();
  return &model;
}

// 8 V100 over both sockets: 4 vCPUs, 64 GiB in 1 GiB pages, guest cells mirroring the host nodes;
// node 0's 4 GPUs are those under switch 2c:00.0, node 1's those under af:00.0.
Want dgx2_8gpu() {
  Want want;
  want.host_nodes = {0, 1};
  want.vcpus_per_cell = 2;
  want.smt = false;
  want.memory_per_cell = 32 * GiB;
  want.gpus_per_cell = 4;
  want.housekeeping = {};  // the export keeps 2 CPUs per node: vCPUs take them all
  return want;
}

RenderedTree render_dgx2(const numa::HostModel& host) {
  const auto want = dgx2_8gpu();
  auto shape = make_shape("dgx2-8gpu", want);
  shape.gpus.model = "V100";
  shape.boot.image = "/var/lib/hostagent/images/dgx2-8gpu.qcow2";
  return render(host, shape, make_placement(host, want), "dgx2-8gpu");
}

TEST_CASE("DGX-2 with 8 GPUs: devices share an emulated switch exactly when they share a host switch") {
  const auto* host = dgx2();
  if (host == nullptr) return;
  const auto r = render_dgx2(*host);
  REQUIRE(r.guest.addresses.size() == 8);
  // The host pairs GPUs below different GPU switches under one parent switch (34:00.0 and 39:00.0
  // under 2c:00.0): without such pairs this test would show nothing about nesting.
  CHECK(check_pairs(r) > 0);
  check_mirrors(r);
  check_controller_order(r);
  const auto ports = check_switch_children(r);
  int nested = 0;
  for (const auto& [index, ctl] : r.tree.ctls) {
    nested += ctl.model == kUpstream && r.tree.ctls.at(ctl.parent).model == kDownstream ? 1 : 0;
  }
  CHECK(nested == 4);  // two GPU switches under each of the two outer switches
  CHECK(ports.size() == 6);
}

TEST_CASE("DGX-2 with 8 GPUs: guest bus numbers are firmware's depth-first ones and the NCCL file nests") {
  const auto* host = dgx2();
  if (host == nullptr) return;
  const auto r = render_dgx2(*host);
  check_bus_numbers(r);
  check_nccl_nesting(r);
  // Two GPUs that meet only at an outer switch: inside NCCL's file their nearest common element is a
  // <pci> bridge (PXB), not the <cpu> (PHB).
  const auto& a = r.guest.addresses;
  const auto gpu = [&](const char* host_address) {
    const auto it = std::find_if(a.begin(), a.end(), [&](const auto& x) { return x.host == pci(host_address); });
    REQUIRE(it != a.end());
    return r.nccl->select_node(("//pci[@busid='" + it->guest.to_string() + "']").c_str()).node();
  };
  const auto g34 = gpu("0000:34:00.0"), g39 = gpu("0000:39:00.0");
  CHECK(g34.parent() != g39.parent());
  CHECK(g34.parent().parent() == g39.parent().parent());
  CHECK(std::string(g34.parent().parent().name()) == "pci");
}

TEST_CASE("DGX-2 with 8 GPUs: golden domain XML and NCCL topology") {
  const auto* host = dgx2();
  if (host == nullptr) return;
  const auto r = render_dgx2(*host);
  const auto domain_diff = compare_golden("render/dgx2-8gpu.domain.xml", r.guest.domain_xml);
  CHECK_MESSAGE(domain_diff.empty(), domain_diff);
  const auto nccl_diff = compare_golden("render/dgx2-8gpu.nccl-topology.xml", r.guest.nccl_topology_xml);
  CHECK_MESSAGE(nccl_diff.empty(), nccl_diff);
  const auto validated = virt_xml_validate(r.guest.domain_xml);
  if (!validated) {
    skip("virt-xml-validate is not installed (package libvirt-clients)");
    return;
  }
  CHECK_MESSAGE(validated->exit_code == 0, validated->output);
}

// ---- a synthetic host: three levels, unplaced branches ----

// Node 0, one socket of 8 CPUs. Root port 00:01.0 leads to switch A (01:00.0) with, in port order:
//   B 03:00.0 [GPU 05:00.0 | C 06:00.0 [GPU 08:00.0 | GPU 09:00.0] | D 0a:00.0 [GPU 0c:00.0]]
//   E 0d:00.0 [GPU 0f:00.0 | NVMe 10:00.0]
//   GPU 11:00.0
//   G 12:00.0 [GPU 14:00.0]
// root port 00:02.0: GPU 20:00.0; root port 00:03.0: switch F 30:00.0 [GPU 32:00.0 | GPU 33:00.0].
// Unplaced: GPUs 0c, 0f and 14, so D and G lead to nothing placed and E only to its NVMe.
class SyntheticHost {
 public:
  SyntheticHost() {
    numa::NumaNode node;
    for (int cpu = 0; cpu < 8; ++cpu) {
      node.cpus.push_back(cpu);
      model_.cpus.push_back(numa::Cpu{cpu, cpu, 0, 0, {cpu}, true});
    }
    model_.numa_nodes.push_back(node);
    for (const char* rp : {"00:01.0", "00:02.0", "00:03.0"}) add(rp, std::nullopt, PciRole::root_port, 0x060400);
    add_switch("01:00.0", "00:01.0", {"02:00.0", "02:01.0", "02:02.0", "02:03.0"}, 16.0);
    add_switch("03:00.0", "02:00.0", {"04:00.0", "04:01.0", "04:02.0"}, 8.0);
    add_switch("06:00.0", "04:01.0", {"07:00.0", "07:01.0"}, 32.0);
    add_switch("0a:00.0", "04:02.0", {"0b:00.0"}, 16.0);
    add_switch("0d:00.0", "02:01.0", {"0e:00.0", "0e:01.0"}, 8.0);
    add_switch("12:00.0", "02:03.0", {"13:00.0"}, 16.0);
    add_switch("30:00.0", "00:03.0", {"31:00.0", "31:01.0"}, 16.0);
    const std::pair<const char*, const char*> gpus[] = {
        {"05:00.0", "04:00.0"}, {"08:00.0", "07:00.0"}, {"09:00.0", "07:01.0"}, {"0c:00.0", "0b:00.0"},
        {"0f:00.0", "0e:00.0"}, {"11:00.0", "02:02.0"}, {"14:00.0", "13:00.0"}, {"20:00.0", "00:02.0"},
        {"32:00.0", "31:00.0"}, {"33:00.0", "31:01.0"}};
    for (const auto& [gpu, port] : gpus) add(gpu, port, PciRole::gpu, 0x030200);
    add("10:00.0", "0e:01.0", PciRole::nvme, 0x010802);
    finish();
  }
  const numa::HostModel& model() const { return model_; }

 private:
  numa::PciFunction& add(const std::string& address, std::optional<std::string> parent, PciRole role,
                         uint32_t class_code) {
    numa::PciFunction f;
    f.address = pci("0000:" + address);
    if (parent) f.parent = pci("0000:" + *parent);
    f.role = role;
    f.class_code = class_code;
    f.vendor_id = role == PciRole::gpu ? 0x10de : 0x8086;
    f.numa_node = 0;
    model_.pci_devices.push_back(f);
    return model_.pci_devices.back();
  }

  void add_switch(const std::string& upstream, const std::string& port, const std::vector<std::string>& downstream,
                  double speed_gts) {
    auto& up = add(upstream, port, PciRole::switch_upstream, 0x060400);
    up.link.speed_gts = speed_gts;
    up.link.width = 16;
    for (const auto& dp : downstream) add(dp, upstream, PciRole::switch_downstream, 0x060400);
  }

  // bridge_chain and pcie_switch as numa's model builder defines them: parents nearest first, the
  // nearest switch upstream port.
  void finish() {
    std::sort(model_.pci_devices.begin(), model_.pci_devices.end(),
              [](const auto& a, const auto& b) { return a.address < b.address; });
    for (auto& f : model_.pci_devices) {
      for (auto parent = f.parent; parent; parent = model_.find(*parent)->parent) f.bridge_chain.push_back(*parent);
      for (const auto& bridge : f.bridge_chain) {
        if (model_.find(bridge)->role == PciRole::switch_upstream && !f.pcie_switch) f.pcie_switch = bridge;
      }
    }
  }

  numa::HostModel model_;
};

// GPUs deliberately out of host address order: the layout must not follow the placement's order.
numa::Placement synthetic_placement(const numa::HostModel& host, const std::vector<std::string>& gpus) {
  numa::Placement p;
  numa::GuestCell cell;
  cell.vcpus = {0, 1};
  cell.host_cpus = {2, 3};
  cell.memory_bytes = 2 * GiB;
  cell.hugepages = 2;
  p.cells.push_back(cell);
  const auto placed = [&](const std::string& address) {
    const auto* f = host.find(pci("0000:" + address));
    REQUIRE(f != nullptr);
    return numa::PlacedDevice{f->address, f->numa_node, f->pcie_switch, 0};
  };
  for (const auto& gpu : gpus) {
    numa::PlacedGpu g;
    g.gpu = placed(gpu);
    p.gpus.push_back(g);
  }
  p.nvme.push_back(placed("10:00.0"));
  p.emulator_cpus = {0};
  p.topology.cores = 2;
  return p;
}

vmtemplates::VmTemplate synthetic_shape(int gpus) {
  vmtemplates::VmTemplate shape;
  shape.name = "nested-synthetic";
  shape.vcpus = 2;
  shape.memory_bytes = 2 * GiB;
  shape.gpus.count = gpus;
  shape.nvme = 1;
  return shape;
}

const std::vector<std::string> kSyntheticGpus{"33:00.0", "11:00.0", "09:00.0", "20:00.0",
                                              "05:00.0", "32:00.0", "08:00.0"};

TEST_CASE("a synthetic 3-level host: switches without placed devices pruned, children in host address order") {
  const SyntheticHost host;
  const auto r = render(host.model(), synthetic_shape(7), synthetic_placement(host.model(), kSyntheticGpus), "nested");
  check_all(r);
  CHECK(check_pairs(r) > 0);
  // A leads to B, E and GPU 11; B to GPU 05 and C; C to its 2 GPUs; E to the NVMe; F to its 2 GPUs.
  // D and G lead to nothing placed: no emulated switch mirrors them.
  const auto ports = check_switch_children(r);
  const std::map<PciAddress, int> expected{{pci("0000:01:00.0"), 3},
                                           {pci("0000:03:00.0"), 2},
                                           {pci("0000:06:00.0"), 2},
                                           {pci("0000:0d:00.0"), 1},
                                           {pci("0000:30:00.0"), 2}};
  CHECK(ports == expected);
  // Root ports: one per unit (A's tree, lone GPU 20, F), in host address order.
  std::map<int, std::vector<int>> root_ports;  // expander bus -> root ports by slot
  for (const auto& [index, ctl] : r.tree.ctls) {
    if (ctl.model == "pcie-root-port") root_ports[ctl.parent].push_back(ctl.slot);
  }
  REQUIRE(root_ports.size() == 1);
  CHECK(root_ports.begin()->second == std::vector<int>{0, 1, 2});
  CHECK(r.tree.view.port.at(pci("0000:20:00.0")) < r.tree.view.port.at(pci("0000:32:00.0")));
  // The NVMe's switch E stays in the domain but not in the NCCL file, which lists only GPUs and VFs.
  const auto e = r.tree.view.upstream.at(pci("0000:10:00.0"));
  REQUIRE(e >= 0);
  const auto e_busid = r.tree.view.controller_guest.at(e).to_string();
  CHECK(r.nccl->select_nodes(("//pci[@busid='" + e_busid + "']").c_str()).empty());
}

TEST_CASE("a synthetic 3-level host: the layout depends on what is placed, not on the placement's order") {
  const SyntheticHost host;
  const auto first =
      render(host.model(), synthetic_shape(7), synthetic_placement(host.model(), kSyntheticGpus), "nested");
  auto reversed = kSyntheticGpus;
  std::reverse(reversed.begin(), reversed.end());
  const auto second = render(host.model(), synthetic_shape(7), synthetic_placement(host.model(), reversed), "nested");
  CHECK(first.tree.view.guest == second.tree.view.guest);
  CHECK(first.tree.view.port == second.tree.view.port);
  CHECK(first.guest.nccl_topology_xml == second.guest.nccl_topology_xml);
}

TEST_CASE("a synthetic 3-level host: one placed GPU deep in the tree keeps all its host switches") {
  const SyntheticHost host;
  const auto r = render(host.model(), synthetic_shape(1), synthetic_placement(host.model(), {"09:00.0"}), "nested");
  check_all(r);
  // GPU 09 under C under B under A, the NVMe under E under A: A holds two downstream ports.
  const auto ports = check_switch_children(r);
  const std::map<PciAddress, int> expected{
      {pci("0000:01:00.0"), 2}, {pci("0000:03:00.0"), 1}, {pci("0000:06:00.0"), 1}, {pci("0000:0d:00.0"), 1}};
  CHECK(ports == expected);
}

}  // namespace
}  // namespace hostagent::render::testing
