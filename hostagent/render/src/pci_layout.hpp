// render/pci_layout: the guest's PCI tree and every address in it, decided once here; the domain XML,
// the NCCL topology file and RenderedGuest::addresses all read this layout, so they cannot disagree.
//
// Guest PCI address scheme (stable: a pure function of the placement and the host model):
//  - pcie-root, bus 0 (controller index 0): 00:02.0 boot disk (virtio); 00:(0x10+c).0 the
//    pcie-expander-bus (pxb-pcie, controller index 1+c) of guest cell c, its <node> = c.
//  - Expander bus c numbers its buses from busNr B(c) = S x (c + 1), S = min(0x40, (0x100 / (cells+1))
//    rounded down to a multiple of 8): 0x40 and 0x80 for two cells. Buses B(c)..B(c+1)-1 are cell c's
//    (the last cell's run to 0xff); bus 0's range 0..B(0)-1 holds nothing but pcie-root.
//  - The cell's devices form units: one per host PCIe switch they sit under (keyed by the switch's
//    upstream port address), one per device with no switch above it on the host (keyed by its own
//    address). Units are sorted by that key; unit k gets a pcie-root-port at B(c):k.0.
//  - Guest firmware numbers buses depth-first in slot order (OVMF PciBusDxe, SeaBIOS
//    pci_bios_init_bus_rec; libvirt docs/pci-addresses.rst shows busNr 254 giving fe:00.0 and
//    ff:00.0), and Linux keeps those numbers. Starting from n = B(c) + 1, unit by unit:
//      switch unit: the root port's bus n holds the x3130 upstream port at n:00.0; the switch's
//        internal bus n+1 holds one xio3130 downstream port per device at (n+1):k.0, devices sorted by
//        host address; downstream port k's bus n+2+k holds the device at (n+2+k):00.0; n += 2 + D.
//      lone unit: the device sits at n:00.0; n += 1.
//  - A GPU's companions (the rest of its IOMMU group, e.g. its HDMI audio) are functions 1.. of the
//    GPU's slot, the GPU is function 0 with multifunction='on', as on the host.
//  - Controller indexes: 0 pcie-root, 1..C the expander buses, then cell by cell, unit by unit: the
//    root port, the upstream port, its downstream ports. Chassis = index; a root port's port number is
//    slot << 3 (libvirt's own default), a downstream port's is its slot.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "hostagent/common/result.hpp"
#include "hostagent/numa/host_model.hpp"
#include "hostagent/numa/placement.hpp"

namespace hostagent::render::detail {

inline constexpr int kBootDiskSlot = 0x02;
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
};

enum class DeviceRole { gpu, companion, nic, nvme };
const char* to_string(DeviceRole role);

struct Device {
  DeviceRole role = DeviceRole::gpu;
  const numa::PciFunction* host = nullptr;  // in the HostModel given to build_pci_layout
  int cell = 0;
  Plug plug;
  numa::PciAddress guest;
  bool multifunction = false;  // function 0 of a slot that has companions
  std::string alias;           // libvirt user alias: ua-gpu0, ua-gpu0-fn1, ua-vf0, ua-nvme0
  int ordinal = 0;             // gpu and companion: index in Placement::gpus; nic: VF index in
                               // placement order (GPU VFs, then extra VFs); nvme: index
  int clique = 0;              // gpu: PlacedGpu::clique
  int upstream = -1;           // the emulated switch's upstream port controller, -1 on a root port
};

struct PciLayout {
  std::vector<Controller> controllers;  // by index
  std::vector<Device> devices;          // in guest address order
};

// Fails with invalid_argument when a placed device is not on the host, is placed twice, names a
// guest cell that does not exist, or when the layout outgrows PCI (slots, buses, controller indexes).
Result<PciLayout> build_pci_layout(const numa::HostModel& host, const numa::Placement& placement);

// busNr of cell c's expander bus when there are `cells` cells.
int expander_bus_nr(int cell, int cells);

}  // namespace hostagent::render::detail
