// render/pci_layout: builds the guest PCI tree (scheme in pci_layout.hpp): collects the placed
// functions, groups them per guest cell into host-switch and switch-less units, then hands out
// controller indexes, slots and the bus numbers the guest firmware will assign.
#include "pci_layout.hpp"

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

Error invalid(std::string message) {
  return Error{ErrorCode::invalid_argument, "placement: " + std::move(message)};
}

// The placed functions before they have guest addresses.
struct Collected {
  std::vector<Device> devices;
  std::vector<std::optional<PciAddress>> host_switch;  // per device
  std::vector<int> companion_of;                       // per device: the GPU's device index, or -1
};

class Collector {
 public:
  Collector(const numa::HostModel& host, int cells) : host_(host), cells_(cells) {}

  Status add(DeviceRole role, const numa::PlacedDevice& placed, std::string alias, int ordinal) {
    HA_TRY(const auto* function, lookup(placed.address));
    if (placed.guest_cell < 0 || placed.guest_cell >= cells_) {
      return invalid(placed.address.to_string() + " is placed in guest cell " + std::to_string(placed.guest_cell) +
                     ", which does not exist");
    }
    // The host model is the truth about switches; a placement that says otherwise is wrong.
    if (placed.host_switch && placed.host_switch != function->pcie_switch) {
      return invalid(placed.address.to_string() + " is recorded under switch " + placed.host_switch->to_string() +
                     ", but the host has it under " +
                     (function->pcie_switch ? function->pcie_switch->to_string() : std::string("no switch")));
    }
    push(role, function, placed.guest_cell, function->pcie_switch, std::move(alias), ordinal, -1);
    return ok_status();
  }

  Status add_companion(const PciAddress& address, int gpu, std::string alias) {
    HA_TRY(const auto* function, lookup(address));
    const Device& owner = out_.devices[static_cast<std::size_t>(gpu)];
    push(DeviceRole::companion, function, owner.cell, std::nullopt, std::move(alias), owner.ordinal, gpu);
    return ok_status();
  }

  int last() const { return static_cast<int>(out_.devices.size()) - 1; }
  Collected take() { return std::move(out_); }

 private:
  Result<const numa::PciFunction*> lookup(const PciAddress& address) {
    const auto* function = host_.find(address);
    if (function == nullptr) return invalid(address.to_string() + " is not a PCI function of this host");
    if (!seen_.insert(address).second) return invalid(address.to_string() + " is placed twice");
    return function;
  }

  void push(DeviceRole role, const numa::PciFunction* function, int cell, std::optional<PciAddress> host_switch,
            std::string alias, int ordinal, int companion_of) {
    Device device;
    device.role = role;
    device.host = function;
    device.cell = cell;
    device.alias = std::move(alias);
    device.ordinal = ordinal;
    out_.devices.push_back(std::move(device));
    out_.host_switch.push_back(host_switch);
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
  for (std::size_t j = 0; j < placement.nvme.size(); ++j) {
    const int ordinal = static_cast<int>(j);
    HA_TRY_STATUS(collector.add(DeviceRole::nvme, placement.nvme[j], "ua-nvme" + std::to_string(j), ordinal));
  }
  return collector.take();
}

// A root port's worth of devices: those under one host switch, or a single switch-less device.
struct Unit {
  std::optional<PciAddress> host_switch;
  std::vector<std::size_t> members;  // device indexes, companions aside, by host address
};
using CellUnits = std::map<PciAddress, Unit>;  // sorted by the unit's key

std::vector<CellUnits> group_units(const Collected& collected, int cells) {
  std::vector<CellUnits> units(static_cast<std::size_t>(cells));
  for (std::size_t d = 0; d < collected.devices.size(); ++d) {
    if (collected.companion_of[d] >= 0) continue;
    const auto& device = collected.devices[d];
    const auto& host_switch = collected.host_switch[d];
    auto& unit = units[static_cast<std::size_t>(device.cell)][host_switch ? *host_switch : device.host->address];
    unit.host_switch = host_switch;
    unit.members.push_back(d);
  }
  for (auto& cell : units) {
    for (auto& [key, unit] : cell) {
      std::sort(unit.members.begin(), unit.members.end(), [&](std::size_t a, std::size_t b) {
        return collected.devices[a].host->address < collected.devices[b].host->address;
      });
    }
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
    add_roots();
    for (int c = 0; c < cells_; ++c) HA_TRY_STATUS(place_cell(c, units[static_cast<std::size_t>(c)]));
    PciLayout layout{std::move(controllers_), std::move(collected_.devices)};
    std::sort(layout.devices.begin(), layout.devices.end(),
              [](const Device& a, const Device& b) { return a.guest < b.guest; });
    return layout;
  }

 private:
  void add_roots() {
    controllers_.push_back(Controller{});  // pcie-root, index 0
    for (int c = 0; c < cells_; ++c) {
      Controller pxb;
      pxb.index = 1 + c;
      pxb.model = ControllerModel::expander_bus;
      pxb.plug = Plug{0, kFirstExpanderSlot + c, 0};
      pxb.cell = c;
      pxb.bus_nr = expander_bus_nr(c, cells_);
      pxb.guest = guest_address(0, kFirstExpanderSlot + c, 0);
      controllers_.push_back(pxb);
    }
  }

  Result<int> add_controller(Controller controller) {
    controller.index = static_cast<int>(controllers_.size());
    if (controller.index > kMaxControllerIndex) {
      return invalid("the guest PCI tree needs more than " + std::to_string(kMaxControllerIndex) + " controllers");
    }
    if (controller.model == ControllerModel::root_port || controller.model == ControllerModel::switch_downstream) {
      controller.chassis = controller.index;
    }
    controllers_.push_back(controller);
    return controller.index;
  }

  Status place_cell(int cell, const CellUnits& units) {
    if (units.size() > static_cast<std::size_t>(kMaxSlot) + 1) {
      return invalid("guest cell " + std::to_string(cell) + " needs " + std::to_string(units.size()) +
                     " root ports; an expander bus has 32 slots");
    }
    const int pxb = 1 + cell;
    const int first_bus = expander_bus_nr(cell, cells_);
    const int last_bus = cell + 1 < cells_ ? expander_bus_nr(cell + 1, cells_) - 1 : kMaxBus;
    next_bus_ = first_bus + 1;
    int slot = 0;
    for (const auto& [key, unit] : units) {
      HA_TRY_STATUS(place_unit(cell, pxb, first_bus, slot++, unit));
    }
    if (next_bus_ - 1 > last_bus) {
      return invalid("guest cell " + std::to_string(cell) + " needs buses up to " + std::to_string(next_bus_ - 1) +
                     ", past the " + std::to_string(last_bus) + " its expander bus can number");
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
    HA_TRY(const int rp, add_controller(root_port));
    const int rp_bus = next_bus_++;
    if (!unit.host_switch) {
      place_device(unit.members.front(), Plug{rp, 0, 0}, guest_address(rp_bus, 0, 0), -1);
      return ok_status();
    }
    return place_switch(cell, rp, rp_bus, unit);
  }

  Status place_switch(int cell, int rp, int rp_bus, const Unit& unit) {
    if (unit.members.size() > static_cast<std::size_t>(kMaxSlot) + 1) {
      return invalid("host switch " + unit.host_switch->to_string() + " carries " +
                     std::to_string(unit.members.size()) + " placed functions; an emulated switch has 32 ports");
    }
    Controller upstream;
    upstream.model = ControllerModel::switch_upstream;
    upstream.plug = Plug{rp, 0, 0};
    upstream.cell = cell;
    upstream.guest = guest_address(rp_bus, 0, 0);
    upstream.host_switch = unit.host_switch;
    HA_TRY(const int up, add_controller(upstream));
    const int switch_bus = next_bus_++;
    for (std::size_t k = 0; k < unit.members.size(); ++k) {
      const int port = static_cast<int>(k);
      Controller downstream;
      downstream.model = ControllerModel::switch_downstream;
      downstream.plug = Plug{up, port, 0};
      downstream.cell = cell;
      downstream.port = port;
      downstream.guest = guest_address(switch_bus, port, 0);
      HA_TRY(const int dp, add_controller(downstream));
      place_device(unit.members[k], Plug{dp, 0, 0}, guest_address(next_bus_++, 0, 0), up);
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
      return invalid("GPU " + collected.devices[static_cast<std::size_t>(owner)].host->address.to_string() +
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
      return "nic";
    case DeviceRole::nvme:
      return "nvme";
  }
  return "?";
}

int expander_bus_nr(int cell, int cells) {
  const int stride = std::min(0x40, (0x100 / (cells + 1)) & ~7);
  return stride * (cell + 1);
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
