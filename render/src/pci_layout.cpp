// render/pci_layout: builds the guest PCI tree (scheme in pci_layout.hpp): collects the placed
// functions, groups them per guest cell into units (the tree of host switches below one outermost
// switch, or a switch-less device), then hands out controller indexes, slots and the bus numbers the
// guest firmware will assign.
#include "pci_layout.hpp"

#include "input_checks.hpp"

#include "hostagent/numa/affinity.hpp"

#include <algorithm>
#include <map>
#include <set>

namespace hostagent::render::detail {
namespace {

using numa::PciAddress;

constexpr int kMaxSlot = 31;
constexpr int kMaxFunction = 7;
constexpr int kMaxControllerIndex = 255;  // <address bus=...> and <target chassis=...> are 8-bit
constexpr int kMaxBus = 0xff;

// The placed functions before they have guest addresses.
struct Collected {
  std::vector<Device> devices;
  std::vector<std::vector<PciAddress>> switches;  // per device: the host switches above it, nearest first
  std::vector<numa::RootBus> roots;               // per device: its host bridge's root bus
  std::vector<int> companion_of;                  // per device: the GPU's device index, or -1
};

class Collector {
 public:
  Collector(const numa::HostModel& host, int cells) : host_(host), cells_(cells) {}

  Status add(DeviceRole role, const numa::PlacedDevice& placed, std::string alias, int ordinal) {
    HA_TRY(const auto* function, lookup(placed.address));
    if (placed.guest_cell < 0 || placed.guest_cell >= cells_) {
      return invalid_placement(placed.address.to_string() + " is placed in guest cell " +
                               std::to_string(placed.guest_cell) + ", which does not exist");
    }
    // The host model is the truth about switches; a placement that says otherwise is wrong.
    if (placed.host_switch && placed.host_switch != function->pcie_switch) {
      return invalid_placement(placed.address.to_string() + " is recorded under switch " +
                               placed.host_switch->to_string() + ", but the host has it under " +
                               (function->pcie_switch ? function->pcie_switch->to_string() : std::string("no switch")));
    }
    push(role, function, placed.guest_cell, numa::reach_of(host_, *function), std::move(alias), ordinal, -1);
    return ok_status();
  }

  Status add_companion(const PciAddress& address, int gpu, std::string alias) {
    HA_TRY(const auto* function, lookup(address));
    const Device& owner = out_.devices[static_cast<std::size_t>(gpu)];
    push(DeviceRole::companion, function, owner.cell, numa::PciReach{}, std::move(alias), owner.ordinal, gpu);
    return ok_status();
  }

  int last() const { return static_cast<int>(out_.devices.size()) - 1; }
  Collected take() { return std::move(out_); }

 private:
  Result<const numa::PciFunction*> lookup(const PciAddress& address) {
    const auto* function = host_.find(address);
    if (function == nullptr) return invalid_placement(address.to_string() + " is not a PCI function of this host");
    if (!seen_.insert(address).second) return invalid_placement(address.to_string() + " is placed twice");
    return function;
  }

  void push(DeviceRole role, const numa::PciFunction* function, int cell, numa::PciReach reach, std::string alias,
            int ordinal, int companion_of) {
    Device device;
    device.role = role;
    device.host = function;
    device.cell = cell;
    device.alias = std::move(alias);
    device.ordinal = ordinal;
    out_.devices.push_back(std::move(device));
    out_.switches.push_back(std::move(reach.switches));
    out_.roots.push_back(reach.root);
    out_.companion_of.push_back(companion_of);
  }

  const numa::HostModel& host_;
  int cells_;
  std::set<PciAddress> seen_;
  Collected out_;
};

Result<Collected> collect(const numa::HostModel& host, const numa::Placement& placement) {
  Collector collector(host, static_cast<int>(placement.cells.size()));
  for (std::size_t i = 0; i < placement.gpus.size(); ++i) {
    const auto& gpu = placement.gpus[i];
    const std::string alias = "ua-gpu" + std::to_string(i);
    HA_TRY_STATUS(collector.add(DeviceRole::gpu, gpu.gpu, alias, static_cast<int>(i)));
    const int index = collector.last();
    for (std::size_t k = 0; k < gpu.companions.size(); ++k) {
      HA_TRY_STATUS(collector.add_companion(gpu.companions[k], index, alias + "-fn" + std::to_string(k + 1)));
    }
  }
  int vf = 0;
  for (const auto& gpu : placement.gpus) {
    for (const auto& placed : gpu.vfs) {
      HA_TRY_STATUS(collector.add(DeviceRole::nic, placed, "ua-vf" + std::to_string(vf), vf));
      ++vf;
    }
  }
  for (const auto& placed : placement.extra_vfs) {
    HA_TRY_STATUS(collector.add(DeviceRole::nic, placed, "ua-vf" + std::to_string(vf), vf));
    ++vf;
  }
  for (std::size_t j = 0; j < placement.whole_nics.size(); ++j) {
    const int ordinal = static_cast<int>(j);
    HA_TRY_STATUS(collector.add(DeviceRole::whole_nic, placement.whole_nics[j], "ua-nic" + std::to_string(j), ordinal));
  }
  for (std::size_t j = 0; j < placement.nvme.size(); ++j) {
    const int ordinal = static_cast<int>(j);
    HA_TRY_STATUS(collector.add(DeviceRole::nvme, placement.nvme[j], "ua-nvme" + std::to_string(j), ordinal));
  }
  // Where the host has them: behind the mirror of their host switch, in their node's cell (or the
  // nearest, numa::guest_cell_for), so the guest's Fabric Manager finds each NVSwitch on the PCIe
  // path the GPUs' driver expects.
  for (std::size_t j = 0; j < placement.nvswitches.size(); ++j) {
    const int ordinal = static_cast<int>(j);
    HA_TRY_STATUS(
        collector.add(DeviceRole::nvswitch, placement.nvswitches[j], "ua-nvswitch" + std::to_string(j), ordinal));
  }
  return collector.take();
}

// A child of an emulated switch: a placed device (with its companions), or a nested switch.
struct Child {
  bool is_switch = false;
  std::size_t device = 0;  // the device index, when not a switch
};

// A host switch that leads to placed devices; children keyed by host address (a nested switch's by
// its upstream port's), which is the order of their downstream ports.
struct SwitchNode {
  std::map<PciAddress, Child> children;
};

// A root port's worth of devices: those under one outermost host switch, or a single switch-less
// device.
struct Unit {
  std::optional<PciAddress> host_switch;      // the outermost switch; nullopt: a lone device
  std::size_t lone_device = 0;                // when host_switch is nullopt
  std::map<PciAddress, SwitchNode> switches;  // every switch of the unit with a placed device beneath
};
using BridgeUnits = std::map<PciAddress, Unit>;  // one expander bus's units, sorted by the unit's key
// A guest cell's expander buses, one per host bridge its devices sit under, in root bus order.
using CellUnits = std::map<numa::RootBus, BridgeUnits>;

// Adds device d to its unit: under its nearest switch, each switch under the next one out. Switches
// with no placed device beneath never enter the tree.
void add_member(Unit& unit, const std::vector<PciAddress>& switches, std::size_t d, const PciAddress& address) {
  if (switches.empty()) {
    unit.lone_device = d;
    return;
  }
  unit.host_switch = switches.back();
  unit.switches[switches.front()].children[address] = Child{false, d};
  for (std::size_t i = 1; i < switches.size(); ++i)
    unit.switches[switches[i]].children[switches[i - 1]] = Child{true, 0};
}

std::vector<CellUnits> group_units(const Collected& collected, int cells) {
  std::vector<CellUnits> units(static_cast<std::size_t>(cells));
  for (std::size_t d = 0; d < collected.devices.size(); ++d) {
    if (collected.companion_of[d] >= 0) continue;
    const auto& device = collected.devices[d];
    const auto& switches = collected.switches[d];
    const auto& key = switches.empty() ? device.host->address : switches.back();
    auto& bridge = units[static_cast<std::size_t>(device.cell)][collected.roots[d]];
    add_member(bridge[key], switches, d, device.host->address);
  }
  return units;
}

PciAddress guest_address(int bus, int slot, int function) {
  return PciAddress{0, static_cast<uint8_t>(bus), static_cast<uint8_t>(slot), static_cast<uint8_t>(function)};
}

class LayoutBuilder {
 public:
  LayoutBuilder(Collected collected, int cells) : collected_(std::move(collected)), cells_(cells) {}

  Result<PciLayout> build() {
    const auto units = group_units(collected_, cells_);
    // One expander bus per host bridge of each cell, and one for a cell without devices, so every
    // cell keeps a bus with its node.
    static const BridgeUnits kNone;
    std::vector<std::pair<int, const BridgeUnits*>> expanders;
    for (int c = 0; c < cells_; ++c) {
      const auto& bridges = units[static_cast<std::size_t>(c)];
      if (bridges.empty()) expanders.emplace_back(c, &kNone);
      for (const auto& [root, bridge_units] : bridges) expanders.emplace_back(c, &bridge_units);
    }
    if (expanders.size() > static_cast<std::size_t>(kMaxSlot - kFirstExpanderSlot) + 1) {
      return invalid_placement("the guest needs " + std::to_string(expanders.size()) +
                               " expander buses (one per host bridge of each cell); pcie-root has room for " +
                               std::to_string(kMaxSlot - kFirstExpanderSlot + 1));
    }
    controllers_.push_back(Controller{});  // pcie-root, index 0
    const int count = static_cast<int>(expanders.size());
    for (int k = 0; k < count; ++k) add_expander(k, expanders[static_cast<std::size_t>(k)].first, count);
    for (int k = 0; k < count; ++k) {
      const auto& [cell, bridge_units] = expanders[static_cast<std::size_t>(k)];
      HA_TRY_STATUS(place_expander(k, cell, count, *bridge_units));
    }
    PciLayout layout{std::move(controllers_), std::move(collected_.devices)};
    std::sort(layout.devices.begin(), layout.devices.end(),
              [](const Device& a, const Device& b) { return a.guest < b.guest; });
    return layout;
  }

 private:
  // The port a switch's upstream port plugs into: its controller, its secondary bus, and the upstream
  // port of the switch that port belongs to (-1 for a root port).
  struct Port {
    int controller = 0;
    int bus = 0;
    int upstream = -1;
  };

  void add_expander(int k, int cell, int count) {
    Controller pxb;
    pxb.index = 1 + k;
    pxb.model = ControllerModel::expander_bus;
    pxb.plug = Plug{0, kFirstExpanderSlot + k, 0};
    pxb.cell = cell;
    pxb.bus_nr = expander_bus_nr(k, count);
    pxb.guest = guest_address(0, kFirstExpanderSlot + k, 0);
    controllers_.push_back(pxb);
  }

  Result<int> add_controller(Controller controller) {
    controller.index = static_cast<int>(controllers_.size());
    if (controller.index > kMaxControllerIndex) {
      return invalid_placement("the guest PCI tree needs more than " + std::to_string(kMaxControllerIndex) +
                               " controllers");
    }
    if (controller.model == ControllerModel::root_port || controller.model == ControllerModel::switch_downstream) {
      controller.chassis = controller.index;
    }
    controllers_.push_back(controller);
    return controller.index;
  }

  Status place_expander(int k, int cell, int count, const BridgeUnits& units) {
    const std::string name = "expander bus " + std::to_string(k) + " (guest cell " + std::to_string(cell) + ")";
    if (units.size() > static_cast<std::size_t>(kMaxSlot) + 1) {
      return invalid_placement(name + " needs " + std::to_string(units.size()) +
                               " root ports; an expander bus has 32 slots");
    }
    const int pxb = 1 + k;
    const int first_bus = expander_bus_nr(k, count);
    const int last_bus = k + 1 < count ? expander_bus_nr(k + 1, count) - 1 : kMaxBus;
    next_bus_ = first_bus + 1;
    int slot = 0;
    for (const auto& [key, unit] : units) {
      HA_TRY_STATUS(place_unit(cell, pxb, first_bus, slot++, unit));
    }
    if (next_bus_ - 1 > last_bus) {
      return invalid_placement(name + " needs buses up to " + std::to_string(next_bus_ - 1) + ", past the " +
                               std::to_string(last_bus) + " it can number");
    }
    return ok_status();
  }

  Status place_unit(int cell, int pxb, int pxb_bus, int slot, const Unit& unit) {
    Controller root_port;
    root_port.model = ControllerModel::root_port;
    root_port.plug = Plug{pxb, slot, 0};
    root_port.cell = cell;
    root_port.port = slot << 3;
    root_port.guest = guest_address(pxb_bus, slot, 0);
    root_port.leads_to = unit.host_switch ? *unit.host_switch : collected_.devices[unit.lone_device].host->address;
    root_port.alias = "ua-port" + std::to_string(controllers_.size());
    HA_TRY(const int rp, add_controller(root_port));
    const int rp_bus = next_bus_++;
    if (!unit.host_switch) {
      place_device(unit.lone_device, Plug{rp, 0, 0}, guest_address(rp_bus, 0, 0), -1);
      return ok_status();
    }
    return place_switch(cell, Port{rp, rp_bus, -1}, unit, *unit.host_switch);
  }

  // Emits the upstream port, then each downstream port followed by everything below it, so that
  // controller indexes and bus numbers both run depth-first in slot order.
  Status place_switch(int cell, const Port& parent, const Unit& unit, const PciAddress& host_switch) {
    const auto& children = unit.switches.at(host_switch).children;
    if (children.size() > static_cast<std::size_t>(kMaxSlot) + 1) {
      return invalid_placement("host switch " + host_switch.to_string() + " leads to " +
                               std::to_string(children.size()) +
                               " placed functions and nested switches; an emulated switch has 32 downstream ports");
    }
    Controller upstream;
    upstream.model = ControllerModel::switch_upstream;
    upstream.plug = Plug{parent.controller, 0, 0};
    upstream.cell = cell;
    upstream.guest = guest_address(parent.bus, 0, 0);
    upstream.host_switch = host_switch;
    upstream.upstream = parent.upstream;
    HA_TRY(const int up, add_controller(upstream));
    const int switch_bus = next_bus_++;
    int port = 0;
    for (const auto& [address, child] : children) {
      Controller downstream;
      downstream.model = ControllerModel::switch_downstream;
      downstream.plug = Plug{up, port, 0};
      downstream.cell = cell;
      downstream.port = port;
      downstream.guest = guest_address(switch_bus, port, 0);
      HA_TRY(const int dp, add_controller(downstream));
      const int dp_bus = next_bus_++;
      if (child.is_switch) {
        HA_TRY_STATUS(place_switch(cell, Port{dp, dp_bus, up}, unit, address));
      } else {
        place_device(child.device, Plug{dp, 0, 0}, guest_address(dp_bus, 0, 0), up);
      }
      ++port;
    }
    return ok_status();
  }

  void place_device(std::size_t d, const Plug& plug, const PciAddress& guest, int upstream) {
    auto& device = collected_.devices[d];
    device.plug = plug;
    device.guest = guest;
    device.upstream = upstream;
    int function = 0;
    for (std::size_t c = 0; c < collected_.devices.size(); ++c) {
      if (collected_.companion_of[c] != static_cast<int>(d) || function == kMaxFunction) continue;
      ++function;
      auto& companion = collected_.devices[c];
      companion.plug = Plug{plug.controller, plug.slot, function};
      companion.guest = guest_address(guest.bus, guest.device, function);
      companion.upstream = upstream;
      device.multifunction = true;
    }
  }

  Collected collected_;
  int cells_;
  std::vector<Controller> controllers_;
  int next_bus_ = 0;
};

Status check_companions(const Collected& collected) {
  std::map<int, int> per_gpu;
  for (const int owner : collected.companion_of) {
    if (owner >= 0 && ++per_gpu[owner] > kMaxFunction) {
      return invalid_placement("GPU " + collected.devices[static_cast<std::size_t>(owner)].host->address.to_string() +
                               " has more than 7 companion functions");
    }
  }
  return ok_status();
}

}  // namespace

const char* to_string(DeviceRole role) {
  switch (role) {
    case DeviceRole::gpu:
      return "gpu";
    case DeviceRole::companion:
      return "companion";
    case DeviceRole::nic:
    case DeviceRole::whole_nic:
      return "nic";
    case DeviceRole::nvme:
      return "nvme";
    case DeviceRole::nvswitch:
      return "nvswitch";
  }
  return "?";
}

int expander_bus_nr(int expander, int expanders) {
  const int stride = std::min(0x40, (0x100 / (expanders + 1)) & ~7);
  return stride * (expander + 1);
}

Result<PciLayout> build_pci_layout(const numa::HostModel& host, const numa::Placement& placement) {
  HA_TRY(auto collected, collect(host, placement));
  HA_TRY_STATUS(check_companions(collected));
  for (auto& device : collected.devices) {
    if (device.role == DeviceRole::gpu) device.clique = placement.gpus[static_cast<std::size_t>(device.ordinal)].clique;
  }
  return LayoutBuilder(std::move(collected), static_cast<int>(placement.cells.size())).build();
}

}  // namespace hostagent::render::detail
