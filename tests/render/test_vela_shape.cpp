// IBM Cloud's gx2-80x1280x8a100 shape on the vela1 host: the domain must carry the structure of Vela's
// reference guest (shared/data/vela/sample-optimized-a100-vm-q35.xml): an expander bus per NUMA node,
// switches pairing GPUs with NICs, strict per-node memory, pinned vCPUs, 1 GiB pages.
#include <doctest/doctest.h>

#include <set>

#include "render_fixture.hpp"

namespace hostagent::render::testing {
namespace {

std::map<int, pugi::xml_node> controllers_by_index(const pugi::xml_node& devices) {
  std::map<int, pugi::xml_node> out;
  for (const auto& c : devices.children("controller")) {
    if (std::string(c.attribute("type").value()) == "pci") out[c.attribute("index").as_int()] = c;
  }
  return out;
}

std::string model_of(const std::map<int, pugi::xml_node>& ctls, const pugi::xml_node& node) {
  const auto it = ctls.find(node.child("address").attribute("bus").as_int(-1));
  return it == ctls.end() ? "" : it->second.attribute("model").value();
}

bool all_vcpus_pinned(const pugi::xml_node& domain) {
  std::set<int> pinned;
  for (const auto& pin : domain.child("cputune").children("vcpupin")) pinned.insert(pin.attribute("vcpu").as_int());
  return static_cast<int>(pinned.size()) == domain.child("vcpu").text().as_int();
}

bool strict_memnode_per_cell(const pugi::xml_node& domain) {
  std::set<int> strict;
  for (const auto& m : domain.child("numatune").children("memnode")) {
    if (std::string(m.attribute("mode").value()) == "strict") strict.insert(m.attribute("cellid").as_int());
  }
  std::set<int> cells;
  for (const auto& cell : domain.child("cpu").child("numa").children("cell"))
    cells.insert(cell.attribute("id").as_int());
  return !cells.empty() && strict == cells;
}

bool pxb_per_cell(const pugi::xml_node& domain, const std::map<int, pugi::xml_node>& ctls) {
  std::set<int> nodes, cells;
  for (const auto& [index, c] : ctls) {
    if (std::string(c.child("model").attribute("name").value()) == "pxb-pcie") {
      nodes.insert(c.child("target").child("node").text().as_int(-1));
    }
  }
  for (const auto& cell : domain.child("cpu").child("numa").children("cell"))
    cells.insert(cell.attribute("id").as_int());
  return !cells.empty() && nodes == cells;
}

// The structural features of a GPU guest, as named properties, for comparing two domains.
std::set<std::string> structure(const pugi::xml_document& doc) {
  const auto domain = doc.child("domain");
  const auto devices = domain.child("devices");
  const auto ctls = controllers_by_index(devices);
  std::set<std::string> out;
  if (all_vcpus_pinned(domain)) out.insert("every vCPU pinned");
  if (std::string(domain.child("numatune").child("memory").attribute("mode").value()) == "strict") {
    out.insert("strict numatune");
  }
  if (strict_memnode_per_cell(domain)) out.insert("strict memnode per guest cell");
  const auto page = domain.child("memoryBacking").child("hugepages").child("page");
  if (attr_u64(page, "size") == 1048576 && std::string(page.attribute("unit").value()) == "KiB") {
    out.insert("1 GiB hugepages");
  }
  if (pxb_per_cell(domain, ctls)) out.insert("pxb-pcie per guest NUMA cell");
  for (const auto& [index, c] : ctls) {
    const std::string model = c.attribute("model").value();
    if (model == "pcie-root-port" && model_of(ctls, c) == "pcie-expander-bus") out.insert("root ports on pxb-pcie");
    if (model == "pcie-switch-upstream-port" && model_of(ctls, c) == "pcie-root-port") {
      out.insert("switch upstream ports on root ports");
    }
  }
  for (const auto& hostdev : devices.children("hostdev")) {
    if (model_of(ctls, hostdev) == "pcie-switch-downstream-port") out.insert("hostdevs on switch downstream ports");
    if (std::string(hostdev.child("driver").attribute("name").value()) == "vfio") out.insert("vfio hostdevs");
  }
  if (std::string(devices.child("memballoon").attribute("model").value()) == "none") out.insert("no memballoon");
  return out;
}

TEST_CASE("gx2-80x1280x8a100 on vela1: pxb per node, GPU/NIC switches, strict memnodes, pinned vCPUs, 1 GiB pages") {
  const auto c = make_case("vela1-gx2-80x1280x8a100");
  const auto guest = render_ok(c.host->model, c.shape, c.placement, c.opts);
  const auto doc = parse(guest.domain_xml);
  const auto domain = doc->child("domain");
  const auto ctls = controllers_by_index(domain.child("devices"));

  CHECK(domain.child("vcpu").text().as_int() == 80);
  const auto topology = domain.child("cpu").child("topology");
  CHECK(topology.attribute("sockets").as_int() == 2);
  CHECK(topology.attribute("cores").as_int() == 20);
  CHECK(topology.attribute("threads").as_int() == 2);
  CHECK(std::stoull(domain.child("memory").text().get()) == 1280ULL * 1024 * 1024);  // KiB

  const auto view = guest_view(*doc);
  std::map<int, std::pair<int, int>> per_switch;  // upstream controller -> (GPUs, NIC VFs)
  for (const auto& a : guest.addresses) {
    const int up = view.upstream.at(a.host);
    CHECK_MESSAGE(up >= 0, a.host.to_string() << " is not below an emulated switch");  // vela1: switches only
    if (a.role == "gpu") ++per_switch[up].first;
    if (a.role == "nic") ++per_switch[up].second;
  }
  REQUIRE(per_switch.size() == 4);
  for (const auto& [up, counts] : per_switch) {
    CHECK(counts.first == 2);
    CHECK(counts.second >= 2);  // each GPU's VF, plus a front-end VF on one switch per socket
    CHECK(std::string(ctls.at(up).child("model").attribute("name").value()) == "x3130-upstream");
  }
  const std::set<std::string> expected = {"every vCPU pinned",
                                          "strict numatune",
                                          "strict memnode per guest cell",
                                          "1 GiB hugepages",
                                          "pxb-pcie per guest NUMA cell",
                                          "root ports on pxb-pcie",
                                          "switch upstream ports on root ports",
                                          "hostdevs on switch downstream ports",
                                          "vfio hostdevs",
                                          "no memballoon"};
  CHECK(structure(*doc) == expected);
}

TEST_CASE("gx2-80x1280x8a100 has every structural feature of Vela's sample-optimized-a100-vm-q35.xml") {
  const auto data = reference_data_or_skip();
  if (!data) return;
  const auto sample = parse(read_text_file(*data / "vela" / "sample-optimized-a100-vm-q35.xml"));
  const auto c = make_case("vela1-gx2-80x1280x8a100");
  const auto ours = parse(render_ok(c.host->model, c.shape, c.placement, c.opts).domain_xml);
  const auto theirs = structure(*sample);
  const auto mine = structure(*ours);
  CHECK(theirs.size() >= 8);  // the comparison is meaningful only if the sample has them
  for (const auto& feature : theirs) CHECK_MESSAGE(mine.count(feature) == 1, "missing: " << feature);
}

}  // namespace
}  // namespace hostagent::render::testing
