// render/domain_devices: the <devices> of the domain (boot disk, cloud-init seed CD-ROM, the PCI
// controllers of the layout, assigned GPUs/NVMe and VFs at their guest addresses, console, the guest
// agent's channel) and the QEMU per-device overrides.
#include <string>

#include "domain_xml.hpp"
#include "text_format.hpp"
#include "xml_util.hpp"

namespace hostagent::render::detail {
namespace {

// libvirt's guest-side address: bus is the index of the controller the device plugs into.
void append_guest_address(pugi::xml_node parent, const Plug& plug, bool multifunction) {
  auto address = set(add(parent, "address"), "type", "pci");
  set(address, "domain", "0x0000");
  set(address, "bus", hex(static_cast<uint64_t>(plug.controller), 2));
  set(address, "slot", hex(static_cast<uint64_t>(plug.slot), 2));
  set(address, "function", hex(static_cast<uint64_t>(plug.function), 1));
  if (multifunction) set(address, "multifunction", "on");
}

void append_host_address(pugi::xml_node source, const numa::PciAddress& host, bool typed) {
  auto address = add(source, "address");
  if (typed) set(address, "type", "pci");
  set(address, "domain", hex(host.domain, 4));
  set(address, "bus", hex(host.bus, 2));
  set(address, "slot", hex(host.device, 2));
  set(address, "function", hex(host.function, 1));
}

void append_boot_disk(pugi::xml_node devices, const DomainInputs& in) {
  if (in.shape.boot.image.empty()) return;
  add_comment(devices,
              " cloud-init user data is not part of this XML: the daemon attaches it as a NoCloud seed "
              "when it prepares the VM ");
  auto disk = set(set(add(devices, "disk"), "type", "file"), "device", "disk");
  set(set(add(disk, "driver"), "name", "qemu"), "type", "qcow2");
  set(add(disk, "source"), "file", in.shape.boot.image);
  set(set(add(disk, "target"), "dev", "vda"), "bus", "virtio");
  set(add(disk, "boot"), "order", 1);
  set(add(disk, "alias"), "name", "ua-boot");
  append_guest_address(disk, Plug{0, kBootDiskSlot, 0}, false);
}

// The NoCloud seed (cloudinit/), which cloud-init finds by its "cidata" label. sata: q35
// has an AHCI controller built in (ICH9, 00:1f.2), so the CD-ROM takes no PCI slot of the layout;
// libvirt adds <controller type='sata' index='0'/> for it. No <boot> order: it is data, not a boot device.
void append_seed_cdrom(pugi::xml_node devices, const DomainInputs& in) {
  if (in.options.seed_iso.empty()) return;
  auto cdrom = set(set(add(devices, "disk"), "type", "file"), "device", "cdrom");
  set(set(add(cdrom, "driver"), "name", "qemu"), "type", "raw");
  set(add(cdrom, "source"), "file", in.options.seed_iso);
  set(set(add(cdrom, "target"), "dev", "sda"), "bus", "sata");
  add(cdrom, "readonly");
}

void append_pcie_root(pugi::xml_node devices, const DomainInputs& in) {
  auto root = set(set(set(add(devices, "controller"), "type", "pci"), "index", 0), "model", "pcie-root");
  if (in.mmio.window_bytes == 0) return;
  // Sized in mmio_window.hpp: 2 x the 64-bit prefetchable BARs, rounded up to a power of two.
  const std::string why = " 64-bit MMIO window: " + std::to_string(in.mmio.prefetchable_bar_bytes) +
                          " bytes of 64-bit prefetchable BARs, doubled for bridge alignment, rounded up to a "
                          "power of two ";
  root.parent().insert_child_before(pugi::node_comment, root).set_value(why.c_str());
  set(add_text(root, "pcihole64", std::to_string(in.mmio.window_bytes / 1024)), "unit", "KiB");
}

void append_port_target(pugi::xml_node controller, const Controller& c) {
  // hotplug off (QEMU's PCIESlot "hotplug" property, libvirt >= 6.3): the layout is fixed at define
  // time, and a hot-plug capable port makes guest firmware pad the bridge with reserved resources
  // (OVMF PciHotPlugInitDxe): 4 KiB of I/O each would exhaust the 64 KiB I/O space with ~40 ports,
  // and padding bus numbers would break the address scheme of pci_layout.hpp.
  auto target = set(add(controller, "target"), "chassis", c.chassis);
  set(target, "port", hex(static_cast<uint64_t>(c.port), 1));
  set(target, "hotplug", "off");
}

void append_controller(pugi::xml_node devices, const Controller& c) {
  static const char* const kModels[] = {"pcie-root", "pcie-expander-bus", "pcie-root-port", "pcie-switch-upstream-port",
                                        "pcie-switch-downstream-port"};
  static const char* const kNames[] = {"", "pxb-pcie", "pcie-root-port", "x3130-upstream", "xio3130-downstream"};
  const auto model = static_cast<std::size_t>(c.model);
  if (c.model == ControllerModel::switch_upstream) {
    const std::string mirrors = " mirrors host switch " + c.host_switch->to_string() + " ";
    add_comment(devices, mirrors.c_str());
  }
  auto controller = set(set(set(add(devices, "controller"), "type", "pci"), "index", c.index), "model", kModels[model]);
  set(add(controller, "model"), "name", kNames[model]);
  if (c.model == ControllerModel::expander_bus) {
    // <node> puts the bus (and so every device below it) in guest NUMA node `cell`: the guest
    // kernel reads it from the bus's _PXM, NCCL from the devices' numa_node.
    auto target = set(add(controller, "target"), "busNr", c.bus_nr);
    add_text(target, "node", std::to_string(c.cell));
  } else if (c.model == ControllerModel::root_port || c.model == ControllerModel::switch_downstream) {
    append_port_target(controller, c);
  }
  if (!c.alias.empty()) set(add(controller, "alias"), "name", c.alias);
  append_guest_address(controller, c.plug, false);
}

void append_hostdev(pugi::xml_node devices, const DomainInputs& in, const Device& d) {
  auto hostdev = set(set(add(devices, "hostdev"), "mode", "subsystem"), "type", "pci");
  set(hostdev, "managed", in.options.managed_hostdevs ? "yes" : "no");
  set(add(hostdev, "driver"), "name", "vfio");
  append_host_address(add(hostdev, "source"), d.host->address, false);
  // boot.from_nvme: after the image (order 1), in placement order. SeaBIOS sets up an NVMe only
  // when it may boot from it (src/hw/nvme.c nvme_scan skips a controller without a boot order
  // under a strict one), and maps it to a BIOS drive (0x81 behind the image's 0x80).
  if (d.role == DeviceRole::nvme && in.shape.boot.from_nvme) {
    set(add(hostdev, "boot"), "order", (in.shape.boot.image.empty() ? 1 : 2) + d.ordinal);
  }
  set(add(hostdev, "alias"), "name", d.alias);
  append_guest_address(hostdev, d.plug, d.multifunction);
}

void append_vf(pugi::xml_node devices, const DomainInputs& in, const Device& d) {
  // type='hostdev': libvirt sets the MAC and VLAN on the VF through its PF before assigning it.
  auto nic = set(add(devices, "interface"), "type", "hostdev");
  set(nic, "managed", in.options.managed_hostdevs ? "yes" : "no");
  set(add(nic, "mac"), "address", in.vf_macs.at(static_cast<std::size_t>(d.ordinal)));
  set(add(nic, "driver"), "name", "vfio");
  append_host_address(add(nic, "source"), d.host->address, true);
  if (in.shape.nics.vf.vlan) set(add(add(nic, "vlan"), "tag"), "id", *in.shape.nics.vf.vlan);
  set(add(nic, "alias"), "name", d.alias);
  append_guest_address(nic, d.plug, false);
}

void append_console(pugi::xml_node devices, const DomainInputs& in) {
  auto serial = set(add(devices, "serial"), "type", "pty");
  // libvirt hands the pty's output to virtlogd, which writes it to the file as well as the pty
  // (libvirt's "log" element for character devices, QEMU's chardev logfile); append keeps what
  // earlier boots printed.
  if (!in.options.console_log.empty()) {
    set(set(add(serial, "log"), "file", in.options.console_log), "append", "on");
  }
  set(add(serial, "target"), "port", 0);
  auto console = set(add(devices, "console"), "type", "pty");
  set(set(add(console, "target"), "type", "serial"), "port", 0);
}

// The QEMU guest agent's channel: how "up" is seen (libvirt's agent lifecycle event) and how a VM
// is stopped without ACPI. A unix socket libvirt names itself. The controller is declared with an
// address, else libvirt would add one on a root port of its own (qemuDomainAssignDevicePCISlots).
void append_agent_channel(pugi::xml_node devices) {
  auto controller = set(set(add(devices, "controller"), "type", "virtio-serial"), "index", 0);
  append_guest_address(controller, Plug{0, kAgentSerialSlot, 0}, false);
  auto channel = set(add(devices, "channel"), "type", "unix");
  set(set(add(channel, "target"), "type", "virtio"), "name", "org.qemu.guest_agent.0");
}

}  // namespace

void append_devices(pugi::xml_node domain, const DomainInputs& in) {
  auto devices = add(domain, "devices");
  if (!in.options.emulator.empty()) add_text(devices, "emulator", in.options.emulator);
  append_boot_disk(devices, in);
  append_seed_cdrom(devices, in);
  // No USB controller: q35 would otherwise get a qemu-xhci on a root port libvirt adds itself.
  set(set(set(add(devices, "controller"), "type", "usb"), "index", 0), "model", "none");
  append_pcie_root(devices, in);
  for (const auto& c : in.layout.controllers) {
    if (c.model != ControllerModel::pcie_root) append_controller(devices, c);
  }
  for (const auto& d : in.layout.devices) {
    if (d.role == DeviceRole::nic) {
      append_vf(devices, in, d);
    } else {
      append_hostdev(devices, in, d);
    }
  }
  append_console(devices, in);
  append_agent_channel(devices);
  set(add(devices, "memballoon"), "model", "none");  // assigned devices pin all guest memory anyway
}

namespace {

// What a root port tells the guest of its link: QEMU's x-speed and x-width values.
struct PortLink {
  const char* speed;
  int width = 0;
  bool capped = false;  // the host's link is faster than QEMU can show
};

std::optional<PortLink> root_port_link(const numa::HostModel& host, const Controller& c) {
  const auto* f = c.model == ControllerModel::root_port && c.leads_to ? host.find(*c.leads_to) : nullptr;
  if (f == nullptr) return std::nullopt;
  const auto link = host.link_rate(*f);
  const auto& speed = link.speed_gts;  // not a structured binding: the lambdas below capture it
  const auto& width = link.width;
  if (!speed || !width) return std::nullopt;
  // QEMU 7.2's PCIELinkSpeed and PCIELinkWidth (qapi/common.json): 32 and 64 GT/s came in 9.0.
  struct Speed {
    double gts;
    const char* value;
  };
  static constexpr Speed kSpeeds[] = {{16.0, "16"}, {8.0, "8"}, {5.0, "5"}, {2.5, "2_5"}};
  static constexpr int kWidths[] = {32, 16, 12, 8, 4, 2, 1};
  const auto* s =
      std::find_if(std::begin(kSpeeds), std::end(kSpeeds), [&](const Speed& k) { return k.gts <= *speed + 0.01; });
  const auto* w = std::find_if(std::begin(kWidths), std::end(kWidths), [&](int k) { return k <= *width; });
  if (s == std::end(kSpeeds) || w == std::end(kWidths)) return std::nullopt;
  return PortLink{s->value, *w, *speed > s->gts + 0.01};
}

void append_property(pugi::xml_node device, const char* name, const char* type, const std::string& value) {
  auto frontend = device.child("qemu:frontend");
  if (!frontend) frontend = add(device, "qemu:frontend");
  set(set(set(add(frontend, "qemu:property"), "name", name), "type", type), "value", value);
}

}  // namespace

void append_qemu_override(pugi::xml_node domain, const DomainInputs& in) {
  // libvirt >= 8.2 passes these to the device's -device properties.
  auto override_node = add(domain, "qemu:override");
  // Root ports report the host link into what they lead to, so sysfs and nvidia-smi in the guest
  // read the host's speed and width (QEMU's default is 16 GT/s x32). Emulated switch downstream
  // ports take no such property in QEMU 7.2 (xio3130-downstream: 2.5 GT/s x1); the NCCL topology
  // file states the host's link for every device and switch instead.
  for (const auto& c : in.layout.controllers) {
    const auto link = root_port_link(in.host, c);
    if (!link) continue;
    if (link->capped) {
      add_comment(override_node, (" " + c.alias + ": the host link is faster than QEMU 7.2 can show; capped ").c_str());
    }
    auto device = set(add(override_node, "qemu:device"), "alias", c.alias);
    append_property(device, "x-speed", "string", link->speed);
    append_property(device, "x-width", "string", std::to_string(link->width));  // an enum, as x-speed
  }
  // The NVIDIA driver in the guest allows P2P between GPUs that report the same clique id in the
  // vendor capability QEMU adds.
  for (const auto& d : in.layout.devices) {
    if (!in.shape.peer_to_peer || !takes_clique(d)) continue;
    auto device = set(add(override_node, "qemu:device"), "alias", d.alias);
    auto property = set(add(add(device, "qemu:frontend"), "qemu:property"), "name", "x-nv-gpudirect-clique");
    set(set(property, "type", "unsigned"), "value", std::to_string(d.clique));
  }
  if (!override_node.child("qemu:device")) {
    domain.remove_child(override_node);
    return;
  }
  if (!domain.attribute("xmlns:qemu")) set(domain, "xmlns:qemu", kQemuNamespace);
}

}  // namespace hostagent::render::detail
