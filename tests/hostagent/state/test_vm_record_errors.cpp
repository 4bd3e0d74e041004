// What parse_record and embed_record refuse: no hostagent element is not_found; a record that is
// there but broken is a parse_error naming the field and the value; a record or domain the caller
// gives wrong is invalid_argument.
#include <doctest/doctest.h>

#include "record_fixture.hpp"

namespace hostagent::state::testing {
namespace {

// The bare element with one change made to the named descendant.
std::string broken(const std::string& element, const std::function<void(pugi::xml_node)>& edit) {
  return edited(bare_element_xml(), [&](pugi::xml_document& doc) {
    auto node = element == "hostagent:vm" ? doc.document_element() : find_element(doc, element);
    REQUIRE(node);
    edit(node);
  });
}

std::string set_attribute(const std::string& element, const char* name, const char* value) {
  return broken(element, [&](pugi::xml_node node) {
    auto attribute = node.attribute(name);
    if (!attribute) attribute = node.append_attribute(name);
    attribute.set_value(value);
  });
}

std::string without_attribute(const std::string& element, const char* name) {
  return broken(element, [&](pugi::xml_node node) { REQUIRE(node.remove_attribute(name)); });
}

std::string without_element(const std::string& element) {
  return broken(element, [](pugi::xml_node node) { node.parent().remove_child(node); });
}

// Parses xml, expecting a parse_error whose message names every one of `names`.
void check_parse_error(const std::string& xml, const std::vector<std::string>& names) {
  const auto result = parse_record(xml);
  REQUIRE_FALSE(result.ok());
  CHECK(result.error().code == ErrorCode::parse_error);
  for (const auto& name : names) {
    CAPTURE(name);
    CHECK(contains(result.error().message, name));
  }
}

void check_invalid_record(const VmRecord& record, const std::vector<std::string>& names) {
  const auto result = embed_record(golden_domain_xml(), record);
  REQUIRE_FALSE(result.ok());
  CHECK(result.error().code == ErrorCode::invalid_argument);
  for (const auto& name : names) {
    CAPTURE(name);
    CHECK(contains(result.error().message, name));
  }
}

TEST_CASE("XML without hostagent's element is not_found") {
  for (const std::string xml :
       {"<domain><name>vm1</name></domain>", "<domain><name>vm1</name><metadata/></domain>",
        "<domain><metadata><hostagent:vm xmlns:hostagent='https://example.com/other'/></metadata></domain>",
        "<other:vm xmlns:other='urn:other'><other:record name='x'/></other:vm>"}) {
    CAPTURE(xml);
    const auto result = parse_record(xml);
    REQUIRE_FALSE(result.ok());
    CHECK(result.error().code == ErrorCode::not_found);
    CHECK(contains(result.error().message, std::string(kMetadataNamespace)));
  }
}

TEST_CASE("a bare element in no namespace is read as ours, as libvirt returns it, and checked") {
  const auto result = parse_record("<vm><record name='x'/></vm>");
  REQUIRE_FALSE(result.ok());
  CHECK(result.error().code == ErrorCode::parse_error);
  CHECK(contains(result.error().message, "template"));
}

TEST_CASE("text that is not XML is a parse_error") {
  for (const std::string xml : {"", "not xml", "<domain><name>vm1</domain>", "<domain><name>vm1</name>"}) {
    CAPTURE(xml);
    const auto result = parse_record(xml);
    REQUIRE_FALSE(result.ok());
    CHECK(result.error().code == ErrorCode::parse_error);
  }
}

TEST_CASE("a missing part of the record is a parse_error naming it") {
  check_parse_error(without_element("hostagent:template"), {"hostagent:template"});
  check_parse_error(without_element("hostagent:record"), {"hostagent:record"});
  check_parse_error(without_element("hostagent:allocation"), {"hostagent:allocation"});
  check_parse_error(without_element("hostagent:cpus"), {"hostagent:cpus"});
  check_parse_error(without_element("hostagent:inputs"), {"hostagent:inputs"});
  check_parse_error(without_attribute("hostagent:template", "name"), {"hostagent:template", "name"});
  check_parse_error(without_attribute("hostagent:record", "name"), {"hostagent:record", "name"});
  check_parse_error(without_attribute("hostagent:record", "created-at"), {"hostagent:record", "created-at"});
  check_parse_error(without_attribute("hostagent:allocation", "hugepage-size"), {"hugepage-size"});
  check_parse_error(without_attribute("hostagent:device", "address"), {"hostagent:device", "address"});
  check_parse_error(without_attribute("hostagent:hugepages", "node"), {"hostagent:hugepages", "node"});
  check_parse_error(without_attribute("hostagent:hugepages", "pages"), {"hostagent:hugepages", "pages"});
  check_parse_error(without_attribute("hostagent:inputs", "user-data"), {"hostagent:inputs", "user-data"});
}

TEST_CASE("bad numbers are a parse_error naming the attribute and the value") {
  for (const char* pages : {"-1", "+1", "1.5", "", " 1", "0x10", "18446744073709551616"}) {
    CAPTURE(pages);
    check_parse_error(set_attribute("hostagent:hugepages", "pages", pages),
                      {"pages", "\"" + std::string(pages) + "\""});
  }
  for (const char* node : {"-1", "abc", "1024"}) {
    CAPTURE(node);
    check_parse_error(set_attribute("hostagent:hugepages", "node", node), {"node", "\"" + std::string(node) + "\""});
  }
  check_parse_error(set_attribute("hostagent:allocation", "hugepage-size", "1G"), {"hugepage-size", "\"1G\""});
  check_parse_error(set_attribute("hostagent:allocation", "fabric-partition", "one"), {"fabric-partition", "\"one\""});
  check_parse_error(set_attribute("hostagent:allocation", "fabric-partition", "4294967296"),
                    {"fabric-partition 4294967296", "not a Fabric Manager partition id"});
}

TEST_CASE("a node listed twice in the allocation is a parse_error") {
  const std::string xml = broken("hostagent:allocation", [](pugi::xml_node allocation) {
    auto extra = allocation.append_child("hostagent:hugepages");
    extra.append_attribute("node").set_value("0");
    extra.append_attribute("pages").set_value("1");
  });
  check_parse_error(xml, {"hostagent:hugepages", "node 0", "twice"});
}

TEST_CASE("a bad PCI address is a parse_error naming it") {
  for (const char* address : {"0000:zz:00.0", "0000:1b:00", "1b:00.0", "0000:1b:20.0", "0000:1b:00.8"}) {
    CAPTURE(address);
    check_parse_error(set_attribute("hostagent:device", "address", address), {"hostagent:device", address});
    check_parse_error(set_attribute("hostagent:p2p-port", "address", address), {"hostagent:p2p-port", address});
  }
}

TEST_CASE("a bad CPU list is a parse_error naming it") {
  for (const char* cpus : {"0-x", "5-3", "a", "1,,-2", "70000"}) {
    CAPTURE(cpus);
    const std::string xml = broken("hostagent:cpus", [&](pugi::xml_node node) { node.text().set(cpus); });
    check_parse_error(xml, {"hostagent:cpus", cpus});
  }
}

TEST_CASE("bad text values are a parse_error naming the field") {
  check_parse_error(set_attribute("hostagent:record", "created-at", "yesterday"), {"created_at", "\"yesterday\""});
  check_parse_error(set_attribute("hostagent:record", "created-at", "2026-11-29T23:00:00+01:00"), {"created_at"});
  check_parse_error(set_attribute("hostagent:record", "name", ""), {"name", "empty"});
  check_parse_error(set_attribute("hostagent:template", "name", ""), {"template_name", "empty"});
  check_parse_error(set_attribute("hostagent:inputs", "user-data", "maybe"), {"user-data", "\"maybe\""});
  check_parse_error(set_attribute("hostagent:inputs", "seed-iso",
                                  "a\x01"
                                  "b"),
                    {"inputs.seed_iso", "\\x01", "control character"});
  const std::string mac = broken("hostagent:mac", [](pugi::xml_node node) { node.text().set("52:54:00:00:00"); });
  check_parse_error(mac, {"inputs.macs[0]", "\"52:54:00:00:00\""});
  const std::string multicast =
      broken("hostagent:mac", [](pugi::xml_node node) { node.text().set("01:00:5e:00:00:01"); });
  check_parse_error(multicast, {"inputs.macs[0]", "multicast"});
}

// Before MacAddress kept one spelling, a record kept a MAC as its request spelled it.
TEST_CASE("a record's MAC written in upper case by an older hostagent reads back in lower case") {
  const std::string older = broken("hostagent:mac", [](pugi::xml_node node) { node.text().set("52:54:00:AB:CD:0E"); });
  const auto parsed = parse_record(older);
  REQUIRE_MESSAGE(parsed.ok(), parsed.error().message);
  REQUIRE_FALSE(parsed->inputs.macs.empty());
  CHECK(parsed->inputs.macs.front() == "52:54:00:ab:cd:0e");
}

TEST_CASE("a VF's RDMA entry with a bad value is a parse_error naming the VF and the field") {
  check_parse_error(set_attribute("hostagent:rdma", "vf", "0000:1b:00"), {"hostagent:rdma", "vf"});
  check_parse_error(set_attribute("hostagent:rdma", "device", "mlx5 0"),
                    {"rdma of 0000:1b:00.1", "device", "\"mlx5 0\""});
  check_parse_error(set_attribute("hostagent:rdma", "port", "0"), {"rdma of 0000:1b:00.1", "port 0"});
  check_parse_error(set_attribute("hostagent:rdma", "port", "-1"), {"port", "\"-1\""});
  check_parse_error(set_attribute("hostagent:rdma", "state", "UP"), {"state", "\"UP\""});
  check_parse_error(set_attribute("hostagent:rdma", "link-layer", "Omni-Path"), {"link_layer", "\"Omni-Path\""});
  check_parse_error(set_attribute("hostagent:rdma", "roce-v2-gid-index", "x"), {"roce-v2-gid-index", "\"x\""});
  check_parse_error(set_attribute("hostagent:rdma", "roce-v2-gid-index", "70000"), {"roce_v2_gid_index 70000"});
  check_parse_error(set_attribute("hostagent:rdma", "node-guid", "0c42a10300123456"),
                    {"node_guid", "\"0c42a10300123456\""});
  check_parse_error(set_attribute("hostagent:rdma", "port-guid", "x"), {"port_guid", "\"x\""});
  check_parse_error(without_attribute("hostagent:rdma", "device"), {"hostagent:rdma", "no device attribute"});
}

TEST_CASE("a record the caller gets wrong is refused by embed_record, naming the field") {
  auto record = full_record(kGoldenName);
  record.name.clear();
  record.allocation.vm.clear();
  check_invalid_record(record, {"name", "empty"});

  record = full_record(kGoldenName);
  record.template_name.clear();
  check_invalid_record(record, {"template_name"});

  record = full_record(kGoldenName);
  record.created_at = "2026-13-01T00:00:00Z";
  check_invalid_record(record, {"created_at", "2026-13-01T00:00:00Z"});

  record = full_record(kGoldenName);
  record.allocation.vm = "someone-else";
  check_invalid_record(record, {"allocation.vm", "someone-else"});

  record = full_record(kGoldenName);
  record.allocation.cpus = {3, 1};
  check_invalid_record(record, {"allocation.cpus", "ascending"});
  record.allocation.cpus = {1, 1};
  check_invalid_record(record, {"allocation.cpus"});
  record.allocation.cpus = {-1, 1};
  check_invalid_record(record, {"allocation.cpus"});

  record = full_record(kGoldenName);
  record.allocation.devices[0].function = 9;
  check_invalid_record(record, {"allocation.devices"});

  record = full_record(kGoldenName);
  record.allocation.hugepages[-1] = 4;
  check_invalid_record(record, {"allocation.hugepages", "-1"});

  // inputs.macs are MacAddress values: a record cannot hold one that is not a VF's MAC.

  record = full_record(kGoldenName);
  record.inputs.disk_pool = "pool\nname";
  check_invalid_record(record, {"inputs.disk_pool", "\\n"});

  record = full_record(kGoldenName);
  record.request_id = "r-\xff\xfe";
  check_invalid_record(record, {"request_id", "UTF-8"});

  record = full_record(kGoldenName);
  record.inputs.boot_image = "/img/\xed\xa0\x80.qcow2";  // an encoded surrogate: not UTF-8
  check_invalid_record(record, {"inputs.boot_image", "UTF-8"});
}

TEST_CASE("a domain the caller gets wrong is refused by embed_record") {
  const auto record = full_record("vm1");
  for (const std::string xml : {"", "<domain>", "<domain></name></domain>"}) {
    CAPTURE(xml);
    const auto result = embed_record(xml, record);
    REQUIRE_FALSE(result.ok());
    CHECK(result.error().code == ErrorCode::invalid_argument);
    CHECK(contains(result.error().message, "does not parse"));
  }
  const auto not_domain = embed_record("<network><name>vm1</name></network>", record);
  REQUIRE_FALSE(not_domain.ok());
  CHECK(not_domain.error().code == ErrorCode::invalid_argument);
  CHECK(contains(not_domain.error().message, "<network>"));
  const auto other_vm = embed_record("<domain><name>vm2</name></domain>", record);
  REQUIRE_FALSE(other_vm.ok());
  CHECK(other_vm.error().code == ErrorCode::invalid_argument);
  CHECK(contains(other_vm.error().message, "\"vm1\""));
  CHECK(contains(other_vm.error().message, "\"vm2\""));
}

}  // namespace
}  // namespace hostagent::state::testing
