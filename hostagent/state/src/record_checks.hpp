// state/record_checks: the rules a VM record and a journal entry obey, shared by the XML and JSON
// forms so that whatever one writes, the other reads. Each check returns "" when the value is fine,
// else what is wrong with it, naming the field and the value; callers choose the error code
// (invalid_argument for what they were asked to write, parse_error for what they read).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>

#include "hostagent/common/json_fields.hpp"
#include "hostagent/common/result.hpp"
#include "hostagent/state/vm_record.hpp"

namespace hostagent::state::detail {

using json_fields::parse_failure;

// libxml2 (libvirt's parser) rejects control characters and malformed UTF-8 even when escaped, and
// pugixml would write them as character references; so no record field may hold them.
std::string text_problem(std::string_view field, std::string_view value);

// Everything VmRecord promises: a name and template, a UTC created_at, allocation.vm equal to name,
// ascending CPUs (the cpulist form compresses runs, so order is not kept), valid PCI addresses and
// MACs, text fields free of control characters.
std::string record_problem(const VmRecord& record);

// "" when value is a timestamp as hostagent writes them (common/time_text), or empty and not
// required; else why, naming field.
std::string timestamp_problem(std::string_view field, const std::string& value, bool required);

// Decimal, digits only: no sign, no spaces ("-1" and "+1" are refused, not wrapped).
std::optional<uint64_t> parse_unsigned(std::string_view text);
// A NUMA node id: decimal, 0..kMaxNode (Linux caps MAX_NUMNODES at 1 << 10).
inline constexpr int kMaxNode = 1023;
std::optional<int> parse_node(std::string_view text);
// A Fabric Manager partition id: FM's fmFabricPartitionId_t is an unsigned int.
inline constexpr uint64_t kMaxPartitionId = UINT32_MAX;

}  // namespace hostagent::state::detail
