// numa/p2p_isolation: where peer-to-peer may be relaxed for a VM, and what that keeps from others.
//
// Vela's setting (vfio/p2p_settings.hpp) adds ACS Direct Translated P2P on the ports above a VM's
// GPUs and NICs and enables ATS on them, so that requests a device has translated go straight to
// their peer. A device that sends a request marked "translated" is trusted by every port on the
// way: the IOMMU never sees it. So once a port forwards translated requests directly, every
// function that port can route to is reachable by the devices below it without the IOMMU. That
// set is the port's peer-to-peer domain:
//   - a switch downstream port: everything below its switch (its upstream port), since the switch
//     routes a request it turns at the port to any of its other downstream ports;
//   - a root port: everything below it.
// The rule, owned here: a port is relaxed only for a VM that asked for peer-to-peer, and only when
// every function in its domain is that VM's, or no one's (not held by another VM, not used by the
// host, not on vfio-pci for a VM hostagent does not know). Every free function in a domain relaxed
// for a VM is then kept from the other VMs' placements until that VM goes.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "hostagent/numa/host_model.hpp"
#include "hostagent/numa/placement.hpp"

namespace hostagent::numa {

// The ACS ports (root ports and switch downstream ports) above `devices`, root first, each once.
std::vector<PciAddress> acs_ports_above(const HostModel& host, const std::vector<PciAddress>& devices);

// The functions, bridges aside, in the peer-to-peer domain of an ACS port (above). Empty for an
// address the host does not have or that is no ACS port.
std::vector<PciAddress> p2p_domain(const HostModel& host, const PciAddress& port);

// The GPUs and NICs of a placement, between which peer-to-peer runs (NVMe and NVSwitches stay as
// the host set them).
std::vector<PciAddress> peer_devices(const Placement& placement);

// Which ports above a placement's peer devices are relaxed and which are kept as the host set
// them, with why ("its switch holds 0000:17:00.1 of vm b"). `existing` are the other VMs. A
// placement with fewer than two peer devices has no peer to reach: nothing is relaxed.
struct P2pPlan {
  std::vector<PciAddress> relaxed;  // root first
  std::vector<KeptPort> kept;
};
P2pPlan plan_p2p(const HostModel& host, const std::vector<Allocation>& existing, const Placement& placement);

// Every function no VM holds that lies in a domain relaxed for one of `existing`, with why it is
// kept from the others: "in the peer-to-peer domain of 0000:16:02.0, relaxed for vm a".
std::map<PciAddress, std::string> fenced_devices(const HostModel& host, const std::vector<Allocation>& existing);

}  // namespace hostagent::numa
