// state/vm_record: the VM record in the domain XML's <metadata>. The shape, inside hostagent's
// element (which render creates with <hostagent:template> and perhaps <hostagent:metadata>):
//
//   <hostagent:record name='vm1' uuid='...' request-id='r-17' created-at='2026-11-29T23:00:00Z'/>
//   <hostagent:allocation hugepage-size='1073741824'>
//     <hostagent:cpus>0-3,96-99</hostagent:cpus>
//     <hostagent:device address='0000:1b:00.0'/>
//     <hostagent:hugepages node='0' pages='896'/>
//     <hostagent:p2p-port address='0000:1a:00.0'/>
//   </hostagent:allocation>
//   <hostagent:inputs boot-image='/var/lib/...' disk-pool='default' disk-volume='vm1-disk.qcow2'
//                     seed-iso='/var/lib/hostagent/seeds/vm1.iso' user-data='yes'>
//     <hostagent:mac>52:54:00:00:00:01</hostagent:mac>
//   </hostagent:inputs>
//   <hostagent:rdma vf='0000:1b:00.2' device='mlx5_10' port='1' state='ACTIVE' link-layer='Ethernet'
//                   roce-v2-gid-index='3' node-guid='0c42:a103:0012:3456'/>
//
// Optional text attributes are left out when empty. Every value goes through pugixml, which escapes.
#include <pugixml.hpp>

#include <algorithm>
#include <sstream>

#include "hostagent/common/sysfs_root.hpp"
#include "hostagent/common/text.hpp"
#include "hostagent/state/vm_record.hpp"
#include "metadata_xml.hpp"
#include "record_checks.hpp"

namespace hostagent::state {
namespace {

using detail::hostagent_child;
using detail::name_like;

constexpr const char* kWhere = "hostagent metadata: ";

// ---- writing ----

void set_attribute(pugi::xml_node node, const char* name, const std::string& value) {
  if (value.empty()) return;
  auto attribute = node.attribute(name);
  if (!attribute) attribute = node.append_attribute(name);
  attribute.set_value(value.c_str());
}

pugi::xml_node add_child(pugi::xml_node parent, std::string_view local) {
  return parent.append_child(name_like(parent, local).c_str());
}

pugi::xml_node metadata_element(pugi::xml_node domain) {
  if (auto existing = domain.child("metadata")) return existing;
  // libvirt ignores the order of <domain>'s children; next to the identity is where people look.
  for (const char* anchor : {"uuid", "name"}) {
    if (auto after = domain.child(anchor)) return domain.insert_child_after("metadata", after);
  }
  return domain.prepend_child("metadata");
}

pugi::xml_node vm_element(pugi::xml_node domain) {
  auto metadata = metadata_element(domain);
  for (const auto child : metadata.children()) {
    if (child.type() == pugi::node_element && detail::in_hostagent_namespace(child)) return child;
  }
  auto vm = metadata.append_child("hostagent:vm");
  vm.append_attribute("xmlns:hostagent").set_value(std::string(kMetadataNamespace).c_str());
  return vm;
}

void write_template(pugi::xml_node vm, const std::string& template_name) {
  auto element = hostagent_child(vm, "template");
  if (!element) element = vm.prepend_child(name_like(vm, "template").c_str());
  set_attribute(element, "name", template_name);
}

// A second embed replaces the record rather than adding another.
void remove_record(pugi::xml_node vm) {
  for (const char* local : {"record", "allocation", "inputs", "rdma", "nccl-topology"}) {
    while (auto old = hostagent_child(vm, local)) vm.remove_child(old);
  }
}

void write_identity(pugi::xml_node vm, const VmRecord& record) {
  auto element = add_child(vm, "record");
  set_attribute(element, "name", record.name);
  set_attribute(element, "uuid", record.uuid);
  set_attribute(element, "request-id", record.request_id);
  set_attribute(element, "created-at", record.created_at);
}

void write_allocation(pugi::xml_node vm, const numa::Allocation& allocation) {
  auto element = add_child(vm, "allocation");
  set_attribute(element, "hugepage-size", std::to_string(allocation.hugepage_size_bytes));
  add_child(element, "cpus").text().set(format_cpu_list(allocation.cpus).c_str());
  for (const auto& device : allocation.devices) {
    set_attribute(add_child(element, "device"), "address", device.to_string());
  }
  for (const auto& [node, pages] : allocation.hugepages) {
    auto hugepages = add_child(element, "hugepages");
    set_attribute(hugepages, "node", std::to_string(node));
    set_attribute(hugepages, "pages", std::to_string(pages));
  }
  for (const auto& port : allocation.p2p_ports) {
    set_attribute(add_child(element, "p2p-port"), "address", port.to_string());
  }
  // Shared NVSwitch mode only; a release before it ignores the attribute.
  if (allocation.fabric_partition) {
    set_attribute(element, "fabric-partition", std::to_string(*allocation.fabric_partition));
  }
}

void write_inputs(pugi::xml_node vm, const VmInputs& inputs) {
  auto element = add_child(vm, "inputs");
  set_attribute(element, "boot-image", inputs.boot_image);
  set_attribute(element, "disk-pool", inputs.disk_pool);
  set_attribute(element, "disk-volume", inputs.disk_volume);
  set_attribute(element, "seed-iso", inputs.seed_iso);
  set_attribute(element, "user-data", inputs.user_data ? "yes" : "no");
  for (const auto& mac : inputs.macs) add_child(element, "mac").text().set(mac.str().c_str());
}

void write_rdma(pugi::xml_node vm, const std::vector<VfRdma>& rdma) {
  for (const auto& vf : rdma) {
    auto element = add_child(vm, "rdma");
    set_attribute(element, "vf", vf.vf.to_string());
    set_attribute(element, "device", vf.device);
    set_attribute(element, "port", std::to_string(vf.port));
    set_attribute(element, "state", vf.state);
    set_attribute(element, "link-layer", vf.link_layer);
    if (vf.roce_v2_gid_index) set_attribute(element, "roce-v2-gid-index", std::to_string(*vf.roce_v2_gid_index));
    set_attribute(element, "node-guid", vf.node_guid);
    set_attribute(element, "port-guid", vf.port_guid);
  }
}

Result<pugi::xml_node> domain_element(const pugi::xml_document& doc, const VmRecord& record) {
  const auto domain = doc.document_element();
  if (std::string_view(domain.name()) != "domain") {
    return Error{ErrorCode::invalid_argument,
                 "domain XML: the document element is <" + std::string(domain.name()) + ">, not <domain>"};
  }
  const std::string name = domain.child("name").text().get();
  if (!name.empty() && name != record.name) {
    return Error{ErrorCode::invalid_argument, "VM record for " + text::quoted(record.name) + " cannot go into domain " +
                                                  text::quoted(name) + ": the record belongs to the domain of its VM"};
  }
  return domain;
}

std::string to_text(const pugi::xml_document& doc) {
  std::ostringstream out;
  // Single quotes and two-space indentation, as render writes domains and libvirt prints them.
  doc.save(out, "  ", pugi::format_indent | pugi::format_no_declaration | pugi::format_attribute_single_quote,
           pugi::encoding_utf8);
  return out.str();
}

// ---- reading ----

Error bad_record(const std::string& what) {
  return Error{ErrorCode::parse_error, kWhere + what};
}

Result<pugi::xml_node> required_child(pugi::xml_node parent, std::string_view local) {
  auto child = hostagent_child(parent, local);
  if (!child) {
    return bad_record("<" + std::string(parent.name()) + "> has no <" + name_like(parent, local) +
                      ">: the domain's record is incomplete");
  }
  return child;
}

Result<std::string> required_attribute(pugi::xml_node element, const char* name) {
  const auto attribute = element.attribute(name);
  if (!attribute) return bad_record("<" + std::string(element.name()) + "> has no " + name + " attribute");
  return std::string(attribute.value());
}

Result<uint64_t> unsigned_attribute(pugi::xml_node element, const char* name) {
  HA_TRY(const std::string text, required_attribute(element, name));
  const auto value = detail::parse_unsigned(text);
  if (!value) {
    return bad_record("<" + std::string(element.name()) + "> " + name + " " + text::quoted(text) +
                      " is not a non-negative decimal integer");
  }
  return *value;
}

// The element's format attribute (json_fields::format_version's rule): none is format 0, the
// releases before formats; a newer one than this release's is refused, never guessed at.
Status read_format(pugi::xml_node vm) {
  const auto attribute = vm.attribute("format");
  if (!attribute) return ok_status();
  const auto format = detail::parse_unsigned(attribute.value());
  if (!format || *format > static_cast<uint64_t>(INT64_MAX)) {
    return bad_record("format " + text::quoted(attribute.value()) + " is not a format version");
  }
  if (auto checked = json_fields::checked_format(static_cast<int64_t>(*format), kVmRecordFormat); !checked.ok()) {
    return bad_record(checked.error().message);
  }
  return ok_status();
}

Status read_identity(pugi::xml_node vm, VmRecord& out) {
  HA_TRY(const auto template_element, required_child(vm, "template"));
  HA_TRY(out.template_name, required_attribute(template_element, "name"));
  HA_TRY(const auto record, required_child(vm, "record"));
  HA_TRY(out.name, required_attribute(record, "name"));
  HA_TRY(const std::string uuid, required_attribute(record, "uuid"));
  auto checked = Uuid::parse(uuid, "uuid");
  if (!checked.ok()) return bad_record("<" + std::string(record.name()) + "> " + checked.error().message);
  out.uuid = std::move(checked).value();
  out.request_id = record.attribute("request-id").value();
  HA_TRY(out.created_at, required_attribute(record, "created-at"));
  return ok_status();
}

Status read_address(pugi::xml_node element, std::vector<PciAddress>& out) {
  HA_TRY(const std::string text, required_attribute(element, "address"));
  const auto address = PciAddress::parse(text);
  if (!address.ok()) return bad_record("<" + std::string(element.name()) + "> address: " + address.error().message);
  out.push_back(*address);
  return ok_status();
}

Status read_hugepages(pugi::xml_node element, numa::Allocation& out) {
  HA_TRY(const std::string node_text, required_attribute(element, "node"));
  const auto node = detail::parse_node(node_text);
  if (!node) {
    return bad_record("<" + std::string(element.name()) + "> node " + text::quoted(node_text) +
                      " is not a NUMA node id (0.." + std::to_string(detail::kMaxNode) + ")");
  }
  HA_TRY(const uint64_t pages, unsigned_attribute(element, "pages"));
  if (!out.hugepages.emplace(*node, pages).second) {
    return bad_record("<" + std::string(element.name()) + "> for node " + node_text + " appears twice");
  }
  return ok_status();
}

Status read_allocation(pugi::xml_node vm, numa::Allocation& out) {
  HA_TRY(const auto allocation, required_child(vm, "allocation"));
  HA_TRY(out.hugepage_size_bytes, unsigned_attribute(allocation, "hugepage-size"));
  HA_TRY(const auto cpus_element, required_child(allocation, "cpus"));
  const std::string cpus = cpus_element.text().get();
  auto parsed = parse_cpu_list(cpus);
  if (!parsed.ok()) return bad_record("<" + std::string(cpus_element.name()) + ">: " + parsed.error().message);
  out.cpus = std::move(*parsed);
  if (allocation.attribute("fabric-partition")) {
    HA_TRY(const uint64_t partition, unsigned_attribute(allocation, "fabric-partition"));
    if (partition > detail::kMaxPartitionId) {
      return bad_record("<" + std::string(allocation.name()) + "> fabric-partition " + std::to_string(partition) +
                        " is not a Fabric Manager partition id");
    }
    out.fabric_partition = static_cast<numa::PartitionId>(partition);
  }
  for (const auto child : allocation.children()) {
    if (child.type() != pugi::node_element || !detail::in_hostagent_namespace(child)) continue;
    const auto local = detail::local_name(child);
    if (local == "device") HA_TRY_STATUS(read_address(child, out.devices));
    if (local == "hugepages") HA_TRY_STATUS(read_hugepages(child, out));
    if (local == "p2p-port") HA_TRY_STATUS(read_address(child, out.p2p_ports));
  }
  return ok_status();
}

// Values are checked with the rest of the record (record_problem) once read.
Result<VfRdma> read_rdma_element(pugi::xml_node element) {
  VfRdma out;
  HA_TRY(const std::string vf, required_attribute(element, "vf"));
  const auto address = PciAddress::parse(vf);
  if (!address.ok()) return bad_record("<" + std::string(element.name()) + "> vf: " + address.error().message);
  out.vf = *address;
  HA_TRY(out.device, required_attribute(element, "device"));
  HA_TRY(const uint64_t port, unsigned_attribute(element, "port"));
  out.port = static_cast<int>(std::min<uint64_t>(port, 1U << 16));  // out of range either way: refused below
  HA_TRY(out.state, required_attribute(element, "state"));
  HA_TRY(out.link_layer, required_attribute(element, "link-layer"));
  if (element.attribute("roce-v2-gid-index")) {
    HA_TRY(const uint64_t index, unsigned_attribute(element, "roce-v2-gid-index"));
    out.roce_v2_gid_index = static_cast<int>(std::min<uint64_t>(index, 1U << 20));
  }
  HA_TRY(out.node_guid, required_attribute(element, "node-guid"));
  out.port_guid = element.attribute("port-guid").value();
  return out;
}

Status read_rdma(pugi::xml_node vm, std::vector<VfRdma>& out) {
  for (const auto child : vm.children()) {
    if (child.type() != pugi::node_element || !detail::in_hostagent_namespace(child)) continue;
    if (detail::local_name(child) != "rdma") continue;
    HA_TRY(auto rdma, read_rdma_element(child));
    out.push_back(std::move(rdma));
  }
  return ok_status();
}

Status read_inputs(pugi::xml_node vm, VmInputs& out) {
  HA_TRY(const auto inputs, required_child(vm, "inputs"));
  out.boot_image = inputs.attribute("boot-image").value();
  out.disk_pool = inputs.attribute("disk-pool").value();
  out.disk_volume = inputs.attribute("disk-volume").value();
  out.seed_iso = inputs.attribute("seed-iso").value();
  HA_TRY(const std::string user_data, required_attribute(inputs, "user-data"));
  if (user_data != "yes" && user_data != "no") {
    return bad_record("<" + std::string(inputs.name()) + "> user-data " + text::quoted(user_data) +
                      " is neither 'yes' nor 'no'");
  }
  out.user_data = user_data == "yes";
  for (const auto child : inputs.children()) {
    if (child.type() != pugi::node_element || !detail::in_hostagent_namespace(child)) continue;
    if (detail::local_name(child) != "mac") continue;
    // Older records kept a MAC as the request spelled it: read, it is in lower case.
    auto mac = MacAddress::parse(child.text().get(), "inputs.macs[" + std::to_string(out.macs.size()) + "]");
    if (!mac.ok()) return bad_record(mac.error().message);
    out.macs.push_back(std::move(mac).value());
  }
  return ok_status();
}

}  // namespace

Result<std::string> embed_record(const std::string& domain_xml, const VmRecord& record) {
  if (auto problem = detail::record_problem(record); !problem.empty()) {
    return Error{ErrorCode::invalid_argument, "VM record: " + problem};
  }
  pugi::xml_document doc;
  // parse_full keeps comments and processing instructions: the XML goes back to libvirt whole.
  const auto loaded = doc.load_buffer(domain_xml.data(), domain_xml.size(), pugi::parse_full, pugi::encoding_utf8);
  if (!loaded) {
    return Error{ErrorCode::invalid_argument, "domain XML does not parse: " + std::string(loaded.description()) +
                                                  " at offset " + std::to_string(loaded.offset)};
  }
  HA_TRY(const auto domain, domain_element(doc, record));
  const auto vm = vm_element(domain);
  set_attribute(vm, "format", std::to_string(kVmRecordFormat));
  write_template(vm, record.template_name);
  remove_record(vm);
  write_identity(vm, record);
  write_allocation(vm, record.allocation);
  write_inputs(vm, record.inputs);
  write_rdma(vm, record.rdma);
  // As text, escaped: the file is NCCL's own XML, not part of the domain's.
  if (!record.nccl_topology.empty()) add_child(vm, "nccl-topology").text().set(record.nccl_topology.c_str());
  return to_text(doc);
}

Result<VmRecord> parse_record(const std::string& xml) {
  pugi::xml_document doc;
  const auto loaded = doc.load_buffer(xml.data(), xml.size(), pugi::parse_default, pugi::encoding_utf8);
  if (!loaded) {
    return bad_record("the XML does not parse: " + std::string(loaded.description()) + " at offset " +
                      std::to_string(loaded.offset));
  }
  // virDomainGetMetadata(VIR_DOMAIN_METADATA_ELEMENT) hands the element back with its prefix and
  // namespace declaration stripped (libvirt 9: "<vm><template .../>...</vm>"): it selected the
  // element by namespace already, so a bare root element is ours, in the default namespace.
  auto root = doc.document_element();
  if (root && detail::namespace_of(root).empty() && std::string_view(root.name()) != "domain") {
    root.append_attribute("xmlns").set_value(std::string(kMetadataNamespace).c_str());
  }
  const auto vm = detail::find_vm_element(doc);
  if (!vm) {
    return Error{ErrorCode::not_found, "no element in namespace " + std::string(kMetadataNamespace) +
                                           " in the XML: the domain was not made by hostagent"};
  }
  HA_TRY_STATUS(read_format(vm));
  VmRecord out;
  HA_TRY_STATUS(read_identity(vm, out));
  HA_TRY_STATUS(read_allocation(vm, out.allocation));
  HA_TRY_STATUS(read_inputs(vm, out.inputs));
  HA_TRY_STATUS(read_rdma(vm, out.rdma));
  if (const auto topology = hostagent_child(vm, "nccl-topology")) out.nccl_topology = topology.text().get();
  out.allocation.vm = out.name;
  if (auto problem = detail::record_problem(out); !problem.empty()) return bad_record(problem);
  return out;
}

}  // namespace hostagent::state
