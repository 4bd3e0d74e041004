// render/nccl_topology: writes the NCCL topology file from the PCI layout (format in the header).
#include "nccl_topology.hpp"

#include <algorithm>
#include <map>
#include <optional>
#include <set>

#include "text_format.hpp"
#include "xml_util.hpp"

namespace hostagent::render::detail {
namespace {

using NicRdmaMap = std::map<numa::PciAddress, NicRdma>;

// QEMU's emulated x3130 upstream port, as the guest's lspci shows it (hw/pci-bridge/xio3130_upstream.c).
constexpr uint16_t kTiVendor = 0x104c;
constexpr uint16_t kXio3130Upstream = 0x8232;
constexpr uint32_t kPciBridgeClass = 0x060400;

void set_link(pugi::xml_node pci, const numa::LinkRate& link) {
  const auto speed = link.speed_gts ? nccl_link_speed(*link.speed_gts) : std::nullopt;
  if (speed) set(pci, "link_speed", *speed);
  if (link.width && *link.width > 0) set(pci, "link_width", *link.width);
}

pugi::xml_node add_pci(pugi::xml_node parent, const numa::PciAddress& busid, uint32_t class_code, uint16_t vendor,
                       uint16_t device) {
  auto pci = set(add(parent, "pci"), "busid", busid.to_string());
  set(pci, "class", hex(class_code, 6));
  set(pci, "vendor", hex(vendor, 4));
  set(pci, "device", hex(device, 4));
  return pci;
}

pugi::xml_node add_switch(pugi::xml_node parent, const numa::HostModel& host, const Controller& upstream) {
  auto pci = add_pci(parent, upstream.guest, kPciBridgeClass, kTiVendor, kXio3130Upstream);
  set(pci, "subsystem_vendor", "0x0000");
  set(pci, "subsystem_device", "0x0000");
  const auto* host_port = upstream.host_switch ? host.find(*upstream.host_switch) : nullptr;
  if (host_port != nullptr) set_link(pci, host.link_rate(*host_port));
  return pci;
}

// "0c42:a103:0012:3456" -> "0x0c42a10300123456", as NCCL writes a GUID.
std::string nccl_guid(const std::string& node_guid) {
  std::string hex_digits;
  for (const char c : node_guid) {
    if (c != ':') hex_digits += c;
  }
  return "0x" + hex_digits;
}

// The <nic><net> of a NIC whose guest name is known (see the header); nothing otherwise.
void add_net(pugi::xml_node pci, const Device& d, const NicRdmaMap& nic_rdma) {
  const auto rdma = nic_rdma.find(d.host->address);
  if (rdma == nic_rdma.end()) return;
  const auto name = rdma_core_pci_name(d.guest, rdma->second.link_layer);
  if (!name) return;
  auto net = add(add(pci, "nic"), "net");
  set(net, "name", *name);
  set(set(net, "port", 1), "gdr", 1);
  if (!rdma->second.node_guid.empty()) set(net, "guid", nccl_guid(rdma->second.node_guid));
}

void add_device(pugi::xml_node parent, const numa::HostModel& host, const Device& d, const NicRdmaMap& nic_rdma) {
  const auto& f = *d.host;
  auto pci = add_pci(parent, d.guest, f.class_code, f.vendor_id, f.device_id);
  if (f.subsystem_vendor_id) set(pci, "subsystem_vendor", hex(*f.subsystem_vendor_id, 4));
  if (f.subsystem_device_id) set(pci, "subsystem_device", hex(*f.subsystem_device_id, 4));
  set_link(pci, host.link_rate(f));
  if (d.role == DeviceRole::nic || d.role == DeviceRole::whole_nic) add_net(pci, d, nic_rdma);
}

// The <pci> of each emulated switch of one cell, made on first use: a nested switch's inside its
// parent switch's, an outermost one's inside the <cpu>. NCCL reads a <pci> inside a <pci> as a bridge
// below a bridge (ncclTopoXmlLoadPci in src/graph/xml.cc recurses into "pci"), so two GPUs that meet
// only at an outer switch get PXB, as on the host. Made in guest order, so siblings keep bus order.
class SwitchElements {
 public:
  SwitchElements(pugi::xml_node cpu, const numa::HostModel& host, const PciLayout& layout)
      : cpu_(cpu), host_(host), layout_(layout) {}

  pugi::xml_node of(int upstream) {
    if (upstream < 0) return cpu_;
    const auto made = made_.find(upstream);
    if (made != made_.end()) return made->second;
    const auto& port = layout_.controllers[static_cast<std::size_t>(upstream)];
    const auto pci = add_switch(of(port.upstream), host_, port);
    made_.emplace(upstream, pci);
    return pci;
  }

 private:
  pugi::xml_node cpu_;
  const numa::HostModel& host_;
  const PciLayout& layout_;
  std::map<int, pugi::xml_node> made_;  // upstream controller index -> its <pci>
};

void add_cell(pugi::xml_node system, const numa::HostModel& host, const numa::GuestCell& cell, int nbits,
              const PciLayout& layout, const NicRdmaMap& nic_rdma) {
  auto cpu = set(add(system, "cpu"), "numaid", cell.id);
  set(cpu, "affinity", cpumap(cell.vcpus, nbits));
  set(cpu, "arch", "x86_64");  // vendor, family and model: NCCL reads them from CPUID in the guest
  SwitchElements switches(cpu, host, layout);
  for (const auto& d : layout.devices) {
    const bool nic = d.role == DeviceRole::nic || d.role == DeviceRole::whole_nic;
    if (d.cell != cell.id || (d.role != DeviceRole::gpu && !nic)) continue;
    add_device(switches.of(d.upstream), host, d, nic_rdma);
  }
}

int vcpu_count(const numa::Placement& placement) {
  int count = 0;
  for (const auto& cell : placement.cells) count += static_cast<int>(cell.vcpus.size());
  return count;
}

}  // namespace

// kernel-boot/rdma_rename.c by_pci: the protocol's prefix, "P<domain>" when the domain is not 0,
// "p<bus>s<slot>" (decimal), "f<function>" when the function is not 0. A guest's passed-through
// VF has no physfn there, so it is named like a PF (no "v<n>"). Where the guest exposes a PCI slot
// number the rule names it "s<sun>" instead; the bus id then matches (see the header).
std::optional<std::string> rdma_core_pci_name(const numa::PciAddress& at, const std::string& link_layer) {
  std::string name = link_layer == "Ethernet" ? "roce" : link_layer == "InfiniBand" ? "ib" : "";
  if (name.empty()) return std::nullopt;
  if (at.domain != 0) name += "P" + std::to_string(at.domain);
  name += "p" + std::to_string(at.bus) + "s" + std::to_string(at.device);
  if (at.function != 0) name += "f" + std::to_string(at.function);
  return name;
}

std::string render_nccl_conf(const PciLayout& layout, const NicRdmaMap& nic_rdma) {
  const bool gpus = std::any_of(layout.devices.begin(), layout.devices.end(),
                                [](const Device& d) { return d.role == DeviceRole::gpu; });
  if (!gpus) return "";
  std::string out = "# Written by hostagent at the VM's first boot (cloud-init vendor data).\n";
  out += std::string("NCCL_TOPO_FILE=") + kGuestNcclTopologyPath + "\n";
  out += "NCCL_IB_PCI_RELAXED_ORDERING=1\n";
  // One index for every NIC: only when the host saw the same RoCE v2 GID index on all of them.
  std::set<int> indexes;
  bool all_known = true;
  for (const auto& d : layout.devices) {
    if (d.role != DeviceRole::nic && d.role != DeviceRole::whole_nic) continue;
    const auto rdma = nic_rdma.find(d.host->address);
    const auto index = rdma == nic_rdma.end() ? std::nullopt : rdma->second.roce_v2_gid_index;
    if (!index) all_known = false;
    if (index) indexes.insert(*index);
  }
  if (all_known && indexes.size() == 1) out += "NCCL_IB_GID_INDEX=" + std::to_string(*indexes.begin()) + "\n";
  return out;
}

std::string render_nccl_topology(const numa::HostModel& host, const numa::Placement& placement, const PciLayout& layout,
                                 const NicRdmaMap& nic_rdma) {
  pugi::xml_document doc;
  auto system = set(doc.append_child("system"), "version", 1);
  add_comment(system,
              " Rendered by hostagent. Bus ids are the guest's. NIC names are rdma-core's for the guest "
              "address; NCCL finds a NIC by its bus id where the guest named it otherwise. ");
  for (const auto& cell : placement.cells) add_cell(system, host, cell, vcpu_count(placement), layout, nic_rdma);
  // NCCL's hand-written parser (src/graph/xml.cc) cannot read an XML declaration and takes pugixml's
  // " />" for an empty attribute: no declaration, and every element gets an explicit end tag.
  return to_text(doc, pugi::format_no_empty_element_tags);
}

}  // namespace hostagent::render::detail
