// state/record_checks: validation of records and timestamps, and strict number parsing.
#include "record_checks.hpp"

#include <cctype>
#include <charconv>
#include <cstdio>
#include <regex>
#include <set>

#include "hostagent/common/hardware_ids.hpp"
#include "hostagent/common/sysfs_root.hpp"
#include "hostagent/common/text.hpp"
#include "hostagent/common/time_text.hpp"

namespace hostagent::state::detail {
namespace {

std::string required_text_problem(std::string_view field, const std::string& value) {
  if (value.empty()) return std::string(field) + " is empty";
  return text_problem(field, value);
}

std::string allocation_problem(const VmRecord& record) {
  const auto& allocation = record.allocation;
  if (allocation.vm != record.name) {
    return "allocation.vm " + text::quoted(allocation.vm) + " differs from name " + text::quoted(record.name) +
           ": an allocation is recorded with the VM that holds it";
  }
  for (std::size_t i = 0; i < allocation.cpus.size(); ++i) {
    if (allocation.cpus[i] < 0 || (i > 0 && allocation.cpus[i] <= allocation.cpus[i - 1])) {
      return "allocation.cpus " + text::quoted(format_cpu_list(allocation.cpus)) +
             " must be ascending, without repeats or negative ids";
    }
  }
  for (const auto& device : allocation.devices) {
    if (device.device > 0x1F || device.function > 7) {
      return "allocation.devices holds " + text::quoted(device.to_string()) + ", which is not a PCI address";
    }
  }
  for (const auto& [node, pages] : allocation.hugepages) {
    if (node < 0 || node > kMaxNode) {
      return "allocation.hugepages names NUMA node " + std::to_string(node) + ", outside 0.." +
             std::to_string(kMaxNode);
    }
  }
  return {};
}

std::string inputs_problem(const VmInputs& inputs) {
  for (const auto& [field, value] :
       {std::pair{"inputs.boot_image", &inputs.boot_image}, std::pair{"inputs.disk_pool", &inputs.disk_pool},
        std::pair{"inputs.disk_volume", &inputs.disk_volume}, std::pair{"inputs.seed_iso", &inputs.seed_iso}}) {
    if (auto problem = text_problem(field, *value); !problem.empty()) return problem;
  }
  // inputs.macs are MacAddress values: each reader parsed them by the one rule.
  return {};
}

// The forms drivers/infiniband/core/sysfs.c prints: ports/N/state names, link_layer, and GUIDs (is_guid).
std::string rdma_problem(const VfRdma& rdma) {
  static const std::regex kDevice("[A-Za-z0-9_.-]{1,64}");
  const std::string where = "rdma of " + rdma.vf.to_string() + ": ";
  if (!std::regex_match(rdma.device, kDevice)) {
    return where + "device " + text::quoted(rdma.device) +
           " is not an RDMA device name (letters, digits, '_', '.', '-')";
  }
  if (rdma.port < 1 || rdma.port > 255) return where + "port " + std::to_string(rdma.port) + " is not 1..255";
  static const std::set<std::string, std::less<>> kStates = {"NOP", "DOWN", "INIT", "ARMED", "ACTIVE", "ACTIVE_DEFER"};
  if (!kStates.contains(rdma.state)) return where + "state " + text::quoted(rdma.state) + " is not a port state";
  if (rdma.link_layer != "Ethernet" && rdma.link_layer != "InfiniBand") {
    return where + "link_layer " + text::quoted(rdma.link_layer) + " is neither Ethernet nor InfiniBand";
  }
  if (rdma.roce_v2_gid_index && (*rdma.roce_v2_gid_index < 0 || *rdma.roce_v2_gid_index > 65535)) {
    return where + "roce_v2_gid_index " + std::to_string(*rdma.roce_v2_gid_index) + " is not 0..65535";
  }
  if (!is_guid(rdma.node_guid))
    return where + "node_guid " + text::quoted(rdma.node_guid) + " is not xxxx:xxxx:xxxx:xxxx";
  if (!rdma.port_guid.empty() && !is_guid(rdma.port_guid)) {
    return where + "port_guid " + text::quoted(rdma.port_guid) + " is not xxxx:xxxx:xxxx:xxxx";
  }
  return "";
}

}  // namespace

// The record lives in the domain's XML: its text fields are one-line XML text.
std::string text_problem(std::string_view field, std::string_view value) {
  const auto why = text::xml_text_problem(value, text::XmlText::one_line);
  return why.empty() ? why : std::string(field) + " " + text::quoted(value) + " " + why;
}

std::string record_problem(const VmRecord& record) {
  if (auto problem = required_text_problem("name", record.name); !problem.empty()) return problem;
  if (auto problem = required_text_problem("template_name", record.template_name); !problem.empty()) return problem;
  if (record.uuid == kNilUuid) return "uuid: the nil UUID is no VM's (choose one at create)";
  if (auto problem = text_problem("request_id", record.request_id); !problem.empty()) return problem;
  if (!is_utc_timestamp(record.created_at)) {
    return "created_at " + text::quoted(record.created_at) +
           " is not an RFC 3339 UTC time such as 2026-11-29T23:00:00Z";
  }
  if (auto problem = allocation_problem(record); !problem.empty()) return problem;
  for (const auto& rdma : record.rdma) {
    if (auto problem = rdma_problem(rdma); !problem.empty()) return problem;
  }
  return inputs_problem(record.inputs);
}

std::string timestamp_problem(std::string_view field, const std::string& value, bool required) {
  if (value.empty() && !required) return {};
  if (is_utc_timestamp(value)) return {};
  return std::string(field) + " " + text::quoted(value) + " is not an RFC 3339 UTC time such as 2026-11-29T23:00:00Z";
}

std::optional<uint64_t> parse_unsigned(std::string_view text) {
  uint64_t value = 0;
  const auto* end = text.data() + text.size();
  if (text.empty() || text.front() < '0' || text.front() > '9') return std::nullopt;
  const auto [ptr, ec] = std::from_chars(text.data(), end, value);
  if (ec != std::errc() || ptr != end) return std::nullopt;
  return value;
}

std::optional<int> parse_node(std::string_view text) {
  const auto value = parse_unsigned(text);
  if (!value || *value > static_cast<uint64_t>(kMaxNode)) return std::nullopt;
  return static_cast<int>(*value);
}

}  // namespace hostagent::state::detail
