// simhost/pci_plan: validation and derived layout of a HostSpec's PCI tree (see pci_plan.hpp).
#include "pci_plan.hpp"

#include <algorithm>
#include <cstdio>
#include <map>
#include <set>
#include <tuple>

namespace hostagent::simhost::detail {
namespace {

Error invalid(const std::string& function, const std::string& what) {
  return Error{ErrorCode::invalid_argument, "simhost: function " + function + ": " + what};
}

std::string hex2(unsigned value) {
  char buf[8];
  std::snprintf(buf, sizeof(buf), "0x%02x", value);
  return buf;
}

bool is_power_of_two(uint64_t v) {
  return v != 0 && (v & (v - 1)) == 0;
}

uint64_t align_up(uint64_t value, uint64_t alignment) {
  return (value + alignment - 1) / alignment * alignment;
}

// Hands out MMIO addresses the way the kernel sizes bridge windows: BARs naturally aligned, windows
// on 1 MiB boundaries (PCI-to-PCI Bridge 1.2 §3.2.5.8). Non-prefetchable BARs, 64-bit ones
// included, go below 4 GiB because a bridge's non-prefetchable window is 32-bit only.
class MmioAllocator {
 public:
  static constexpr uint64_t kLowStart = 0x8000'0000;
  static constexpr uint64_t kLowEnd = 0xfec0'0000;  // the IOAPIC and LAPIC live above
  static constexpr uint64_t kHighStart = 0x2000'0000'0000;

  uint64_t take(bool high, uint64_t size, uint64_t alignment) {
    uint64_t& cursor = high ? high_ : low_;
    cursor = align_up(cursor, alignment);
    const uint64_t at = cursor;
    cursor += size;
    return at;
  }
  void align_windows() {
    low_ = align_up(low_, kWindowGranule);
    high_ = align_up(high_, kWindowGranule);
  }
  uint64_t low() const { return low_; }
  uint64_t high() const { return high_; }
  bool low_overflowed() const { return low_ > kLowEnd; }

 private:
  static constexpr uint64_t kWindowGranule = 1 << 20;
  uint64_t low_ = kLowStart;
  uint64_t high_ = kHighStart;
};

bool goes_high(const SimBar& bar) {
  return bar.is_64bit && bar.prefetchable;
}

class Planner {
 public:
  explicit Planner(const HostSpec& spec) : spec_(spec) {}

  Result<PciPlan> run() {
    HA_TRY_STATUS(parse_addresses());
    HA_TRY_STATUS(check_attributes());
    HA_TRY_STATUS(link_parents());
    HA_TRY_STATUS(link_virtual_functions());
    HA_TRY_STATUS(assign_bus_ranges());
    HA_TRY_STATUS(check_bus_containment());
    mark_multifunction();
    assign_iommu_groups();
    assign_ports();
    HA_TRY_STATUS(place_bars());
    assign_dirs();
    return std::move(plan_);
  }

 private:
  PlannedFunction& at(int i) { return plan_.functions[static_cast<std::size_t>(i)]; }
  const std::string& name(int i) { return at(i).spec->address; }
  int count() const { return static_cast<int>(plan_.functions.size()); }

  Status parse_addresses() {
    for (const auto& fn : spec_.functions) {
      const auto addr = PciAddress::parse(fn.address);
      // The canonical form only: the address names the function's sysfs directory.
      if (!addr.ok() || addr->to_string() != fn.address) {
        return invalid(fn.address, "address is not DDDD:BB:DD.F in lowercase hex");
      }
      if (!by_address_.emplace(fn.address, count()).second) {
        return invalid(fn.address, "listed twice");
      }
      PlannedFunction planned;
      planned.spec = &fn;
      planned.addr = *addr;
      plan_.functions.push_back(std::move(planned));
    }
    return ok_status();
  }

  Status check_bars(int i) {
    const auto& fn = *at(i).spec;
    std::set<int> used;
    const int last_index = at(i).is_bridge() ? 1 : 5;
    for (const auto* bars : {&fn.bars, &fn.sriov_vf_bars}) {
      used.clear();
      for (const auto& bar : *bars) {
        const int top = bar.index + (bar.is_64bit ? 1 : 0);
        if (bar.index < 0 || top > last_index) {
          return invalid(name(i), "BAR " + std::to_string(bar.index) + " does not fit the header");
        }
        if (!is_power_of_two(bar.size_bytes) || bar.size_bytes < 16) {
          return invalid(name(i), "BAR " + std::to_string(bar.index) + " size is not a power of two >= 16");
        }
        bool clash = !used.insert(bar.index).second;
        if (bar.is_64bit) clash = !used.insert(top).second || clash;
        if (clash) {
          return invalid(name(i), "BAR " + std::to_string(bar.index) + " overlaps another BAR's registers");
        }
      }
    }
    return ok_status();
  }

  Status check_attributes() {
    std::set<int> node_ids;
    for (const auto& node : spec_.nodes) node_ids.insert(node.id);
    std::set<std::string> names;
    for (int i = 0; i < count(); ++i) {
      const auto& fn = *at(i).spec;
      if (fn.numa_node != -1 && node_ids.count(fn.numa_node) == 0) {
        return invalid(name(i), "numa_node " + std::to_string(fn.numa_node) + " is not a node of the host");
      }
      for (const auto& iface : fn.net_interfaces) {
        if (!names.insert("net/" + iface).second) {
          return invalid(name(i), "network interface " + iface + " is used twice");
        }
      }
      for (const auto& dev : fn.rdma_devices) {
        if (!names.insert("rdma/" + dev).second) {
          return invalid(name(i), "RDMA device " + dev + " is used twice");
        }
      }
      if (fn.link_cap_gen < 1 || fn.link_cap_gen > 6 || fn.link_sta_gen < 0 || fn.link_sta_gen > 6) {
        return invalid(name(i), "link generation outside 1..6");
      }
      HA_TRY_STATUS(check_bars(i));
    }
    return ok_status();
  }

  Status link_parents() {
    for (int i = 0; i < count(); ++i) {
      const std::string& parent = at(i).spec->parent;
      if (parent.empty()) continue;
      const auto found = by_address_.find(parent);
      if (found == by_address_.end()) {
        return invalid(name(i), "parent " + parent + " is not in the spec");
      }
      if (found->second >= i) return invalid(name(i), "listed before its parent " + parent);
      if (!at(found->second).is_bridge()) {
        return invalid(name(i), "parent " + parent + " is not a bridge");
      }
      at(i).parent = found->second;
      at(found->second).children.push_back(i);
    }
    return ok_status();
  }

  Status link_one_vf(int i) {
    const auto& vf = *at(i).spec;
    const auto found = by_address_.find(vf.physfn);
    if (found == by_address_.end()) {
      return invalid(name(i), "physfn " + vf.physfn + " is not in the spec");
    }
    const int pf = found->second;
    const auto& pf_spec = *at(pf).spec;
    if (pf_spec.sriov_total_vfs <= 0) {
      return invalid(name(i), "physfn " + vf.physfn + " has no SR-IOV capability");
    }
    if (pf > i) return invalid(name(i), "listed before its PF " + vf.physfn);
    if (vf.parent != pf_spec.parent) {
      return invalid(name(i), "a VF sits beside its PF: parent must be '" + pf_spec.parent + "'");
    }
    if (at(i).is_bridge() || vf.sriov_total_vfs > 0) {
      return invalid(name(i), "a VF must be a plain endpoint");
    }
    // Routing ID of VF N = PF + First VF Offset + N * VF Stride (PCIe Base Spec 6.0 §9.3.3.10).
    const int delta = routing_id(at(i).addr) - routing_id(at(pf).addr) - pf_spec.sriov_vf_offset;
    const int stride = std::max(pf_spec.sriov_vf_stride, 1);
    const int n = delta / stride;
    if (at(i).addr.domain != at(pf).addr.domain || delta < 0 || delta % stride != 0 || n >= pf_spec.sriov_num_vfs) {
      return invalid(name(i), "not at a VF routing ID of " + vf.physfn + " (offset " +
                                  std::to_string(pf_spec.sriov_vf_offset) + ", stride " + std::to_string(stride) +
                                  ", " + std::to_string(pf_spec.sriov_num_vfs) + " VFs)");
    }
    at(i).physfn = pf;
    at(i).vf_number = n;
    at(pf).virtfns.push_back(i);
    return ok_status();
  }

  Status check_pf(int i) {
    const auto& fn = *at(i).spec;
    if (fn.sriov_total_vfs <= 0) return ok_status();
    if (fn.sriov_num_vfs < 0 || fn.sriov_num_vfs > fn.sriov_total_vfs) {
      return invalid(name(i), "sriov_num_vfs exceeds sriov_total_vfs");
    }
    if (fn.sriov_vf_offset < 1 || fn.sriov_vf_stride < 1) {
      return invalid(name(i), "VF offset and stride must be at least 1");
    }
    if (static_cast<int>(at(i).virtfns.size()) != fn.sriov_num_vfs) {
      return invalid(name(i), "enables " + std::to_string(fn.sriov_num_vfs) + " VFs but the spec lists " +
                                  std::to_string(at(i).virtfns.size()));
    }
    std::sort(at(i).virtfns.begin(), at(i).virtfns.end(),
              [this](int a, int b) { return at(a).vf_number < at(b).vf_number; });
    return ok_status();
  }

  Status link_virtual_functions() {
    for (int i = 0; i < count(); ++i) {
      if (!at(i).spec->physfn.empty()) HA_TRY_STATUS(link_one_vf(i));
    }
    for (int i = 0; i < count(); ++i) HA_TRY_STATUS(check_pf(i));
    return ok_status();
  }

  // Children come after parents, so walking backwards sees every child's range before its bridge.
  Status assign_bus_ranges() {
    for (int i = count() - 1; i >= 0; --i) {
      if (!at(i).is_bridge()) continue;
      auto& p = at(i).placement;
      if (at(i).children.empty()) {
        return invalid(name(i), "a bridge needs a function beneath it to take its bus number from");
      }
      int secondary = 0xff;
      int subordinate = 0;
      for (const int c : at(i).children) {
        if (at(c).physfn < 0) secondary = std::min<int>(secondary, at(c).addr.bus);
        subordinate = std::max<int>(subordinate, at(c).is_bridge() ? at(c).placement.subordinate_bus : at(c).addr.bus);
      }
      for (const int c : at(i).children) {
        if (at(c).physfn < 0 && at(c).addr.bus != secondary) {
          return invalid(name(c),
                         "its siblings beneath " + name(i) + " sit on bus " + hex2(static_cast<unsigned>(secondary)));
        }
      }
      if (secondary <= at(i).addr.bus) {
        return invalid(name(i), "the bus beneath a bridge must be above its own");
      }
      p.primary_bus = at(i).addr.bus;
      p.secondary_bus = static_cast<uint8_t>(secondary);
      p.subordinate_bus = static_cast<uint8_t>(subordinate);
    }
    return ok_status();
  }

  bool is_beneath(int i, int bridge) {
    for (int p = at(i).parent; p >= 0; p = at(p).parent) {
      if (p == bridge) return true;
    }
    return false;
  }

  // Bus ranges must nest like the tree: a bus inside a bridge's [secondary, subordinate] belongs to
  // that bridge, or hwloc and lspci would hang functions under the wrong bridge.
  Status check_bus_containment() {
    for (int b = 0; b < count(); ++b) {
      if (!at(b).is_bridge()) continue;
      const auto& p = at(b).placement;
      for (int i = 0; i < count(); ++i) {
        const auto& a = at(i).addr;
        const bool inside = a.domain == at(b).addr.domain && a.bus >= p.secondary_bus && a.bus <= p.subordinate_bus;
        if (inside && !is_beneath(i, b)) {
          return invalid(name(i), "bus " + hex2(a.bus) + " lies in the range of bridge " + name(b) + " [" +
                                      hex2(p.secondary_bus) + "-" + hex2(p.subordinate_bus) +
                                      "] but the function is not beneath it");
        }
      }
    }
    return ok_status();
  }

  void mark_multifunction() {
    std::map<std::tuple<int, int, int>, int> per_device;
    const auto key = [](const PciAddress& a) { return std::make_tuple(a.domain, int{a.bus}, int{a.device}); };
    for (const auto& f : plan_.functions) {
      if (f.spec->physfn.empty()) ++per_device[key(f.addr)];
    }
    for (auto& f : plan_.functions) {
      f.placement.is_vf = !f.spec->physfn.empty();
      f.placement.multifunction = !f.placement.is_vf && per_device[key(f.addr)] > 1;
    }
  }

  // Explicit groups stay; the rest are numbered in spec order, skipping numbers already taken.
  void assign_iommu_groups() {
    std::set<int> taken;
    for (const auto& f : plan_.functions) {
      if (f.spec->iommu_group) taken.insert(*f.spec->iommu_group);
    }
    int next = 0;
    for (auto& f : plan_.functions) {
      if (f.spec->iommu_group) {
        f.iommu_group = *f.spec->iommu_group;
        continue;
      }
      while (taken.count(next) != 0) ++next;
      f.iommu_group = next;
      taken.insert(next);
    }
  }

  // Root and downstream ports implement slots, numbered in spec order; ports report their device
  // number as Port Number, as Intel root ports and Broadcom switches do.
  void assign_ports() {
    uint16_t slot = 0;
    for (auto& f : plan_.functions) {
      const auto type = f.spec->port_type;
      if (type == SimPortType::root_port || type == SimPortType::downstream) {
        f.placement.physical_slot = ++slot;
        f.placement.port_number = f.addr.device;
      }
      f.placement.link_up_below = f.is_bridge() && !f.children.empty();
    }
  }

  void place_own_bars(int i) {
    auto& f = at(i);
    if (f.placement.is_vf) return;  // a VF's BARs follow from its PF's VF BARs
    for (const auto& bar : f.spec->bars) {
      const uint64_t address = mmio_.take(goes_high(bar), bar.size_bytes, bar.size_bytes);
      f.placement.bars.push_back({bar.index, address, bar.size_bytes, bar.is_64bit, bar.prefetchable});
    }
    // Each VF BAR is one block of TotalVFs copies, aligned to one VF's size (§9.3.3.14).
    for (const auto& bar : f.spec->sriov_vf_bars) {
      const uint64_t block = bar.size_bytes * static_cast<uint64_t>(f.spec->sriov_total_vfs);
      const uint64_t address = mmio_.take(goes_high(bar), block, bar.size_bytes);
      f.placement.vf_bars.push_back({bar.index, address, bar.size_bytes, bar.is_64bit, bar.prefetchable});
    }
  }

  void place_subtree(int i) {
    place_own_bars(i);
    if (!at(i).is_bridge()) return;
    mmio_.align_windows();
    const uint64_t low = mmio_.low();
    const uint64_t high = mmio_.high();
    for (const int c : at(i).children) place_subtree(c);
    mmio_.align_windows();
    auto& p = at(i).placement;
    if (mmio_.low() > low) p.memory_window = Window{low, mmio_.low() - 1};
    if (mmio_.high() > high) p.prefetchable_window = Window{high, mmio_.high() - 1};
  }

  Status place_bars() {
    for (int i = 0; i < count(); ++i) {
      if (at(i).parent < 0) place_subtree(i);
    }
    if (mmio_.low_overflowed()) {
      return Error{ErrorCode::invalid_argument,
                   "simhost: host " + spec_.name + ": non-prefetchable BARs overflow the 32-bit MMIO space"};
    }
    for (auto& f : plan_.functions) {
      if (f.physfn < 0) continue;
      for (const auto& vf_bar : at(f.physfn).placement.vf_bars) {
        PlacedBar bar = vf_bar;
        bar.address += static_cast<uint64_t>(f.vf_number) * vf_bar.size;
        f.placement.bars.push_back(bar);
      }
    }
    return ok_status();
  }

  void assign_dirs() {
    std::set<std::pair<int, int>> root_buses;
    for (int i = 0; i < count(); ++i) {
      auto& f = at(i);
      if (f.parent >= 0) {
        f.dir = at(f.parent).dir + "/" + f.spec->address;
        continue;
      }
      char root[32];
      std::snprintf(root, sizeof(root), "/sys/devices/pci%04x:%02x", f.addr.domain, f.addr.bus);
      if (root_buses.insert({f.addr.domain, f.addr.bus}).second) {
        plan_.host_bridge_dirs.push_back(root);
      }
      f.dir = std::string(root) + "/" + f.spec->address;
    }
  }

  const HostSpec& spec_;
  PciPlan plan_;
  std::map<std::string, int> by_address_;
  MmioAllocator mmio_;
};

}  // namespace

Result<PciPlan> plan_pci(const HostSpec& spec) {
  return Planner(spec).run();
}

}  // namespace hostagent::simhost::detail
