// hostagent/common/hardware_ids: the one rule each for the hardware identifiers hostagent takes in
// checks: a MAC address (a VM's VF's, from a request or a record, with its value type; and the
// host's, as the kernel reports and takes it) and an InfiniBand
// GUID (an RDMA device's node or port GUID, as sysfs prints it and a record keeps it).
#pragma once

#include <string>
#include <string_view>

#include "hostagent/common/checked_text.hpp"
#include "hostagent/common/result.hpp"

namespace hostagent {

// Six pairs of hex digits, either case, separated by ':' ("52:54:00:00:00:01").
bool is_mac(std::string_view text);
// A MAC as the host's side has it (a VF's programmed address, where 00:00:00:00:00:00 lets the VF
// choose its own): the text in lower case, or invalid_argument on field.
Result<std::string> mac_text(std::string_view text, const std::string& field);
// The form drivers/infiniband/core/sysfs.c prints node_guid in: four groups of four lower-case hex
// digits separated by ':' ("0c42:a103:0016:4f3e").
bool is_guid(std::string_view text);

// The MAC address a VM's VF is given (a request's, a record's): a MAC, unicast (the I/G bit, the
// low bit of the first octet, clear: IEEE 802-2014 8.2.2) and not all zeros, kept in lower case.
struct MacRule {
  static bool holds(std::string_view text);
  static std::string normal(std::string_view text);
  static Error refusal(std::string_view text, const std::string& field);
};
using MacAddress = CheckedText<MacRule>;

}  // namespace hostagent
