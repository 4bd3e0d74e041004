// Structure of the rendered guest, checked by parsing the XML back: expander buses per cell, emulated
// switches that pair exactly the devices the host pairs, the addresses guest firmware will assign,
// vCPU pins, strict NUMA memory, hugepages, the MMIO window, P2P cliques and the NCCL file.
#include <doctest/doctest.h>

#include <bit>
#include <map>
#include <set>

#include "hostagent/numa/affinity.hpp"
#include "render_fixture.hpp"

namespace hostagent::render::testing {
namespace {

std::vector<std::string> device_cases() {
  return {"vela1-8gpu", "vela2-8gpu", "vela2-2gpu", "vela1-gx2-80x1280x8a100", "quirks-3gpu"};
}

struct Rendered {
  Case c;
  RenderedGuest guest;
  std::unique_ptr<pugi::xml_document> domain;
  std::unique_ptr<pugi::xml_document> nccl;
};

Rendered rendered(const std::string& name) {
  Rendered r{make_case(name), {}, nullptr, nullptr};
  r.guest = render_ok(r.c.host->model, r.c.shape, r.c.placement, r.c.opts);
  r.domain = parse(r.guest.domain_xml);
  r.nccl = parse(r.guest.nccl_topology_xml);
  return r;
}

pugi::xml_node devices(const Rendered& r) {
  return r.domain->child("domain").child("devices");
}

std::vector<numa::PlacedDevice> all_vfs(const numa::Placement& p) {
  std::vector<numa::PlacedDevice> out;
  for (const auto& g : p.gpus) out.insert(out.end(), g.vfs.begin(), g.vfs.end());
  out.insert(out.end(), p.extra_vfs.begin(), p.extra_vfs.end());
  return out;
}

TEST_CASE("one pcie-expander-bus per host bridge of each guest cell, on that cell's node, each device below one") {
  for (const auto& name : case_names()) {
    CAPTURE(name);
    const auto r = rendered(name);
    std::set<int> nodes;
    for (const auto& c : devices(r).children("controller")) {
      if (std::string(c.attribute("model").value()) != "pcie-expander-bus") continue;
      CHECK(std::string(c.child("model").attribute("name").value()) == "pxb-pcie");
      nodes.insert(c.child("target").child("node").text().as_int(-1));
      CHECK(c.child("address").attribute("bus").as_string() == std::string("0x00"));  // on pcie-root
    }
    std::set<int> cells;
    for (const auto& cell : r.c.placement.cells) cells.insert(cell.id);
    CHECK(nodes == cells);
    const auto view = guest_view(*r.domain);
    std::map<int, std::set<std::pair<uint32_t, int>>> roots_of;  // pxb -> the host root buses below it
    std::map<std::pair<uint32_t, int>, std::set<int>> pxbs_of;   // (cell, host root bus) -> pxbs
    for (const auto& a : r.guest.addresses) {
      CAPTURE(a.host.to_string());
      CHECK(view.controller_cell.at(view.port.at(a.host)) == a.guest_cell);
      if (a.role == "companion") continue;
      const auto root = numa::reach_of(r.c.host->model, *r.c.host->model.find(a.host)).root;
      const int pxb = view.controller_expander.at(view.port.at(a.host));
      roots_of[pxb].insert({root.domain, root.bus});
      pxbs_of[{static_cast<uint32_t>(a.guest_cell), root.bus + (static_cast<int>(root.domain) << 8)}].insert(pxb);
    }
    for (const auto& [pxb, roots] : roots_of) CHECK(roots.size() == 1);  // one host bridge per expander
    for (const auto& [key, pxbs] : pxbs_of) CHECK(pxbs.size() == 1);     // and one expander per host bridge
  }
}

TEST_CASE("a GPU and a VF share an emulated switch exactly when they share a switch on the host") {
  for (const auto& name : device_cases()) {
    CAPTURE(name);
    const auto r = rendered(name);
    const auto view = guest_view(*r.domain);
    const auto& host = r.c.host->model;
    int pairs_sharing = 0;
    for (const auto& gpu : r.c.placement.gpus) {
      for (const auto& vf : all_vfs(r.c.placement)) {
        CAPTURE(gpu.gpu.address.to_string());
        CAPTURE(vf.address.to_string());
        const auto host_switch = host.find(gpu.gpu.address)->pcie_switch;
        const bool on_host = host_switch.has_value() && host_switch == host.find(vf.address)->pcie_switch;
        const int up = view.upstream.at(gpu.gpu.address);
        const bool in_guest = up >= 0 && up == view.upstream.at(vf.address);
        CHECK(on_host == in_guest);
        pairs_sharing += on_host ? 1 : 0;
      }
      // Each GPU's own VFs are under its switch (the placement took them there).
      for (const auto& vf : gpu.vfs) CHECK(view.upstream.at(gpu.gpu.address) == view.upstream.at(vf.address));
    }
    if (!r.c.placement.gpus.empty() && r.c.want.vfs_per_gpu > 0)
      CHECK(pairs_sharing >= static_cast<int>(r.c.placement.gpus.size()));
  }
}

TEST_CASE("the guest addresses firmware will assign are the reported ones and the NCCL file's") {
  for (const auto& name : device_cases()) {
    CAPTURE(name);
    const auto r = rendered(name);
    const auto view = guest_view(*r.domain);
    REQUIRE(r.guest.addresses.size() == view.guest.size());
    std::set<numa::PciAddress> guest_addresses;
    for (const auto& a : r.guest.addresses) {
      CAPTURE(a.host.to_string());
      CHECK(view.guest.at(a.host) == a.guest);
      CHECK(guest_addresses.insert(a.guest).second);
    }
    std::set<std::string> nccl_busids;
    for (const auto& x : r.nccl->select_nodes("//pci")) nccl_busids.insert(x.node().attribute("busid").value());
    for (const auto& a : r.guest.addresses) {
      const bool listed = nccl_busids.count(a.guest.to_string()) != 0;
      CHECK(listed == (a.role == "gpu" || a.role == "nic"));
    }
    for (const auto& x : r.nccl->select_nodes("//pci[@class='0x060400']")) {
      const auto busid = pci(x.node().attribute("busid").value());
      const bool is_upstream = std::any_of(view.controller_guest.begin(), view.controller_guest.end(),
                                           [&](const auto& kv) { return kv.second == busid; });
      CHECK(is_upstream);
    }
  }
}

TEST_CASE("one vcpupin per vCPU, as placed, and the emulator on the housekeeping CPUs") {
  for (const auto& name : case_names()) {
    CAPTURE(name);
    const auto r = rendered(name);
    std::map<int, int> expected;
    for (const auto& cell : r.c.placement.cells) {
      for (std::size_t i = 0; i < cell.vcpus.size(); ++i) expected[cell.vcpus[i]] = cell.host_cpus[i];
    }
    const auto domain = r.domain->child("domain");
    CHECK(domain.child("vcpu").text().as_int() == static_cast<int>(expected.size()));
    CHECK(std::string(domain.child("vcpu").attribute("placement").value()) == "static");
    std::map<int, int> pinned;
    for (const auto& pin : domain.child("cputune").children("vcpupin")) {
      CHECK(pinned.emplace(pin.attribute("vcpu").as_int(), std::stoi(pin.attribute("cpuset").value())).second);
    }
    CHECK(pinned == expected);
    const std::string emulator = domain.child("cputune").child("emulatorpin").attribute("cpuset").value();
    CHECK(emulator == (name == "quirks-3gpu" ? "0,8" : "0-1"));
  }
}

TEST_CASE("strict NUMA memory: a strict memnode per cell on its host node, hugepages of the template's size") {
  for (const auto& name : case_names()) {
    CAPTURE(name);
    const auto r = rendered(name);
    const auto domain = r.domain->child("domain");
    const auto numatune = domain.child("numatune");
    CHECK(std::string(numatune.child("memory").attribute("mode").value()) == "strict");
    std::size_t memnodes = 0;
    for (const auto& memnode : numatune.children("memnode")) {
      const auto& cell = r.c.placement.cells.at(memnode.attribute("cellid").as_uint());
      CHECK(std::string(memnode.attribute("mode").value()) == "strict");
      CHECK(memnode.attribute("nodeset").as_int() == cell.host_node);
      ++memnodes;
    }
    CHECK(memnodes == r.c.placement.cells.size());
    const auto page = domain.child("memoryBacking").child("hugepages").child("page");
    CHECK(attr_u64(page, "size") * 1024 == r.c.shape.hugepage_size_bytes);
    CHECK(std::string(page.attribute("unit").value()) == "KiB");
    uint64_t total = 0;
    for (const auto& cell : domain.child("cpu").child("numa").children("cell")) {
      const auto& placed = r.c.placement.cells.at(cell.attribute("id").as_uint());
      CHECK(attr_u64(cell, "memory") * 1024 == placed.memory_bytes);
      total += placed.memory_bytes;
    }
    CHECK(std::stoull(domain.child("memory").text().get()) * 1024 == total);
  }
}

TEST_CASE("guest NUMA distances are the host's SLIT distances between the cells' nodes") {
  const auto r = rendered("vela2-8gpu");
  const auto cells = r.domain->child("domain").child("cpu").child("numa");
  for (const auto& cell : cells.children("cell")) {
    for (const auto& sibling : cell.child("distances").children("sibling")) {
      const bool local = sibling.attribute("id").as_int() == cell.attribute("id").as_int();
      CHECK(sibling.attribute("value").as_int() == (local ? 10 : 21));
    }
  }
}

uint64_t prefetchable_bars(const numa::HostModel& host, const RenderedGuest& guest) {
  uint64_t sum = 0;
  for (const auto& a : guest.addresses) {
    for (const auto& bar : host.find(a.host)->bars)
      sum += (bar.index < 6 && bar.is_64bit && bar.prefetchable) ? bar.size_bytes : 0;
  }
  return sum;
}

TEST_CASE("pcihole64 holds twice the 64-bit prefetchable BARs, as a power of two, and OVMF gets the same") {
  for (const auto& name : case_names()) {
    CAPTURE(name);
    const auto r = rendered(name);
    const auto devs = devices(r);
    const auto root = devs.find_child_by_attribute("controller", "model", "pcie-root");
    REQUIRE(root);
    const uint64_t bars = prefetchable_bars(r.c.host->model, r.guest);
    if (bars == 0) {
      CHECK_FALSE(root.child("pcihole64"));
      continue;
    }
    const auto hole = root.child("pcihole64");
    REQUIRE(hole);
    CHECK(std::string(hole.attribute("unit").value()) == "KiB");
    const uint64_t window = std::stoull(hole.text().get()) * 1024;
    CHECK(window >= 2 * bars);
    CHECK(std::has_single_bit(window));
    CHECK(window < 4 * bars + (32ULL << 30));  // no more than the rounding needs
    // On QEMU's command line: libvirt reserves opt/ovmf/ names in <sysinfo type='fwcfg'>.
    const auto args = r.domain->child("domain").child("qemu:commandline");
    CHECK_FALSE(r.domain->child("domain").child("sysinfo"));
    if (r.c.shape.firmware == vmtemplates::Firmware::efi) {
      REQUIRE(args);
      CHECK(std::string(args.first_child().attribute("value").value()) == "-fw_cfg");
      CHECK(std::string(args.last_child().attribute("value").value()) ==
            "name=opt/ovmf/X-PciMmio64Mb,string=" + std::to_string(window >> 20));
    }
  }
  // 8 x (128 GiB + 32 MiB) of A100 BARs plus 1 MiB per VF: 4 TiB.
  const auto r = rendered("vela1-8gpu");
  const auto root = devices(r).find_child_by_attribute("controller", "model", "pcie-root");
  CHECK(std::stoull(root.child("pcihole64").text().get()) == (4ULL << 40) / 1024);
}

// QEMU 7.2 takes 2_5, 5, 8 and 16 GT/s and widths 1, 2, 4, 8, 12, 16 and 32 (qapi/common.json).
TEST_CASE("every root port reports the host link into what it leads to, capped at what QEMU 7.2 can show") {
  for (const auto& name : device_cases()) {
    CAPTURE(name);
    auto r = rendered(name);
    const auto domain = r.domain->child("domain");
    std::map<std::string, std::pair<std::string, std::string>> links;  // alias -> x-speed, x-width
    for (const auto& x : r.domain->select_nodes("/domain/qemu:override/qemu:device")) {
      for (const auto property : x.node().child("qemu:frontend").children("qemu:property")) {
        const std::string key = property.attribute("name").value();
        auto& link = links[x.node().attribute("alias").value()];
        if (key == "x-speed") link.first = property.attribute("value").value();
        if (key == "x-width") link.second = property.attribute("value").value();
        if (key != "x-nv-gpudirect-clique") CHECK(std::string(property.attribute("type").value()) == "string");
      }
    }
    int ports = 0;
    for (const auto c : devices(r).children("controller")) {
      if (std::string(c.attribute("model").value()) != "pcie-root-port") continue;
      ++ports;
      const std::string alias = c.child("alias").attribute("name").value();
      CAPTURE(alias);
      REQUIRE(links.count(alias) == 1);
      CHECK((links[alias].first == "16" || links[alias].first == "8" || links[alias].first == "5"));
      const int width = std::stoi(links[alias].second);
      CHECK((width == 1 || width == 2 || width == 4 || width == 8 || width == 16));
    }
    CHECK(ports > 0);
    CHECK(std::string(domain.attribute("xmlns:qemu").value()) == "http://libvirt.org/schemas/domain/qemu/1.0");
  }
}

TEST_CASE("a Gen5 x16 GPU's root port shows 16 GT/s x16 (capped), a Gen4 x16 one 16 GT/s x16") {
  for (const auto& [case_name, capped] : {std::pair{"vela2-8gpu", true}, std::pair{"vela1-8gpu", false}}) {
    const std::string name = case_name;  // clang cannot capture a structured binding in CAPTURE's lambda
    CAPTURE(name);
    auto r = rendered(name);
    const auto overrides = r.domain->child("domain").child("qemu:override");
    bool comment = false;
    for (const auto node : overrides.children()) {
      if (node.type() == pugi::node_comment && std::string(node.value()).find("capped") != std::string::npos) {
        comment = true;
      }
    }
    CHECK(comment == capped);
  }
}

TEST_CASE("x-nv-gpudirect-clique on every NVIDIA GPU when peer-to-peer is on, and nowhere when it is off") {
  for (const auto& name : device_cases()) {
    CAPTURE(name);
    auto r = rendered(name);
    const auto domain = r.domain->child("domain");
    std::map<std::string, int> cliques;
    for (const auto& x : r.domain->select_nodes("/domain/qemu:override/qemu:device")) {
      const auto property = x.node().child("qemu:frontend").child("qemu:property");
      if (std::string(property.attribute("name").value()) != "x-nv-gpudirect-clique") continue;
      CHECK(std::string(x.node().attribute("alias").value()).starts_with("ua-gpu"));
      CHECK(std::string(property.attribute("type").value()) == "unsigned");
      cliques[x.node().attribute("alias").value()] = property.attribute("value").as_int();
    }
    if (!r.c.shape.peer_to_peer) {
      CHECK(cliques.empty());
      continue;
    }
    CHECK(std::string(domain.attribute("xmlns:qemu").value()) == "http://libvirt.org/schemas/domain/qemu/1.0");
    REQUIRE(cliques.size() == r.c.placement.gpus.size());
    for (std::size_t i = 0; i < r.c.placement.gpus.size(); ++i) {
      CHECK(cliques.at("ua-gpu" + std::to_string(i)) == r.c.placement.gpus[i].clique);
    }
  }
}

TEST_CASE(
    "NCCL topology: a cpu per cell with its vCPUs' cpumap, switches with GPUs and NICs, NICs bare without names") {
  const auto r = rendered("vela1-gx2-80x1280x8a100");
  const auto system = r.nccl->child("system");
  CHECK(system.attribute("version").as_int() == 1);
  CHECK(r.guest.nccl_topology_xml.find("<?xml") == std::string::npos);
  CHECK(r.guest.nccl_topology_xml.find("/>") == std::string::npos);
  std::vector<std::string> affinities;
  for (const auto& cpu : system.children("cpu")) affinities.push_back(cpu.attribute("affinity").value());
  // 80 vCPUs: cell 0 holds vCPUs 0-39, cell 1 vCPUs 40-79.
  CHECK(affinities == std::vector<std::string>{"0000,000000ff,ffffffff", "ffff,ffffff00,00000000"});
  int switches = 0;
  for (const auto& cpu : system.children("cpu")) {
    for (const auto& sw : cpu.children("pci")) {
      CHECK(std::string(sw.attribute("class").value()) == "0x060400");
      CHECK(std::string(sw.attribute("link_speed").value()) == "16 GT/s");
      CHECK(sw.attribute("link_width").as_int() == 16);
      int gpus = 0, nics = 0;
      for (const auto& dev : sw.children("pci")) {
        gpus += std::string(dev.attribute("class").value()) == "0x030200";
        nics += std::string(dev.attribute("class").value()).starts_with("0x02");
      }
      CHECK(gpus == 2);  // vela1 pairs 2 A100 with one ConnectX-6 Dx per switch
      CHECK(nics >= 2);
      ++switches;
    }
  }
  CHECK(switches == 4);
  // Without the host's RDMA reading no name is known: each NIC's <pci> is bare, for NCCL to fill
  // from the device it finds at that bus id, which is device 0, function 0 of its bus.
  int bare = 0;
  for (const auto& x : r.nccl->select_nodes("//pci[starts-with(@class, '0x02')]")) {
    CHECK_FALSE(x.node().child("nic"));
    const auto busid = pci(x.node().attribute("busid").value());
    CHECK(busid.device == 0);
    CHECK(busid.function == 0);
    ++bare;
  }
  CHECK(bare == 10);  // 8 GPU VFs and 2 front-end VFs
  CHECK(r.guest.nccl_topology_xml.find("mlx5_") == std::string::npos);
}

TEST_CASE("NCCL topology: a NIC whose RDMA side the host read gets rdma-core's guest name and its node GUID") {
  auto c = make_case("vela2-2gpu");
  const auto vfs = all_vfs(c.placement);
  REQUIRE(vfs.size() >= 2);
  c.opts.nic_rdma[vfs[0].address] = NicRdma{"0c42:a103:0012:3456", 3, "Ethernet"};
  c.opts.nic_rdma[vfs[1].address] = NicRdma{"0c42:a103:0012:3457", std::nullopt, "InfiniBand"};
  const auto guest = render_ok(c.host->model, c.shape, c.placement, c.opts);
  const auto nccl = parse(guest.nccl_topology_xml);
  std::map<std::string, std::string> guids, names;  // guest busid -> guid, name
  for (const auto& x : nccl->select_nodes("//pci[nic]")) {
    const auto net = x.node().child("nic").child("net");
    CHECK(std::string(net.attribute("gdr").value()) == "1");
    guids[x.node().attribute("busid").value()] = net.attribute("guid").value();
    names[x.node().attribute("busid").value()] = net.attribute("name").value();
  }
  std::map<std::string, std::string> expected_guids, expected_names;
  for (const auto& a : guest.addresses) {
    // rdma-core's NAME_FALLBACK by PCI location, bus and slot in decimal: 0000:44:00.0 is p68s0.
    const std::string where = "p" + std::to_string(a.guest.bus) + "s0";
    if (a.host == vfs[0].address) {
      expected_guids[a.guest.to_string()] = "0x0c42a10300123456";
      expected_names[a.guest.to_string()] = "roce" + where;
    }
    if (a.host == vfs[1].address) {
      expected_guids[a.guest.to_string()] = "0x0c42a10300123457";
      expected_names[a.guest.to_string()] = "ib" + where;
    }
  }
  CHECK(guids == expected_guids);
  CHECK(names == expected_names);
  // The GID index goes to nccl.conf, and only when every NIC's is known and the same.
  CHECK(guest.nccl_conf.find("NCCL_IB_GID_INDEX") == std::string::npos);
  c.opts.nic_rdma[vfs[1].address] = NicRdma{"0c42:a103:0012:3457", 3, "Ethernet"};
  const auto same = render_ok(c.host->model, c.shape, c.placement, c.opts);
  CHECK(same.nccl_conf ==
        "# Written by hostagent at the VM's first boot (cloud-init vendor data).\n"
        "NCCL_TOPO_FILE=/etc/nccl/hostagent-topology.xml\n"
        "NCCL_IB_PCI_RELAXED_ORDERING=1\n"
        "NCCL_IB_GID_INDEX=3\n");
  c.opts.nic_rdma[vfs[1].address].roce_v2_gid_index = 2;
  CHECK(render_ok(c.host->model, c.shape, c.placement, c.opts).nccl_conf.find("GID") == std::string::npos);
  CHECK(rendered("vela1-nodevice").guest.nccl_conf.empty());
  // Without the host's reading, no guid: the golden files stay as they were.
  const auto plain = rendered("vela2-2gpu");
  CHECK(plain.guest.nccl_topology_xml.find("guid=") == std::string::npos);

  c.opts.nic_rdma[vfs[0].address].node_guid = "0c42a10300123456";
  const auto refused = render_guest(c.host->model, c.shape, c.placement, c.opts);
  REQUIRE_FALSE(refused.ok());
  CHECK(refused.error().message.find("\"0c42a10300123456\"") != std::string::npos);
  CHECK(refused.error().message.find(vfs[0].address.to_string()) != std::string::npos);
}

}  // namespace
}  // namespace hostagent::render::testing
