// render/pci_layout: the guest's PCI tree and every address in it, decided once here; the domain XML,
// the NCCL topology file and RenderedGuest::addresses all read this layout, so they cannot disagree.
//
// Guest PCI address scheme (stable: a pure function of the placement and the host model):
//  - pcie-root, bus 0 (controller index 0): 00:02.0 boot disk (virtio), 00:03.0 the guest agent's
//    virtio-serial controller; 00:(0x10+k).0 pcie-expander-bus (pxb-pcie) k, controller index 1+k.
//  - One expander bus per host bridge (root bus) that a cell's devices sit under, its <node> the
//    cell; a cell without devices gets one. Ordered by cell, then by the host bridge's root bus, so a
//    cell's buses are one ascending run. Devices under two root complexes of one host node are under
//    two expander buses of one guest node in the guest too: nvidia-smi's NODE, not PHB. At most 16
//    (slots 0x10..0x1f).
//  - With E expander buses, bus k numbers its buses from busNr B(k) = S x (k + 1), S = min(0x40,
//    (0x100 / (E+1)) rounded down to a multiple of 8): 0x40 and 0x80 for two. Buses B(k)..B(k+1)-1
//    are bus k's (the last one's run to 0xff); bus 0's range 0..B(0)-1 holds nothing but pcie-root.
//  - An expander bus's devices form units: one per outermost host PCIe switch they sit under (the
//    last switch upstream port of their bridge_chain; keyed by its address), one per device with no
//    switch above it on the host (keyed by its own address). Units are sorted by that key; unit j
//    gets a pcie-root-port at B(k):j.0.
//  - A switch unit mirrors the host's switch hierarchy, pruned to the placed devices: each host
//    switch with a placed device beneath it becomes one emulated switch (an x3130 upstream port and
//    one xio3130 downstream port per child). A switch's children are the placed devices whose nearest
//    switch it is and the switches nested directly below it (hosts like the DGX-2 put two GPU switches
//    under one), sorted by host address, a nested switch by its upstream port's; child k sits behind
//    downstream port k. A nested switch's upstream port plugs into its downstream port; so two devices
//    share an emulated switch in the guest exactly when they share a switch on the host.
//  - Guest firmware numbers buses depth-first in slot order (OVMF PciBusDxe, SeaBIOS
//    pci_bios_init_bus_rec; libvirt docs/pci-addresses.rst shows busNr 254 giving fe:00.0 and
//    ff:00.0), and Linux keeps those numbers. With a counter n starting at B(k) + 1, unit by unit:
//      the unit's root port gets bus r = n (n += 1); then
//      lone unit: the device sits at r:00.0;
//      switch unit: place(outermost switch, r), where place(switch, p), p the bus of the port the
//        switch plugs into, is: its upstream port sits at p:00.0; its internal bus is n (n += 1)
//        and holds downstream port k at n:k.0; then for k in order, downstream port k gets bus
//        q = n (n += 1), and child k is placed there before port k + 1 gets a number: a device at
//        q:00.0, a nested switch by place(nested, q).
//      A flat switch with D devices thus takes buses p+1 (internal) and p+2..p+1+D (the devices).
//      (QEMU 7.2's "info pci" after SeaBIOS and after OVMF shows these numbers for the DGX-2's
//      two-level tree.)
//    An expander's buses must not run past B(k+1)-1 (0xff for the last).
//  - A GPU's companions (the rest of its IOMMU group, e.g. its HDMI audio) are functions 1.. of the
//    GPU's slot, the GPU is function 0 with multifunction='on', as on the host.
//  - Controller indexes: 0 pcie-root, 1..E the expander buses, then expander by expander, unit by unit: the
//    root port, then its switch depth-first in the order of the bus numbers: the upstream port, then
//    each downstream port followed by the controllers of the switch nested below it, if any (without
//    nesting: the upstream port, its downstream ports). So every controller's index is above that of
//    the controller it plugs into, as libvirt requires ("index must be larger than bus"). Chassis =
//    index; a root port's port number is slot << 3 (libvirt's own default), a downstream port's is
//    its slot.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "hostagent/common/result.hpp"
#include "hostagent/numa/host_model.hpp"
#include "hostagent/numa/placement.hpp"

namespace hostagent::render::detail {

inline constexpr int kBootDiskSlot = 0x02;
// The virtio-serial controller that carries the guest agent's channel, an integrated endpoint on
// bus 0 beside the boot disk: given an address here, libvirt adds no root port for it.
inline constexpr int kAgentSerialSlot = 0x03;
inline constexpr int kFirstExpanderSlot = 0x10;

enum class ControllerModel { pcie_root, expander_bus, root_port, switch_upstream, switch_downstream };

// Where a device or controller plugs in, as libvirt's <address type='pci'> says it: `controller` is
// the index of the controller whose bus it is on (libvirt matches bus= against index=, not the bus
// number the guest sees).
struct Plug {
  int controller = 0;
  int slot = 0;
  int function = 0;
};

struct Controller {
  int index = 0;
  ControllerModel model = ControllerModel::pcie_root;
  Plug plug;                                    // unused for pcie-root
  int cell = 0;                                 // the guest cell it serves
  int bus_nr = 0;                               // expander bus: the guest bus number of its root bus
  int chassis = 0;                              // root and downstream ports
  int port = 0;                                 // root and downstream ports
  numa::PciAddress guest;                       // where the guest sees the port itself
  std::optional<numa::PciAddress> host_switch;  // upstream port: the host switch it mirrors
  std::optional<numa::PciAddress> leads_to;     // root port: the host function behind it (the
                                                // outermost switch's upstream port, or the device)
  std::string alias;                            // root port: libvirt user alias, ua-port<index>
  int upstream = -1;  // upstream port: the upstream port of the switch it is nested in, -1 on a root port
};

// nic: a VF (an <interface type='hostdev'>, with its MAC); whole_nic: a NIC PF given whole (a
// <hostdev>: an HCA without VFs). Both are "nic" to the guest check and NCCL.
enum class DeviceRole { gpu, companion, nic, whole_nic, nvme, nvswitch };
const char* to_string(DeviceRole role);

struct Device {
  DeviceRole role = DeviceRole::gpu;
  const numa::PciFunction* host = nullptr;  // in the HostModel given to build_pci_layout
  int cell = 0;
  Plug plug;
  numa::PciAddress guest;
  bool multifunction = false;  // function 0 of a slot that has companions
  std::string alias;           // libvirt user alias: ua-gpu0, ua-gpu0-fn1, ua-vf0, ua-nic0, ua-nvme0, ua-nvswitch0
  int ordinal = 0;             // gpu and companion: index in Placement::gpus; nic: VF index in
                               // placement order (GPU VFs, then extra VFs); nvme, nvswitch: index
  int clique = 0;              // gpu: PlacedGpu::clique
  int upstream = -1;           // the upstream port controller of the emulated switch directly above
                               // (the device's nearest host switch), -1 on a root port
};

struct PciLayout {
  std::vector<Controller> controllers;  // by index
  std::vector<Device> devices;          // in guest address order
};

// Fails with invalid_argument when a placed device is not on the host, is placed twice, names a
// guest cell that does not exist, or when the layout outgrows PCI (slots, buses, controller indexes).
Result<PciLayout> build_pci_layout(const numa::HostModel& host, const numa::Placement& placement);

// busNr of expander bus k when there are `expanders` of them.
int expander_bus_nr(int expander, int expanders);

}  // namespace hostagent::render::detail
