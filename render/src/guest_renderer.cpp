// render/guest_renderer: render_guest, the module's entry point. Checks every input, builds the guest
// PCI layout once, and renders the domain XML and the NCCL topology file from it.

#include "hostagent/render/guest_renderer.hpp"
#include "hostagent/common/text.hpp"

#include <string>
#include <vector>

#include "domain_xml.hpp"
#include "hostagent/numa/nvlink.hpp"
#include "input_checks.hpp"
#include "mmio_window.hpp"
#include "nccl_topology.hpp"
#include "pci_layout.hpp"
#include "placement_checks.hpp"
#include "vf_macs.hpp"

namespace hostagent::render {
namespace {

constexpr int kMaxClique = 15;  // QEMU stores the clique id in 4 bits (hw/vfio/pci-quirks.c)

// The guest's nvidia module options: NVLink off where the VM's GPUs are joined to a fabric it does
// not get (numa/nvlink.hpp). The driver then brings the GPUs up without waiting for Fabric Manager;
// NVreg_NvLinkDisable is the nvidia module's registry key (its /proc/driver/nvidia/params shows it).
std::string nvidia_options(const numa::HostModel& host, const numa::Placement& placement) {
  std::vector<numa::PciAddress> held;
  for (const auto& gpu : placement.gpus) held.push_back(gpu.gpu.address);
  for (const auto& nvswitch : placement.nvswitches) held.push_back(nvswitch.address);
  const auto partition = placement.fabric_partition ? std::optional(placement.fabric_partition->id) : std::nullopt;
  if (numa::guest_nvlink(host, held, partition) != numa::GuestNvlink::disabled) return "";
  return "# hostagent: this VM's GPUs are joined by the host's NVSwitch fabric, which it does not get:\n"
         "# without NVLink the driver initialises them at once instead of waiting for a fabric.\n"
         "options nvidia NVreg_NvLinkDisable=1\n";
}

Status check_options(const GuestOptions& options) {
  HA_TRY_STATUS(detail::check_vm_name(options.name));
  if (options.domain_type != "kvm" && options.domain_type != "qemu" && options.domain_type != "test") {
    return detail::invalid_input("domain type " + text::quoted(options.domain_type) + " is not one of kvm, qemu, test");
  }
  if (!options.emulator.empty()) HA_TRY_STATUS(detail::check_absolute_path("emulator", options.emulator));
  if (!options.console_log.empty()) HA_TRY_STATUS(detail::check_absolute_path("console log", options.console_log));
  if (!options.seed_iso.empty()) HA_TRY_STATUS(detail::check_absolute_path("seed ISO", options.seed_iso));
  for (const auto& [vf, rdma] : options.nic_rdma) {
    if (!is_guid(rdma.node_guid)) {
      return detail::invalid_input("RDMA node GUID " + text::quoted(rdma.node_guid) + " of VF " + vf.to_string() +
                                   " is not xxxx:xxxx:xxxx:xxxx");
    }
  }
  return ok_status();
}

// The layout needs pcie-root and pxb-pcie, which only the q35 machine family has.
Status check_machine(const std::string& machine) {
  const bool q35 = machine == "q35" || machine.rfind("pc-q35-", 0) == 0;
  const bool plain = machine.find_first_not_of("abcdefghijklmnopqrstuvwxyz0123456789.-_") == std::string::npos;
  if (!q35 || !plain) return detail::invalid_input("machine " + text::quoted(machine) + " is not a q35 machine type");
  return ok_status();
}

Status check_shape(const vmtemplates::VmTemplate& shape) {
  const std::string what = "template " + text::quoted(shape.name);
  HA_TRY_STATUS(detail::check_xml_text("template name", shape.name));
  HA_TRY_STATUS(check_machine(shape.machine));
  for (const auto& [key, value] : shape.metadata) {
    HA_TRY_STATUS(detail::check_metadata_key(key));
    HA_TRY_STATUS(detail::check_xml_text("metadata value of " + key, value));
  }
  if (!shape.boot.image.empty()) HA_TRY_STATUS(detail::check_absolute_path("boot image", shape.boot.image));
  HA_TRY_STATUS(detail::check_kernel_boot(shape.boot));
  const auto& vlan = shape.nics.vf.vlan;
  if (vlan && (*vlan < 1 || *vlan > 4094))
    return detail::invalid_input(what + ": VLAN " + std::to_string(*vlan) + " is not 1-4094");
  return ok_status();
}

Status check_cliques(const vmtemplates::VmTemplate& shape, const detail::PciLayout& layout) {
  if (!shape.peer_to_peer) return ok_status();
  for (const auto& d : layout.devices) {
    if (detail::takes_clique(d) && (d.clique < 0 || d.clique > kMaxClique)) {
      return detail::invalid_placement("GPU " + d.host->address.to_string() + " has P2P clique " +
                                       std::to_string(d.clique) + "; QEMU takes 0-15");
    }
  }
  return ok_status();
}

std::size_t nic_count(const detail::PciLayout& layout) {
  std::size_t count = 0;
  for (const auto& d : layout.devices) count += d.role == detail::DeviceRole::nic ? 1 : 0;
  return count;
}

std::vector<const numa::PciFunction*> functions(const detail::PciLayout& layout) {
  std::vector<const numa::PciFunction*> out;
  for (const auto& d : layout.devices) out.push_back(d.host);
  return out;
}

std::vector<GuestDeviceAddress> addresses(const detail::PciLayout& layout) {
  std::vector<GuestDeviceAddress> out;
  for (const auto& d : layout.devices) {
    out.push_back(GuestDeviceAddress{d.host->address, d.guest, detail::to_string(d.role), d.cell});
  }
  return out;
}

}  // namespace

Result<std::vector<std::pair<numa::PciAddress, MacAddress>>> vf_mac_addresses(const vmtemplates::VmTemplate& shape,
                                                                              const numa::Placement& placement,
                                                                              const GuestOptions& options) {
  // The order pci_layout numbers VFs in, and so the order of the MACs the domain XML uses.
  const auto vfs = numa::placed_vfs(placement);
  HA_TRY(const auto macs, detail::vf_macs(options, shape, vfs.size()));
  std::vector<std::pair<numa::PciAddress, MacAddress>> out;
  for (std::size_t i = 0; i < vfs.size(); ++i) out.emplace_back(vfs[i], macs[i]);
  return out;
}

std::vector<GuestFileContent> guest_files(const RenderedGuest& guest) {
  std::vector<GuestFileContent> files;
  if (!guest.nccl_conf.empty()) {
    files.push_back({kGuestNcclTopologyPath, guest.nccl_topology_xml, ""});
    files.push_back({kGuestNcclConfPath, guest.nccl_conf, ""});
  }
  if (!guest.nvidia_options.empty()) files.push_back({kGuestNvidiaOptionsPath, guest.nvidia_options, "nvidia"});
  return files;
}

Result<RenderedGuest> render_guest(const numa::HostModel& host, const vmtemplates::VmTemplate& shape,
                                   const numa::Placement& placement, const GuestOptions& options) {
  HA_TRY_STATUS(check_options(options));
  HA_TRY_STATUS(check_shape(shape));
  HA_TRY_STATUS(detail::check_placement(host, shape, placement));
  HA_TRY(const auto layout, detail::build_pci_layout(host, placement));
  HA_TRY_STATUS(check_cliques(shape, layout));
  HA_TRY(const auto macs, detail::vf_macs(options, shape, nic_count(layout)));
  const detail::DomainInputs inputs{
      host, shape, placement, options, layout, macs, detail::size_mmio_window(functions(layout))};
  RenderedGuest guest;
  guest.domain_xml = detail::render_domain_xml(inputs);
  guest.nccl_topology_xml = detail::render_nccl_topology(host, placement, layout, options.nic_rdma);
  guest.nccl_conf = detail::render_nccl_conf(layout, options.nic_rdma);
  guest.nvidia_options = nvidia_options(host, placement);
  guest.addresses = addresses(layout);
  return guest;
}

}  // namespace hostagent::render
