// verify/guest_check: the rules of the header, one function each.
#include "hostagent/verify/guest_check.hpp"

#include <pugixml.hpp>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <optional>
#include <set>

#include "hostagent/common/sha256.hpp"
#include "hostagent/common/sysfs_root.hpp"

namespace hostagent::verify {
namespace {

using numa::Affinity;

std::string hex4(uint16_t value) {
  char text[8];
  std::snprintf(text, sizeof text, "%04x", value);
  return text;
}

std::string node_text(const std::optional<int>& node) {
  return node ? std::to_string(*node) : std::string("none");
}

class Checker {
 public:
  Checker(const CheckInputs& in, const GuestView& view) : in_(in), view_(view) {}

  GuestCheck run() {
    check_devices();
    check_matrices();
    check_guest_nodes();
    check_rendered_cells();
    check_nccl_topology();
    check_distances();
    check_links();
    check_delivered();
    check_hole64();
    return std::move(out_);
  }

 private:
  void finding(std::string what) { out_.findings.push_back(std::move(what)); }
  void note(std::string what) { out_.notes.push_back(std::move(what)); }

  static std::string describe(const render::GuestDeviceAddress& a) {
    return a.role + " " + a.host.to_string() + " (guest " + a.guest.to_string() + ")";
  }

  // Each rendered device: its stand-in at its guest address, on its cell's node, which mirrors the
  // host node of the device; and no stand-in elsewhere.
  void check_devices() {
    const auto in_guest = std::count_if(view_.functions.begin(), view_.functions.end(),
                                        [](const auto& f) { return is_stand_in_id(f.vendor, f.device); });
    if (static_cast<std::size_t>(in_guest) != in_.stand_in.devices.size()) {
      finding("the guest has " + std::to_string(in_guest) + " stand-in devices, the stand-in domain " +
              std::to_string(in_.stand_in.devices.size()));
    }
    for (const auto& a : in_.rendered.addresses) {
      const auto* f = view_.find(a.guest);
      if (f == nullptr) {
        finding(describe(a) + ": the guest has no PCI function at " + a.guest.to_string());
        continue;
      }
      if (!is_stand_in_id(f->vendor, f->device)) {
        finding(describe(a) + ": the guest has " + hex4(f->vendor) + ":" + hex4(f->device) +
                " there, not the stand-in (virtio-rng)");
      }
      if (f->numa_node != a.guest_cell) {
        finding(describe(a) + ": the guest puts it on NUMA node " + node_text(f->numa_node) + ", its cell is " +
                std::to_string(a.guest_cell));
      }
      check_host_node(a);
    }
  }

  void check_host_node(const render::GuestDeviceAddress& a) {
    const auto* host = in_.host.find(a.host);
    if (host == nullptr || a.guest_cell < 0 || static_cast<std::size_t>(a.guest_cell) >= in_.placement.cells.size()) {
      finding(describe(a) + ": not a device of the host, or its cell is not placed");
      return;
    }
    // The one mapping (numa::guest_cell_for): the cell of its node, or the nearest.
    const int expected = numa::guest_cell_for(in_.host, in_.placement.cells, host->numa_node);
    const int mirrored = in_.placement.cells[static_cast<std::size_t>(a.guest_cell)].host_node;
    const std::string node = host->numa_node ? std::to_string(*host->numa_node) : std::string("unknown");
    if (a.guest_cell != expected) {
      finding(describe(a) + ": on host NUMA node " + node + ", but in guest cell " + std::to_string(a.guest_cell) +
              " (host node " + std::to_string(mirrored) + "), where the cell mapping puts it in cell " +
              std::to_string(expected));
    } else if (host->numa_node && *host->numa_node != mirrored) {
      out_.mapped.push_back(describe(a) + ": on host node " + node + ", which has no guest cell: in cell " +
                            std::to_string(a.guest_cell) + " (host node " + std::to_string(mirrored) +
                            "), the nearest");
    }
  }

  static int role_rank(const std::string& role) {
    return role == "gpu" ? 0 : role == "nic" ? 1 : role == "nvme" ? 2 : 3;
  }

  std::vector<const render::GuestDeviceAddress*> matrix_rows() const {
    std::vector<const render::GuestDeviceAddress*> rows;
    for (const auto& a : in_.rendered.addresses) {
      if (a.role == "gpu" || a.role == "nic" || a.role == "nvme" || a.role == "nvswitch") rows.push_back(&a);
    }
    std::sort(rows.begin(), rows.end(), [](const auto* x, const auto* y) {
      return std::pair(role_rank(x->role), x->host) < std::pair(role_rank(y->role), y->host);
    });
    return rows;
  }

  // The guest's sysfs path names every bridge but not its kind. Below a root bus ports alternate: a
  // root port, then each switch's upstream and downstream port (an upstream port plugs only into a
  // root or downstream port), so the upstream ports are the chain's 2nd, 4th, ... bridges.
  static numa::PciReach guest_reach(const GuestPciFunction& f) {
    numa::PciReach out;
    out.address = f.address;
    out.numa_node = f.numa_node;
    out.root = numa::RootBus{f.root_domain, f.root_bus};
    for (std::size_t i = 1; i < f.bridges.size(); i += 2) out.switches.push_back(f.bridges[i]);
    std::reverse(out.switches.begin(), out.switches.end());
    return out;
  }

  static Affinity guest_affinity(const GuestPciFunction* a, const GuestPciFunction* b) {
    if (a == nullptr || b == nullptr) return Affinity::unknown;
    return numa::relate(guest_reach(*a), guest_reach(*b));
  }

  Affinity host_affinity(const PciAddress& a, const PciAddress& b) const {
    const auto* fa = in_.host.find(a);
    const auto* fb = in_.host.find(b);
    return fa != nullptr && fb != nullptr ? numa::affinity(in_.host, *fa, *fb) : Affinity::unknown;
  }

  // What the guest must show of a device: its host reach, on the node its guest cell mirrors. The
  // relations of these are the host's but where a device's node has no cell of its own: two devices
  // of different host nodes in one cell are NODE in the guest (one guest node, two expander buses).
  // The cell is the rule's (numa::guest_cell_for), not the rendered one: a wrong cell shows in the
  // matrix too.
  std::optional<numa::PciReach> expected_reach(const PciAddress& address) const {
    const auto* f = in_.host.find(address);
    if (f == nullptr) return std::nullopt;
    auto reach = numa::reach_of(in_.host, *f);
    const auto cell = numa::guest_cell_for(in_.host, in_.placement.cells, f->numa_node);
    reach.numa_node = cell >= 0 && static_cast<std::size_t>(cell) < in_.placement.cells.size()
                          ? std::optional<int>(in_.placement.cells[static_cast<std::size_t>(cell)].host_node)
                          : std::nullopt;
    return reach;
  }

  void check_matrices() {
    const auto rows = matrix_rows();
    std::map<std::string, int> per_role;
    for (const auto* a : rows) {
      std::string prefix = a->role == "gpu" ? "GPU" : a->role == "nic" ? "NIC" : a->role == "nvme" ? "NVME" : "NVSW";
      const std::string label = prefix + std::to_string(per_role[a->role]++);
      out_.devices.push_back(MatrixDevice{label, a->host, a->guest, a->guest_cell});
      out_.host.labels.push_back(label);
      out_.expected.labels.push_back(label);
      out_.guest.labels.push_back(label);
    }
    std::vector<std::optional<numa::PciReach>> expected_reaches;
    expected_reaches.reserve(rows.size());
    for (const auto* a : rows) expected_reaches.push_back(expected_reach(a->host));
    for (std::size_t i = 0; i < rows.size(); ++i) {
      out_.host.relation.emplace_back();
      out_.expected.relation.emplace_back();
      out_.guest.relation.emplace_back();
      for (std::size_t j = 0; j < rows.size(); ++j) {
        const auto host = host_affinity(rows[i]->host, rows[j]->host);
        const auto& ei = expected_reaches[i];
        const auto& ej = expected_reaches[j];
        const auto expected = ei && ej ? numa::relate(*ei, *ej) : Affinity::unknown;
        const auto guest = guest_affinity(view_.find(rows[i]->guest), view_.find(rows[j]->guest));
        out_.host.relation.back().push_back(host);
        out_.expected.relation.back().push_back(expected);
        out_.guest.relation.back().push_back(guest);
        if (j > i && expected != guest) {
          const std::string mapped =
              expected == host ? "" : std::string(" (") + numa::affinity_label(expected) + " in the guest's cells)";
          finding(out_.devices[i].label + " and " + out_.devices[j].label + " (host " + rows[i]->host.to_string() +
                  " and " + rows[j]->host.to_string() + "): the host has them " + numa::affinity_label(host) + mapped +
                  ", the guest " + numa::affinity_label(guest));
        }
      }
    }
  }

  // The guest's NUMA nodes are the stand-in's cells. MemTotal is what the kernel manages: less than
  // the cell by what firmware and the kernel itself keep (about a quarter of a small first cell).
  void check_guest_nodes() {
    if (view_.nodes.size() != in_.stand_in.cells.size()) {
      finding("the guest has " + std::to_string(view_.nodes.size()) + " NUMA nodes, the stand-in " +
              std::to_string(in_.stand_in.cells.size()) + " cells");
    }
    for (const auto& cell : in_.stand_in.cells) {
      const auto node =
          std::find_if(view_.nodes.begin(), view_.nodes.end(), [&](const GuestNode& n) { return n.id == cell.id; });
      const std::string name = "guest NUMA node " + std::to_string(cell.id);
      if (node == view_.nodes.end()) {
        finding(name + " is missing");
        continue;
      }
      if (node->cpus != cell.cpus) {
        finding(name + " has CPUs " + format_cpu_list(node->cpus) + ", its cell " + format_cpu_list(cell.cpus));
      }
      if (node->mem_kib > cell.memory_kib || node->mem_kib * 2 < cell.memory_kib) {
        finding(name + " manages " + std::to_string(node->mem_kib) + " KiB of its cell's " +
                std::to_string(cell.memory_kib) + " KiB");
      }
    }
  }

  // The rendered (not the stand-in's) cells against the placement: the vCPUs, their pins on the
  // cell's host node, the memory.
  void check_rendered_cells() {
    pugi::xml_document doc;
    if (!doc.load_string(in_.rendered.domain_xml.c_str())) {
      finding("the rendered domain XML does not parse");
      return;
    }
    const auto domain = doc.child("domain");
    std::map<int, int> pins;  // vCPU -> host CPU
    for (auto pin : domain.child("cputune").children("vcpupin")) {
      pins[pin.attribute("vcpu").as_int()] = pin.attribute("cpuset").as_int(-1);
    }
    std::map<int, pugi::xml_node> cells;
    for (auto cell : domain.child("cpu").child("numa").children("cell")) cells[cell.attribute("id").as_int()] = cell;
    for (const auto& placed : in_.placement.cells) check_rendered_cell(placed, cells[placed.id], pins);
  }

  void check_rendered_cell(const numa::GuestCell& placed, pugi::xml_node cell, const std::map<int, int>& pins) {
    const std::string name = "rendered cell " + std::to_string(placed.id);
    if (!cell) {
      finding(name + " is missing from the domain XML");
      return;
    }
    const auto cpus = parse_cpu_list(cell.attribute("cpus").value());
    if (!cpus.ok() || *cpus != placed.vcpus) {
      finding(name + " has vCPUs '" + cell.attribute("cpus").value() + "', placed " + format_cpu_list(placed.vcpus));
    }
    if (cell.attribute("memory").as_ullong() * 1024 != placed.memory_bytes) {
      finding(name + " has " + cell.attribute("memory").value() + " KiB, placed " +
              std::to_string(placed.memory_bytes / 1024) + " KiB");
    }
    for (std::size_t i = 0; i < placed.vcpus.size() && i < placed.host_cpus.size(); ++i) {
      const auto pin = pins.find(placed.vcpus[i]);
      const int host_cpu = pin == pins.end() ? -1 : pin->second;
      const auto* cpu = host_cpu_of(host_cpu);
      if (host_cpu != placed.host_cpus[i] || cpu == nullptr || cpu->numa_node != placed.host_node) {
        finding(name + ": vCPU " + std::to_string(placed.vcpus[i]) + " is pinned to host CPU " +
                std::to_string(host_cpu) + ", placed on " + std::to_string(placed.host_cpus[i]) + " of host node " +
                std::to_string(placed.host_node));
      }
    }
  }

  const numa::Cpu* host_cpu_of(int id) const {
    const auto it = std::find_if(in_.host.cpus.begin(), in_.host.cpus.end(), [&](const auto& c) { return c.id == id; });
    return it == in_.host.cpus.end() ? nullptr : &*it;
  }

  void check_nccl_topology() {
    pugi::xml_document doc;
    if (!doc.load_string(in_.rendered.nccl_topology_xml.c_str())) {
      finding("the rendered NCCL topology file does not parse");
      return;
    }
    std::set<PciAddress> listed;
    for (auto cpu : doc.child("system").children("cpu")) {
      const int numaid = cpu.attribute("numaid").as_int(-1);
      for (auto pci : cpu.children("pci")) check_nccl_pci(pci, numaid, std::nullopt, listed);
    }
    for (const auto& a : in_.rendered.addresses) {
      if ((a.role == "gpu" || a.role == "nic") && listed.count(a.guest) == 0) {
        finding(describe(a) + ": not in the NCCL topology file");
      }
    }
  }

  void check_nccl_pci(pugi::xml_node pci, int numaid, const std::optional<PciAddress>& parent,
                      std::set<PciAddress>& listed) {
    const std::string busid = pci.attribute("busid").value();
    const auto address = PciAddress::parse(busid);
    const std::string name = "NCCL topology busid " + busid;
    const auto* f = address.ok() ? view_.find(*address) : nullptr;
    if (f == nullptr) {
      finding(name + ": the guest has no such PCI function");
      return;
    }
    listed.insert(*address);
    // "32 GT/s" or "64.0 GT/s PCIe": the number is what NCCL's table of these strings stands for.
    file_links_[*address] = {std::strtod(pci.attribute("link_speed").value(), nullptr),
                             pci.attribute("link_width").as_int(0)};
    const bool nests = static_cast<bool>(pci.child("pci"));
    if (nests && !f->is_bridge()) finding(name + ": the file nests devices under it, the guest has no bridge there");
    if (!nests && !is_stand_in_id(f->vendor, f->device)) finding(name + ": the guest has no placed device there");
    if (parent && std::find(f->bridges.begin(), f->bridges.end(), *parent) == f->bridges.end()) {
      finding(name + ": the file puts it below " + parent->to_string() + ", the guest does not");
    }
    if (f->numa_node != numaid) {
      finding(name + ": under cpu numaid " + std::to_string(numaid) + " in the file, on guest NUMA node " +
              node_text(f->numa_node));
    }
    for (auto child : pci.children("pci")) check_nccl_pci(child, numaid, *address, listed);
  }

  // The 64-bit hole the stand-in gives pcie-root: the host bridges' windows above 4 GiB (bus 0's
  // and the expander buses' carved from it) span at least its size, and end inside the guest's
  // address width.
  void check_hole64() {
    const uint64_t hole = in_.stand_in.ties.pcihole64_bytes;
    if (hole == 0) return;
    constexpr uint64_t k4GiB = uint64_t{1} << 32;
    uint64_t low = ~uint64_t{0}, high = 0;
    for (const auto& w : view_.windows) {
      if (w.start < k4GiB) continue;
      low = std::min(low, w.start);
      high = std::max(high, w.end);
    }
    const auto gib = [](uint64_t bytes) { return std::to_string(bytes >> 30) + " GiB"; };
    if (high == 0) {
      finding("the guest's host bridges have no memory window above 4 GiB; pcie-root's 64-bit hole is " + gib(hole));
      return;
    }
    const uint64_t span = high - low + 1;
    if (span < hole) {
      finding("the guest's 64-bit PCI windows span " + gib(span) + ", pcie-root's 64-bit hole is " + gib(hole));
      return;
    }
    char range[64];
    std::snprintf(range, sizeof range, "0x%llx-0x%llx", static_cast<unsigned long long>(low),
                  static_cast<unsigned long long>(high));
    out_.held.push_back("64-bit PCI hole: the guest's windows span " + gib(span) + " (" + range + "), pcihole64 " +
                        gib(hole));
  }

  void check_delivered() {
    const auto files = render::guest_files(in_.rendered);
    if (files.empty()) return;
    if (!in_.seed_unread.empty()) {
      note("the delivered NCCL files were not read in the guest: " + in_.seed_unread);
      return;
    }
    if (view_.seed != "mounted vendor_data=ok") {
      finding("the guest's seed: " + view_.seed.value_or("not reported (no seed line)") +
              "; its files were not delivered");
      return;
    }
    std::set<std::string> rendered;
    for (const auto& file : files) {
      rendered.insert(file.path);
      const auto delivered = view_.delivered.find(file.path);
      if (delivered == view_.delivered.end()) {
        finding("the seed did not put " + file.path + " in the guest");
      } else if (delivered->second != sha256_hex(file.content)) {
        finding(file.path + " in the guest is not the rendered file (SHA-256 " + delivered->second + ")");
      }
    }
    // And nothing else: a file the render did not name (the nvidia module's options for a VM that
    // trains its fabric) would change what the guest's driver does.
    for (const auto& [path, digest] : view_.delivered) {
      if (rendered.count(path) == 0) finding("the seed put " + path + " in the guest, which the render did not name");
    }
    const auto options = view_.delivered.find(render::kGuestNvidiaOptionsPath);
    if (options != view_.delivered.end() && options->second == sha256_hex(in_.rendered.nvidia_options)) {
      out_.held.push_back(std::string("the guest's nvidia module options (") + render::kGuestNvidiaOptionsPath +
                          "): NVreg_NvLinkDisable=1, as rendered");
    }
  }

  // What the guest should say between cells i and j: the host's SLIT between their nodes; two cells
  // of one host node are 11 apart (libvirt refuses 10 between cells), each 10 from itself.
  std::optional<int> expected_distance(const numa::GuestCell& a, const numa::GuestCell& b) const {
    if (a.id == b.id) return 10;
    if (a.host_node == b.host_node) return 11;
    return in_.host.distance(a.host_node, b.host_node);
  }

  void check_distances() {
    const auto& cells = in_.placement.cells;
    for (const auto& node : view_.nodes) {
      const std::string name = "guest NUMA node " + std::to_string(node.id);
      if (node.distances.size() != cells.size()) {
        finding(name + " shows " + std::to_string(node.distances.size()) + " distances, the guest has " +
                std::to_string(cells.size()) + " cells");
        continue;
      }
      const auto* from = cell_of(node.id);
      for (std::size_t j = 0; j < cells.size() && from != nullptr; ++j) {
        const auto want = expected_distance(*from, cells[j]);
        if (want && node.distances[j] != *want) {
          finding(name + " is " + std::to_string(node.distances[j]) + " from node " + std::to_string(cells[j].id) +
                  "; the host's nodes " + std::to_string(from->host_node) + " and " +
                  std::to_string(cells[j].host_node) + " are " + std::to_string(*want) + " apart");
        }
      }
    }
  }

  const numa::GuestCell* cell_of(int id) const {
    const auto& cells = in_.placement.cells;
    const auto it = std::find_if(cells.begin(), cells.end(), [&](const auto& c) { return c.id == id; });
    return it == cells.end() ? nullptr : &*it;
  }

  // What NCCL on the host would read (HostModel::link_rate), when both halves are known.
  std::optional<GuestLink> host_link(const numa::PciFunction& f) const {
    const auto [speed, width] = in_.host.link_rate(f);
    if (!speed || !width) return std::nullopt;
    return GuestLink{*speed, *width};
  }

  // The narrowest of the guest ports above a function: each bridge's Link Capabilities.
  std::optional<GuestLink> guest_path_link(const GuestPciFunction& f) const {
    std::optional<GuestLink> out;
    for (const auto& address : f.bridges) {
      const auto* bridge = view_.find(address);
      if (bridge == nullptr || !bridge->max_link) continue;
      if (!out) out = bridge->max_link;
      out->speed_gts = std::min(out->speed_gts, bridge->max_link->speed_gts);
      out->width = std::min(out->width, bridge->max_link->width);
    }
    return out;
  }

  static std::string link_text(const std::optional<GuestLink>& link) {
    if (!link) return "unknown";
    char speed[16];
    std::snprintf(speed, sizeof speed, "%g", link->speed_gts);
    return std::string(speed) + " GT/s x" + std::to_string(link->width);
  }

  void check_links() {
    for (const auto& device : out_.devices) {
      if (!device.label.starts_with("GPU") && !device.label.starts_with("NIC")) continue;
      const auto* host = in_.host.find(device.host);
      const auto* guest = view_.find(device.guest);
      if (host == nullptr || guest == nullptr) continue;  // a finding of check_devices already
      check_link(device, host_link(*host), guest_path_link(*guest));
    }
  }

  void check_link(const MatrixDevice& device, const std::optional<GuestLink>& host,
                  const std::optional<GuestLink>& guest) {
    std::string line = device.label + " " + device.host.to_string() + ": host " + link_text(host) + ", guest ports " +
                       link_text(guest);
    const auto file = file_links_.find(device.guest);
    const bool narrower = host && (!guest || guest->speed_gts + 0.01 < host->speed_gts || guest->width < host->width);
    if (!narrower) {
      out_.links.push_back(line);
      return;
    }
    const bool corrected = file != file_links_.end() && file->second.width == host->width &&
                           std::fabs(file->second.speed_gts - host->speed_gts) < 0.01;
    line += corrected ? ", NCCL file " + link_text(host) + " (corrects it)" : ", not corrected by the NCCL file";
    out_.links.push_back(line);
    if (corrected) {
      note(device.label + " (host " + device.host.to_string() + "): the guest's ports show " + link_text(guest) +
           ", the host's link is " + link_text(host) + "; the NCCL topology file states the host's");
    } else {
      finding(device.label + " (host " + device.host.to_string() + "): the guest's ports show " + link_text(guest) +
              ", the host's link is " + link_text(host) + ", and the NCCL topology file does not correct it");
    }
  }

  struct FileLink {
    double speed_gts = 0;
    int width = 0;
  };

  const CheckInputs& in_;
  const GuestView& view_;
  GuestCheck out_;
  std::map<PciAddress, FileLink> file_links_;  // the NCCL file's link per busid
};

std::string pad(const std::string& text, std::size_t width) {
  return text.size() >= width ? text : std::string(width - text.size(), ' ') + text;
}

}  // namespace

GuestCheck check_guest(const CheckInputs& inputs, const GuestView& view) {
  return Checker(inputs, view).run();
}

// GPUs and NIC VFs only, as `hostagentctl topology` and nvidia-smi show them: NVMe drives and
// NVSwitches are held to the same rules (their differences are findings) but would double the width.
std::string format_matrices(const GuestCheck& check) {
  std::vector<std::size_t> shown;
  for (std::size_t i = 0; i < check.devices.size(); ++i) {
    const auto& label = check.devices[i].label;
    if (!label.starts_with("NVME") && !label.starts_with("NVSW")) shown.push_back(i);
  }
  const auto row = [&](const AffinityMatrix& m, std::size_t r, const AffinityMatrix* against) {
    std::string line = m.labels[r] + std::string(7 - std::min<std::size_t>(6, m.labels[r].size()), ' ');
    for (const auto c : shown) {
      std::string cell = numa::affinity_label(m.relation[r][c]);
      if (against != nullptr && against->relation[r][c] != m.relation[r][c]) cell += "*";
      line += pad(cell, 6);
    }
    return line;
  };
  std::string header(7, ' ');
  for (const auto c : shown) header += pad(check.host.labels[c], 6);
  std::string out = "Host" + std::string(header.size() - 4, ' ') + "   | Guest (booted stand-in)\n";
  out += header + "   | " + header + "\n";
  for (const auto r : shown) out += row(check.host, r, nullptr) + "   | " + row(check.guest, r, &check.expected) + "\n";
  out +=
      "\nPIX = one PCIe switch, PXB = several switches, PHB = one host bridge, NODE = one NUMA node,\n"
      "SYS = across nodes, * = differs from the host (as mapped into the guest's cells)\n";
  if (shown.size() < check.devices.size()) {
    out += "(NVMe drives and NVSwitches are held to the same rules; not shown)\n";
  }
  for (const auto& d : check.devices) {
    out += "  " + d.label + std::string(7 - std::min<std::size_t>(6, d.label.size()), ' ') + "host " +
           d.host.to_string() + "  guest " + d.guest.to_string() + "  cell " + std::to_string(d.guest_cell) + "\n";
  }
  return out;
}

}  // namespace hostagent::verify
