// render/vf_macs: the MAC address each VF gets in the guest. libvirt programs it on the VF (through
// the PF, over netlink) before handing the VF to QEMU, so it must be a valid unicast address.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "hostagent/common/result.hpp"
#include "hostagent/render/guest_renderer.hpp"

namespace hostagent::render::detail {

// One MAC per VF, in placement order (the VFs of each GPU in GPU order, then the extra VFs).
// options.vf_macs when given (exactly `count`: MacAddress values, distinct, as the service checked them); else,
// unless the template wants MACs from the request, derived from the VM name and the VF index.
Result<std::vector<MacAddress>> vf_macs(const GuestOptions& options, const vmtemplates::VmTemplate& shape,
                                        std::size_t count);

// A locally administered unicast address (IEEE 802 U/L bit set, I/G bit clear): 38 bits of the
// FNV-1a hash of host_id and vm_id (the VM's UUID, or its name before it has one) in the first five
// octets, the VF index in the last. Stable across renders and restarts of one VM on one host;
// distinct within a VM by construction, across VMs and hosts with probability 1 - 2^-38 per pair
// (about 1 in 30,000 for a fleet of 10,000 such VMs).
MacAddress derived_mac(const std::string& host_id, const std::string& vm_id, std::size_t index);

}  // namespace hostagent::render::detail
