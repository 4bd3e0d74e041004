// state/record_json: VmRecord <-> JSON, and the field reader the journal shares.
#include "record_json.hpp"

#include <boost/json.hpp>

#include "hostagent/common/sysfs_root.hpp"
#include "record_checks.hpp"

namespace hostagent::state::detail {
namespace json = boost::json;
namespace {

json::array string_array(const std::vector<std::string>& items) {
  json::array out;
  for (const auto& item : items) out.emplace_back(item);
  return out;
}

json::object allocation_to_json(const numa::Allocation& allocation) {
  json::array devices;
  for (const auto& device : allocation.devices) devices.emplace_back(device.to_string());
  json::array hugepages;
  for (const auto& [node, pages] : allocation.hugepages)
    hugepages.emplace_back(json::object{{"node", node}, {"pages", pages}});
  json::object out{{"hugepage_size", allocation.hugepage_size_bytes},
                   {"cpus", format_cpu_list(allocation.cpus)},
                   {"devices", std::move(devices)},
                   {"hugepages", std::move(hugepages)}};
  if (!allocation.p2p_ports.empty()) {
    json::array ports;
    for (const auto& port : allocation.p2p_ports) ports.emplace_back(port.to_string());
    out["p2p_ports"] = std::move(ports);
  }
  if (allocation.fabric_partition) out["fabric_partition"] = *allocation.fabric_partition;
  return out;
}

json::object inputs_to_json(const VmInputs& inputs) {
  return json::object{
      {"boot_image", inputs.boot_image},   {"disk_pool", inputs.disk_pool},
      {"disk_volume", inputs.disk_volume}, {"macs", string_array({inputs.macs.begin(), inputs.macs.end()})},
      {"seed_iso", inputs.seed_iso},       {"user_data", inputs.user_data}};
}

Status read_addresses(const JsonFields& fields, std::string_view key, std::vector<PciAddress>& out) {
  HA_TRY(const auto texts, fields.strings(key));
  for (std::size_t i = 0; i < texts.size(); ++i) {
    const auto address = PciAddress::parse(texts[i]);
    if (!address.ok())
      return parse_failure("field '" + fields.path(key) + "[" + std::to_string(i) + "]': " + address.error().message);
    out.push_back(*address);
  }
  return ok_status();
}

Status read_hugepages(const JsonFields& fields, numa::Allocation& out) {
  HA_TRY(const json::array* entries, fields.array("hugepages"));
  for (std::size_t i = 0; i < entries->size(); ++i) {
    HA_TRY(const auto entry, JsonFields::of((*entries)[i], fields.path("hugepages") + "[" + std::to_string(i) + "]"));
    HA_TRY(const uint64_t node, entry.unsigned_integer("node"));
    HA_TRY(const uint64_t pages, entry.unsigned_integer("pages"));
    if (node > static_cast<uint64_t>(kMaxNode)) {
      return parse_failure("field '" + entry.path("node") + "': " + std::to_string(node) +
                           " is not a NUMA node id (0.." + std::to_string(kMaxNode) + ")");
    }
    if (!out.hugepages.emplace(static_cast<int>(node), pages).second) {
      return parse_failure("field '" + entry.path("node") + "': node " + std::to_string(node) + " appears twice");
    }
  }
  return ok_status();
}

Result<numa::Allocation> allocation_from_json(const JsonFields& fields) {
  numa::Allocation out;
  HA_TRY(out.hugepage_size_bytes, fields.unsigned_integer("hugepage_size"));
  HA_TRY(const std::string cpus, fields.string("cpus"));
  auto parsed = parse_cpu_list(cpus);
  if (!parsed.ok()) return parse_failure("field '" + fields.path("cpus") + "': " + parsed.error().message);
  out.cpus = std::move(*parsed);
  HA_TRY_STATUS(read_addresses(fields, "devices", out.devices));
  HA_TRY_STATUS(read_hugepages(fields, out));
  // Written only for a VM with relaxed ports (and absent from records older than the rule).
  if (fields.has("p2p_ports")) HA_TRY_STATUS(read_addresses(fields, "p2p_ports", out.p2p_ports));
  // Written only in shared NVSwitch mode.
  if (fields.has("fabric_partition")) {
    HA_TRY(const uint64_t partition, fields.unsigned_integer("fabric_partition"));
    if (partition > kMaxPartitionId) {
      return parse_failure("field '" + fields.path("fabric_partition") + "': " + std::to_string(partition) +
                           " is not a Fabric Manager partition id");
    }
    out.fabric_partition = static_cast<numa::PartitionId>(partition);
  }
  return out;
}

Result<VmInputs> inputs_from_json(const JsonFields& fields) {
  VmInputs out;
  HA_TRY(out.boot_image, fields.string("boot_image"));
  HA_TRY(out.disk_pool, fields.string("disk_pool"));
  HA_TRY(out.disk_volume, fields.string("disk_volume"));
  HA_TRY(const auto macs, fields.strings("macs"));
  for (std::size_t i = 0; i < macs.size(); ++i) {
    // Older records kept a MAC as the request spelled it: read, it is in lower case.
    auto mac = MacAddress::parse(macs[i], fields.path("macs") + "[" + std::to_string(i) + "]");
    if (!mac.ok()) return parse_failure(mac.error().message);  // a file, not a request
    out.macs.push_back(std::move(mac).value());
  }
  HA_TRY(out.seed_iso, fields.string("seed_iso"));
  HA_TRY(out.user_data, fields.boolean("user_data"));
  return out;
}

}  // namespace

json::object record_to_json(const VmRecord& record) {
  return json::object{{"name", record.name},
                      {"uuid", record.uuid.str()},
                      {"template", record.template_name},
                      {"request_id", record.request_id},
                      {"created_at", record.created_at},
                      {"allocation", allocation_to_json(record.allocation)},
                      {"inputs", inputs_to_json(record.inputs)}};
}

Result<VmRecord> record_from_json(const JsonFields& fields) {
  VmRecord out;
  HA_TRY(out.name, fields.string("name"));
  HA_TRY(const auto uuid, fields.string("uuid"));
  auto checked = Uuid::parse(uuid, "uuid");
  if (!checked.ok()) return json_fields::parse_failure("field 'uuid': " + checked.error().message);
  out.uuid = std::move(checked).value();
  HA_TRY(out.template_name, fields.string("template"));
  HA_TRY(out.request_id, fields.string("request_id"));
  HA_TRY(out.created_at, fields.string("created_at"));
  HA_TRY(const auto allocation, fields.object("allocation"));
  HA_TRY(out.allocation, allocation_from_json(allocation));
  HA_TRY(const auto inputs, fields.object("inputs"));
  HA_TRY(out.inputs, inputs_from_json(inputs));
  out.allocation.vm = out.name;
  if (auto problem = record_problem(out); !problem.empty()) return parse_failure(fields.path(problem));
  return out;
}

}  // namespace hostagent::state::detail
