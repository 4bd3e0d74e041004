// discovery/host_use_reader: which PCI functions the host itself uses, read from the same root as
// discovery, so a fixture tree models it as it models the rest. A block device that is mounted
// (proc/self/mountinfo, else proc/mounts), swapped on (proc/swaps) or held by another block device
// (sys/block/*/holders: LVM, dm-crypt, md); a network interface that carries IPv4 routes
// (proc/net/route) or a global IPv6 address (proc/net/if_inet6), and on the live host ("/") any
// interface with a global address over netlink. Each is traced down the kernel's device links
// (partitions, dm and md slaves, NVMe multipath heads, bonds, bridges and VLANs) to the PCI
// functions beneath it. What a root does not have (a capture without /proc) is not detected.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

#include "hostagent/common/result.hpp"
#include "hostagent/numa/host_use.hpp"

namespace hostagent::discovery {

// One entry per (function, reason); a function used several ways has several.
Result<std::vector<numa::HostUse>> detect_host_use(const std::filesystem::path& root);

// The live host's interfaces with a global-scope address, over rtnetlink (libnl-route-3): name and
// address ("eno1", "10.0.0.5/24"). What /proc/net/route cannot show: an address whose prefix
// route is off (noprefixroute), or whose routes live in another table.
struct InterfaceAddress {
  std::string interface;
  std::string address;
};
Result<std::vector<InterfaceAddress>> interface_addresses();

}  // namespace hostagent::discovery
