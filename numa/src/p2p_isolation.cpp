// numa/p2p_isolation: the rule for where peer-to-peer may be relaxed (see p2p_isolation.hpp).
#include "hostagent/numa/p2p_isolation.hpp"

#include <algorithm>
#include <optional>
#include <set>

namespace hostagent::numa {
namespace {

bool is_acs_port(const PciFunction& f) {
  return f.role == PciRole::root_port || f.role == PciRole::switch_downstream;
}

// The bridge whose subtree is the port's domain: a downstream port's switch (its upstream port,
// the nearest bridge above it), else the port itself.
PciAddress domain_top(const PciFunction& port) {
  if (port.role == PciRole::switch_downstream && !port.bridge_chain.empty()) return port.bridge_chain.front();
  return port.address;
}

bool below(const PciFunction& f, const PciAddress& bridge) {
  return std::find(f.bridge_chain.begin(), f.bridge_chain.end(), bridge) != f.bridge_chain.end();
}

// Why `f` is not the VM's to open up to its devices: another VM holds it, the host uses it, or it
// is on vfio-pci for a VM no allocation names. nullopt: it is the VM's, or no one's.
std::optional<std::string> not_ours(const PciFunction& f, const std::set<PciAddress>& own,
                                    const std::map<PciAddress, std::string>& holders) {
  if (own.count(f.address) != 0) return std::nullopt;
  if (const auto it = holders.find(f.address); it != holders.end()) {
    return f.address.to_string() + " of vm " + it->second;
  }
  if (f.host_use) return f.address.to_string() + ", used by the host (" + *f.host_use + ")";
  if (f.driver == std::optional<std::string>("vfio-pci")) {
    return f.address.to_string() + ", on vfio-pci for no VM hostagent knows";
  }
  return std::nullopt;
}

std::string domain_name(const PciFunction& port) {
  return port.role == PciRole::switch_downstream ? "its switch holds " : "below it is ";
}

}  // namespace

std::vector<PciAddress> acs_ports_above(const HostModel& host, const std::vector<PciAddress>& devices) {
  std::vector<PciAddress> ports;
  for (const auto& address : devices) {
    const auto* f = host.find(address);
    if (f == nullptr) continue;
    for (auto it = f->bridge_chain.rbegin(); it != f->bridge_chain.rend(); ++it) {
      const auto* bridge = host.find(*it);
      if (bridge == nullptr || !is_acs_port(*bridge)) continue;
      if (std::find(ports.begin(), ports.end(), *it) == ports.end()) ports.push_back(*it);
    }
  }
  return ports;
}

std::vector<PciAddress> p2p_domain(const HostModel& host, const PciAddress& port) {
  const auto* f = host.find(port);
  if (f == nullptr || !is_acs_port(*f)) return {};
  const PciAddress top = domain_top(*f);
  std::vector<PciAddress> out;
  for (const auto& function : host.pci_devices) {
    if (!function.is_bridge() && below(function, top)) out.push_back(function.address);
  }
  return out;
}

std::vector<PciAddress> peer_devices(const Placement& placement) {
  std::vector<PciAddress> out;
  for (const auto& gpu : placement.gpus) {
    out.push_back(gpu.gpu.address);
    for (const auto& vf : gpu.vfs) out.push_back(vf.address);
  }
  for (const auto& vf : placement.extra_vfs) out.push_back(vf.address);
  for (const auto& nic : placement.whole_nics) out.push_back(nic.address);  // GPUDirect RDMA to a whole HCA
  return out;
}

P2pPlan plan_p2p(const HostModel& host, const std::vector<Allocation>& existing, const Placement& placement) {
  std::map<PciAddress, std::string> holders;
  for (const auto& allocation : existing) {
    for (const auto& device : allocation.devices) holders.emplace(device, allocation.vm);
  }
  const Allocation mine = allocation_of("", placement, 0);
  const std::set<PciAddress> own(mine.devices.begin(), mine.devices.end());
  P2pPlan plan;
  const auto peers = peer_devices(placement);
  if (peers.size() < 2) return plan;  // a lone device has no peer: nothing to open up
  for (const auto& port : acs_ports_above(host, peers)) {
    std::optional<std::string> why;
    for (const auto& address : p2p_domain(host, port)) {
      if ((why = not_ours(*host.find(address), own, holders))) break;
    }
    if (why) {
      plan.kept.push_back({port, domain_name(*host.find(port)) + *why});
    } else {
      plan.relaxed.push_back(port);
    }
  }
  return plan;
}

std::map<PciAddress, std::string> fenced_devices(const HostModel& host, const std::vector<Allocation>& existing) {
  std::set<PciAddress> held;
  for (const auto& allocation : existing) held.insert(allocation.devices.begin(), allocation.devices.end());
  std::map<PciAddress, std::string> fenced;
  for (const auto& allocation : existing) {
    for (const auto& port : allocation.p2p_ports) {
      for (const auto& address : p2p_domain(host, port)) {
        if (held.count(address) != 0) continue;
        fenced.emplace(address,
                       "in the peer-to-peer domain of " + port.to_string() + ", relaxed for vm " + allocation.vm);
      }
    }
  }
  return fenced;
}

}  // namespace hostagent::numa
