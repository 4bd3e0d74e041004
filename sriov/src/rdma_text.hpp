// sriov/rdma_text: GIDs and GUIDs as text, shared by the sysfs and the verbs readers so both print
// them the way sysfs does.
#pragma once

#include <array>
#include <cstdint>
#include <string>

#include "hostagent/common/result.hpp"

namespace hostagent::sriov::detail {

using GidBytes = std::array<uint8_t, 16>;

// "fe80:0000:0000:0000:0200:1aff:fe00:0100" (8 groups of 4 hex digits); what names the source.
Result<GidBytes> parse_gid(const std::string& text, const std::string& what);
std::string format_gid(const GidBytes& gid);
bool is_zero(const GidBytes& gid);
// The low 64 bits of a GID as a GUID: "0200:1aff:fe00:0100".
std::string interface_id(const std::string& gid_text);
// A host-order 64-bit GUID as sysfs prints node_guid: "0200:1aff:fe00:0100".
std::string format_guid(uint64_t guid);

}  // namespace hostagent::sriov::detail
