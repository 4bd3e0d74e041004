// verify/guest_check: recorded consoles of real boots match; each rule, broken on purpose
// in a copy of a real view, is reported with the device and both sides' values.
#include <doctest/doctest.h>

#include <algorithm>
#include <pugixml.hpp>
#include <sstream>

#include "hostagent/common/sha256.hpp"
#include "hostagent/verify/guest_check.hpp"
#include "verify_fixture.hpp"

namespace hostagent::verify {
namespace {

struct Recorded {
  ctl::PlacedGuest placed;
  StandIn stand_in;
  GuestView view;

  GuestCheck check() const {
    return check_guest(CheckInputs{placed.host, placed.placement, placed.rendered, stand_in}, view);
  }
  GuestPciFunction& at(const std::string& role, int nth) {
    int seen = 0;
    for (const auto& a : placed.rendered.addresses) {
      if (a.role != role || seen++ != nth) continue;
      const auto it = std::find_if(view.functions.begin(), view.functions.end(),
                                   [&](const auto& f) { return f.address == a.guest; });
      REQUIRE(it != view.functions.end());
      return *it;
    }
    FAIL("no " << role << " " << nth);
    throw;
  }
};

// The stand-in as the recording's boot had it: the default options (1 vCPU, 256 MiB per cell).
Recorded recorded(const std::string& shape, const std::string& host) {
  Recorded r{testing::placed_guest(shape, host), {}, {}};
  auto stand_in = make_stand_in(r.placed.rendered.domain_xml, testing::stand_in_options());
  REQUIRE(stand_in.ok());
  r.stand_in = std::move(*stand_in);
  auto view = parse_guest_view(testing::recorded_console(host + "-" + shape));
  REQUIRE_MESSAGE(view.ok(), view.error().message);
  r.view = std::move(*view);
  return r;
}

bool has_finding(const GuestCheck& check, const std::string& part) {
  return std::any_of(check.findings.begin(), check.findings.end(),
                     [&](const std::string& f) { return f.find(part) != std::string::npos; });
}

std::string all_findings(const GuestCheck& check) {
  std::string out;
  for (const auto& f : check.findings) out += f + "\n";
  return out;
}

TEST_CASE("recorded boots of Vela-like hosts match their host, switch for switch") {
  struct Case {
    std::string shape, host;
    std::size_t devices;
  };
  for (const auto& c : {Case{"gx3-32x256x2h100", "vela2", 4}, Case{"gx2-80x1280x8a100", "vela1", 20},
                        Case{"gx3d-h200-8x4ib", "h200ib", 20}}) {
    CAPTURE(c.shape);
    const auto r = recorded(c.shape, c.host);
    const auto check = r.check();
    CHECK_MESSAGE(check.ok(), all_findings(check));
    CHECK(check.devices.size() == c.devices);
    CHECK(check.guest.relation == check.host.relation);
    const auto& row = check.host.relation.front();  // GPU0
    CHECK(std::count(row.begin(), row.end(), numa::Affinity::pix) >= 1);
    CHECK(std::count(row.begin(), row.end(), numa::Affinity::node) >= 1);  // another root complex of its node
    const auto matrices = format_matrices(check);
    for (const char* marked : {"PIX*", "PXB*", "PHB*", "NODE*", "SYS*", "?*"}) {
      CHECK(matrices.find(marked) == std::string::npos);
    }
  }
}

TEST_CASE("a NIC that is not under its GPU's switch in the guest is a difference") {
  auto r = recorded("gx3-32x256x2h100", "vela2");
  // NIC0 moved under GPU1's switch: the guest then pairs it with the wrong GPU.
  r.at("nic", 0).bridges = r.at("gpu", 1).bridges;
  r.at("nic", 0).root_bus = r.at("gpu", 1).root_bus;
  auto check = r.check();
  CHECK(
      has_finding(check, "GPU0 and NIC0 (host 0000:18:00.0 and 0000:19:00.1): the host has them PIX, the guest NODE"));
  CHECK(
      has_finding(check, "GPU1 and NIC0 (host 0000:29:00.0 and 0000:19:00.1): the host has them NODE, the guest PIX"));
  CHECK(format_matrices(check).find("NODE*") != std::string::npos);
  // On GPU0's expander bus still, but on a root port of its own: one host bridge, no switch.
  r.at("nic", 0).bridges = {r.at("nic", 0).bridges.front()};
  r.at("nic", 0).root_bus = r.at("gpu", 0).root_bus;
  check = r.check();
  CHECK(has_finding(check, "GPU0 and NIC0 (host 0000:18:00.0 and 0000:19:00.1): the host has them PIX, the guest PHB"));
}

TEST_CASE("a device on the wrong guest node, missing, or not the stand-in is a difference") {
  auto r = recorded("gx2-80x1280x8a100", "vela1");
  r.at("gpu", 0).numa_node = 1;
  CHECK(has_finding(r.check(), "the guest puts it on NUMA node 1, its cell is 0"));
  r.at("gpu", 0).numa_node = 0;
  r.at("nvme", 0).vendor = 0x8086;
  CHECK(has_finding(r.check(), ": the guest has 8086:"));
  const auto gone = r.at("nvme", 1).address;
  r.view.functions.erase(
      std::find_if(r.view.functions.begin(), r.view.functions.end(), [&](const auto& f) { return f.address == gone; }));
  const auto check = r.check();
  CHECK(has_finding(check, "the guest has no PCI function at " + gone.to_string()));
  CHECK(has_finding(check, "stand-in devices, the stand-in domain"));
}

TEST_CASE("the 8-GPU shape's NVSwitches are checked like its GPUs: present, on their cell, under their switch") {
  auto r = recorded("gx2-80x1280x8a100", "vela1");
  const auto check = r.check();
  const auto nvswitches = std::count_if(check.devices.begin(), check.devices.end(),
                                        [](const MatrixDevice& d) { return d.label.starts_with("NVSW"); });
  CHECK(nvswitches == 6);
  // Out from under their emulated switch: they no longer share it with each other, as on the host.
  r.at("nvswitch", 0).bridges.clear();
  CHECK(has_finding(r.check(), "NVSW0"));
  const auto gone = r.at("nvswitch", 5).address;
  r.view.functions.erase(
      std::find_if(r.view.functions.begin(), r.view.functions.end(), [&](const auto& f) { return f.address == gone; }));
  CHECK(
      has_finding(r.check(), "nvswitch 0000:08:00.0 (guest " + gone.to_string() + "): the guest has no PCI function"));
}

TEST_CASE("the guest's nodes must be the stand-in's cells with their CPUs and memory") {
  auto r = recorded("gx2-80x1280x8a100", "vela1");
  r.view.nodes[1].cpus = {1, 2};
  r.view.nodes[0].mem_kib = 1024;
  auto check = r.check();
  CHECK(has_finding(check, "guest NUMA node 1 has CPUs 1-2, its cell 1"));
  CHECK(has_finding(check, "guest NUMA node 0 manages 1024 KiB of its cell's 262144 KiB"));
  r.view.nodes.pop_back();
  check = r.check();
  CHECK(has_finding(check, "the guest has 1 NUMA nodes, the stand-in 2 cells"));
  CHECK(has_finding(check, "guest NUMA node 1 is missing"));
}

TEST_CASE("the rendered cells must hold the placed vCPUs, pinned on their host node, and the placed memory") {
  auto r = recorded("gx3-32x256x2h100", "vela2");
  const auto& cell = r.placed.placement.cells.front();
  const auto elsewhere = std::find_if(r.placed.host.cpus.begin(), r.placed.host.cpus.end(),
                                      [&](const numa::Cpu& c) { return c.numa_node != cell.host_node; });
  REQUIRE(elsewhere != r.placed.host.cpus.end());
  pugi::xml_document doc;
  REQUIRE(doc.load_string(r.placed.rendered.domain_xml.c_str()));
  const auto domain = doc.child("domain");
  domain.child("cputune").find_child_by_attribute("vcpupin", "vcpu", "0").attribute("cpuset").set_value(elsewhere->id);
  domain.child("cpu").child("numa").child("cell").attribute("memory").set_value("1024");
  std::ostringstream xml;
  doc.save(xml);
  r.placed.rendered.domain_xml = xml.str();
  const auto check = r.check();
  CHECK(has_finding(check, "rendered cell 0: vCPU 0 is pinned to host CPU " + std::to_string(elsewhere->id) +
                               ", placed on " + std::to_string(cell.host_cpus.front()) + " of host node " +
                               std::to_string(cell.host_node)));
  CHECK(has_finding(check, "rendered cell 0 has 1024 KiB, placed " + std::to_string(cell.memory_bytes / 1024)));
}

TEST_CASE("every NCCL topology bus ID must be the guest's, a bridge where the file nests devices") {
  auto r = recorded("gx3-32x256x2h100", "vela2");
  const auto gpu0 = r.at("gpu", 0).address.to_string();
  auto& xml = r.placed.rendered.nccl_topology_xml;
  xml.replace(xml.find(gpu0), gpu0.size(), "0000:77:00.0");
  const auto& upstream = r.at("gpu", 1).bridges[1];  // root port, upstream port, downstream port
  std::find_if(r.view.functions.begin(), r.view.functions.end(), [&](const auto& f) {
    return f.address == upstream;
  })->class_code = 0x00ff00;
  const auto check = r.check();
  CHECK(has_finding(check, "NCCL topology busid 0000:77:00.0: the guest has no such PCI function"));
  CHECK(has_finding(check, "gpu 0000:18:00.0 (guest " + gpu0 + "): not in the NCCL topology file"));
  CHECK(has_finding(check, "NCCL topology busid " + upstream.to_string() +
                               ": the file nests devices under it, the guest has no bridge there"));
}

TEST_CASE("guest distances must be the host's between the cells' nodes") {
  auto r = recorded("gx2-80x1280x8a100", "vela1");
  REQUIRE(r.view.nodes.size() == 2);
  CHECK(r.view.nodes[0].distances == std::vector<int>{10, 21});  // vela1's SLIT
  r.view.nodes[0].distances = {10, 20};
  auto check = r.check();
  CHECK(has_finding(check, "guest NUMA node 0 is 20 from node 1; the host's nodes 0 and 1 are 21 apart"));
  r.view.nodes[1].distances.clear();
  check = r.check();
  CHECK(has_finding(check, "guest NUMA node 1 shows 0 distances, the guest has 2 cells"));
}

TEST_CASE(
    "a guest port narrower than the host's link is a note where the NCCL file states the host's, else a finding") {
  auto r = recorded("gx3-32x256x2h100", "vela2");
  auto check = r.check();
  CHECK(check.ok());
  REQUIRE(check.links.size() == 4);
  CHECK(check.links[0] ==
        "GPU0 0000:18:00.0: host 32 GT/s x16, guest ports 2.5 GT/s x1, NCCL file 32 GT/s x16 (corrects it)");
  CHECK(check.notes.size() == 4);
  // The file without GPU0's link: NCCL would read the guest's 2.5 GT/s x1.
  auto& xml = r.placed.rendered.nccl_topology_xml;
  const auto gpu0 = xml.find("busid=\"" + r.at("gpu", 0).address.to_string() + "\"");
  REQUIRE(gpu0 != std::string::npos);
  const auto width = xml.find("link_width=\"16\"", gpu0);
  xml.replace(width, std::string("link_width=\"16\"").size(), "link_width=\"8\"");
  r.view.delivered["/etc/nccl/hostagent-topology.xml"] = sha256_hex(xml);  // as if delivered so
  check = r.check();
  CHECK(has_finding(check,
                    "GPU0 (host 0000:18:00.0): the guest's ports show 2.5 GT/s x1, the host's link is 32 GT/s "
                    "x16, and the NCCL topology file does not correct it"));
  CHECK(check.notes.size() == 3);
  // Ports as wide as the host's: nothing to correct.
  for (auto& f : r.view.functions) {
    if (f.max_link) f.max_link = GuestLink{32.0, 16};
  }
  check = r.check();
  CHECK(check.ok());
  CHECK(check.notes.empty());
  CHECK(check.links[0] == "GPU0 0000:18:00.0: host 32 GT/s x16, guest ports 32 GT/s x16");
}

TEST_CASE("two switch levels: the guest keeps PIX under the leaf and PXB through the top, or it is a difference") {
  auto r = recorded("gx3d-h200-8x4ib", "h200ib");
  auto check = r.check();
  REQUIRE_MESSAGE(check.ok(), all_findings(check));
  const auto& host = check.host;
  const auto index = [&](const std::string& label) {
    return static_cast<std::size_t>(std::find(host.labels.begin(), host.labels.end(), label) - host.labels.begin());
  };
  // GPU0 is its stack's top GPU, GPU1 the leaf GPU beside NIC0 (simhost h200ib).
  CHECK(host.relation[index("GPU1")][index("NIC0")] == numa::Affinity::pix);
  CHECK(host.relation[index("GPU0")][index("NIC0")] == numa::Affinity::pxb);
  CHECK(check.guest.relation == host.relation);
  // NIC0 moved up beside GPU0, onto the top switch: the leaf's PIX becomes PXB and the top's PXB PIX.
  r.at("nic", 0).bridges = r.at("gpu", 0).bridges;
  check = r.check();
  CHECK(has_finding(check, "GPU0 and NIC0 (host 0000:18:00.0 and 0000:1b:00.0): the host has them PXB, the guest PIX"));
  CHECK(has_finding(check, "GPU1 and NIC0 (host 0000:1c:00.0 and 0000:1b:00.0): the host has them PIX, the guest PXB"));
}

TEST_CASE("the seed's vendor-data must put the rendered files in the guest, byte for byte, and no other") {
  auto r = recorded("gx3-32x256x2h100", "vela2");
  REQUIRE(r.view.seed == std::optional<std::string>("mounted vendor_data=ok"));
  // Two of Vela-2's eight GPUs without its NVSwitches: the NCCL files and the nvidia module's options.
  REQUIRE(r.view.delivered.size() == 3);
  auto check = r.check();
  CHECK(check.ok());
  CHECK(std::count(check.held.begin(), check.held.end(),
                   "the guest's nvidia module options (/etc/modprobe.d/hostagent-nvidia.conf): NVreg_NvLinkDisable=1, "
                   "as rendered") == 1);
  // A file the render did not name is a finding: here the options, as if the VM trained its fabric.
  auto trained = r;
  trained.placed.rendered.nvidia_options.clear();
  check = trained.check();
  CHECK(has_finding(check,
                    "the seed put /etc/modprobe.d/hostagent-nvidia.conf in the guest, which the render did not name"));
  CHECK(std::none_of(check.held.begin(), check.held.end(),
                     [](const std::string& line) { return line.find("nvidia module options") != std::string::npos; }));
  r.view.delivered["/etc/nccl.conf"] = std::string(64, '0');
  CHECK(
      has_finding(r.check(), "/etc/nccl.conf in the guest is not the rendered file (SHA-256 " + std::string(64, '0')));
  r.view.delivered.erase("/etc/nccl/hostagent-topology.xml");
  CHECK(has_finding(r.check(), "the seed did not put /etc/nccl/hostagent-topology.xml in the guest"));
  r.view.seed = "none reason=no-cdrom";
  CHECK(has_finding(r.check(), "the guest's seed: none reason=no-cdrom; its files were not delivered"));
  // A probe without the kernel's modules for the CD-ROM cannot read it: a note saying why, no finding.
  r.view.seed.reset();
  const auto unread =
      check_guest(CheckInputs{r.placed.host, r.placed.placement, r.placed.rendered, r.stand_in, "no isofs.ko"}, r.view);
  CHECK(unread.ok());
  CHECK(std::count(unread.notes.begin(), unread.notes.end(),
                   "the delivered NCCL files were not read in the guest: no isofs.ko") == 1);
}

// The recorded Vela-2 boot: OVMF put its 512 GiB aperture at 0x80_0000_0000, bus 0's and the
// expander buses' windows carved from it.
TEST_CASE("the guest's host bridge windows above 4 GiB must span pcie-root's 64-bit hole") {
  auto r = recorded("gx3-32x256x2h100", "vela2");
  REQUIRE(r.stand_in.ties.pcihole64_bytes == 512ULL << 30);
  // The seed's nvidia options line comes first (two of Vela-2's GPUs, no NVSwitch: see above).
  const std::string options =
      "the guest's nvidia module options (/etc/modprobe.d/hostagent-nvidia.conf): NVreg_NvLinkDisable=1, as rendered";
  auto check = r.check();
  CHECK(check.ok());
  CHECK(check.held == std::vector<std::string>{options,
                                               "64-bit PCI hole: the guest's windows span 512 GiB "
                                               "(0x8000000000-0xffffffffff), pcihole64 512 GiB"});
  const auto windows = r.view.windows;
  r.view.windows.pop_back();  // bus 0's: the rest ends at 0x80004fffff
  CHECK(has_finding(r.check(), "the guest's 64-bit PCI windows span 0 GiB, pcie-root's 64-bit hole is 512 GiB"));
  std::erase_if(r.view.windows, [](const GuestWindow& w) { return w.start >= (1ULL << 32); });
  CHECK(has_finding(r.check(), "the guest's host bridges have no memory window above 4 GiB"));
  r.view.windows = windows;
  r.stand_in.ties.pcihole64_bytes = 0;  // a stand-in with no hole to hold
  check = r.check();
  CHECK(check.ok());
  CHECK(check.held == std::vector<std::string>{options});
}

// The recorded Vela-1 boot, with its NVSwitches moved on the host to a node of their own that gets
// no guest cell (as on a Sub-NUMA-Clustering board): the guest has them in cell 0 with the GPUs of
// host node 0, which is what the cell mapping gives; NODE there, where the host has SYS, is no
// difference. A mapping that gives another cell is.
TEST_CASE("a device whose node has no guest cell is held to the nearest cell, and listed as mapped") {
  auto r = recorded("gx2-80x1280x8a100", "vela1");
  auto& nodes = r.placed.host.numa_nodes;
  REQUIRE(nodes.size() == 2);
  numa::NumaNode snc;
  snc.id = 2;
  snc.cpus = {1000};
  snc.distances = {{0, 12}, {1, 21}, {2, 10}};
  nodes[0].distances[2] = 12;
  nodes[1].distances[2] = 21;
  nodes.push_back(snc);
  int moved = 0;
  for (auto& f : r.placed.host.pci_devices) {
    const bool nvswitch = std::any_of(r.placed.placement.nvswitches.begin(), r.placed.placement.nvswitches.end(),
                                      [&](const numa::PlacedDevice& d) { return d.address == f.address; });
    if (!nvswitch) continue;
    f.numa_node = 2;
    ++moved;
  }
  REQUIRE(moved == 6);
  auto check = r.check();
  CHECK_MESSAGE(check.ok(), all_findings(check));
  REQUIRE(check.mapped.size() == 6);
  CHECK(check.mapped[0].find(": on host node 2, which has no guest cell: in cell 0 (host node 0), the nearest") !=
        std::string::npos);
  // The host has a GPU of node 0 and an NVSwitch SYS; the guest and the mapping NODE.
  const auto gpu0 = std::find(check.host.labels.begin(), check.host.labels.end(), "GPU0") - check.host.labels.begin();
  const auto nvsw0 = std::find(check.host.labels.begin(), check.host.labels.end(), "NVSW0") - check.host.labels.begin();
  CHECK(check.host.relation[gpu0][nvsw0] == numa::Affinity::sys);
  CHECK(check.expected.relation[gpu0][nvsw0] == numa::Affinity::node);
  CHECK(check.guest.relation[gpu0][nvsw0] == numa::Affinity::node);

  // Node 2 nearer node 1: the mapping gives cell 1, the guest has cell 0.
  r.placed.host.numa_nodes[2].distances = {{0, 21}, {1, 12}, {2, 10}};
  check = r.check();
  CHECK(has_finding(check, "where the cell mapping puts it in cell 1"));
  CHECK(
      has_finding(check, "GPU0 and NVSW0 (host 0000:19:00.0 and 0000:03:00.0): the host has them SYS, the guest NODE"));
}

}  // namespace
}  // namespace hostagent::verify
