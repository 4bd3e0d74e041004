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
// options.vf_macs when given (exactly `count`, unicast, distinct; normalised to lower case); else,
// unless the template wants MACs from the request, derived from the VM name and the VF index.
Result<std::vector<std::string>> vf_macs(const GuestOptions& options, const vmtemplates::VmTemplate& shape,
                                         std::size_t count);

// 02:hh:hh:hh:hh:ii: locally administered unicast (IEEE 802 U/L bit set, I/G bit clear), hh the first
// four bytes of the FNV-1a hash of the VM name, ii the VF index. Stable across renders; distinct
// within a VM by construction, across VMs with probability 1 - 2^-32 per pair.
std::string derived_mac(const std::string& vm_name, std::size_t index);

}  // namespace hostagent::render::detail
