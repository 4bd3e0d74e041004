// VM records in domain metadata: round trips through a rendered domain and through the bare
// element libvirt returns, whatever prefix the namespace carries, with every value escaped.
#include <doctest/doctest.h>

#include <cctype>
#include <fstream>
#include <iterator>
#include <sstream>
#include <string>
#include <vector>

#include "record_fixture.hpp"
#include "test_support.hpp"

namespace hostagent::state::testing {
namespace {

std::vector<std::string> child_names(pugi::xml_node node) {
  std::vector<std::string> out;
  for (const auto child : node.children()) out.emplace_back(child.name());
  return out;
}

// Moves hostagent's element and everything in it from prefix "hostagent" to `prefix` ("": the
// default namespace), as libvirt may when it hands the element back.
class Reprefix : public pugi::xml_tree_walker {
 public:
  explicit Reprefix(std::string prefix) : prefix_(std::move(prefix)) {}
  bool for_each(pugi::xml_node& node) override {
    if (node.type() == pugi::node_element) rename(node);
    return true;
  }
  void rename(pugi::xml_node node) const {
    const std::string name = node.name();
    const std::string local = name.substr(name.find(':') + 1);
    node.set_name((prefix_.empty() ? local : prefix_ + ":" + local).c_str());
  }
  void apply(pugi::xml_node vm) {
    rename(vm);
    vm.remove_attribute("xmlns:hostagent");
    const std::string declaration = prefix_.empty() ? "xmlns" : "xmlns:" + prefix_;
    vm.append_attribute(declaration.c_str()).set_value(std::string(kMetadataNamespace).c_str());
    vm.traverse(*this);
  }

 private:
  std::string prefix_;
};

Result<VmRecord> parse_reprefixed(const std::string& xml, const std::string& prefix) {
  return parse_record(edited(xml, [&](pugi::xml_document& doc) { Reprefix(prefix).apply(doc.document_element()); }));
}

std::string embedded_golden(const VmRecord& record) {
  const auto embedded = embed_record(golden_domain_xml(), record);
  REQUIRE(embedded.ok());
  return *embedded;
}

TEST_CASE("a full record embedded into a rendered domain parses back equal") {
  const auto record = full_record(kGoldenName);
  const std::string xml = embedded_golden(record);
  const auto parsed = parse_record(xml);
  REQUIRE(parsed.ok());
  check_same(*parsed, record);
  CHECK(parsed->rdma == record.rdma);
}

TEST_CASE("embedding keeps the rest of the domain and the shape's metadata") {
  const std::string golden = golden_domain_xml();
  pugi::xml_document before;
  pugi::xml_document after;
  REQUIRE(before.load_string(golden.c_str()));
  REQUIRE(after.load_string(embedded_golden(full_record(kGoldenName)).c_str()));
  CHECK(child_names(after.child("domain")) == child_names(before.child("domain")));
  CHECK(std::string(after.child("domain").attribute("type").value()) == "kvm");
  const auto vm = after.child("domain").child("metadata").child("hostagent:vm");
  REQUIRE(vm);
  CHECK(child_names(vm) == std::vector<std::string>{"hostagent:template", "hostagent:metadata", "hostagent:record",
                                                    "hostagent:allocation", "hostagent:inputs", "hostagent:rdma",
                                                    "hostagent:rdma"});
  CHECK(std::string(vm.child("hostagent:metadata").child_value("hostagent:family")) == "gx3");
  // Everything outside <metadata> is as render wrote it.
  before.child("domain").remove_child("metadata");
  after.child("domain").remove_child("metadata");
  std::ostringstream a;
  std::ostringstream b;
  before.save(a);
  after.save(b);
  CHECK(a.str() == b.str());
}

TEST_CASE("the record's XML has the documented shape") {
  VmRecord record = full_record("vm1");
  record.inputs.boot_image = "/var/lib/images/base.qcow2";
  record.allocation.hugepages = {{0, 896}};
  record.allocation.devices.resize(1);
  record.allocation.p2p_ports.resize(1);
  record.inputs.macs.erase(record.inputs.macs.begin() + 1, record.inputs.macs.end());
  record.rdma.resize(1);
  const std::string domain =
      "<domain type='kvm'><name>vm1</name><uuid>6f1c0e2a-5c1b-4d3e-9a0b-1c2d3e4f5a6b</uuid>"
      "<memory unit='KiB'>1024</memory></domain>";
  const auto embedded = embed_record(domain, record);
  REQUIRE(embedded.ok());
  const std::string expected =
      "<domain type='kvm'>\n"
      "  <name>vm1</name>\n"
      "  <uuid>6f1c0e2a-5c1b-4d3e-9a0b-1c2d3e4f5a6b</uuid>\n"
      "  <metadata>\n"
      "    <hostagent:vm xmlns:hostagent='https://hostagent.dev/xmlns/domain/1' format='1'>\n"
      "      <hostagent:template name='gx3-32x256x2h100' />\n"
      "      <hostagent:record name='vm1' uuid='53de1e96-5e2d-4b83-9b47-78fb492f724d' request-id='r-17' "
      "created-at='2026-11-29T23:00:00.125Z' />\n"
      "      <hostagent:allocation hugepage-size='2097152' fabric-partition='6'>\n"
      "        <hostagent:cpus>0-3,96-99,150</hostagent:cpus>\n"
      "        <hostagent:device address='0000:1b:00.0' />\n"
      "        <hostagent:hugepages node='0' pages='896' />\n"
      "        <hostagent:p2p-port address='0000:1a:00.0' />\n"
      "      </hostagent:allocation>\n"
      "      <hostagent:inputs boot-image='/var/lib/images/base.qcow2' disk-pool='default' "
      "disk-volume='vm1-disk.qcow2' seed-iso='/var/lib/hostagent/seeds/vm1.iso' "
      "user-data='yes'>\n"
      "        <hostagent:mac>52:54:00:00:00:01</hostagent:mac>\n"
      "      </hostagent:inputs>\n"
      "      <hostagent:rdma vf='0000:1b:00.1' device='mlx5_10' port='1' state='ACTIVE' link-layer='Ethernet' "
      "roce-v2-gid-index='3' node-guid='0c42:a103:0012:3456' />\n"
      "    </hostagent:vm>\n"
      "  </metadata>\n"
      "  <memory unit='KiB'>1024</memory>\n"
      "</domain>\n";
  CHECK(*embedded == expected);
}

TEST_CASE("a record without a format is the release before's, and one of a newer format is refused, named") {
  const auto record = full_record(kGoldenName);
  const std::string xml = embedded_golden(record);
  const auto with_format = [&](const char* format) {
    return edited(xml, [&](pugi::xml_document& doc) {
      auto vm = find_element(doc.document_element(), "hostagent:vm");
      REQUIRE(vm);
      REQUIRE(std::string_view(vm.attribute("format").value()) == std::to_string(kVmRecordFormat));
      if (format == nullptr) {
        vm.remove_attribute("format");
      } else {
        vm.attribute("format").set_value(format);
      }
    });
  };
  const auto older = parse_record(with_format(nullptr));
  REQUIRE_MESSAGE(older.ok(), older.error().message);
  check_same(*older, record);
  const auto newer = parse_record(with_format("2"));
  REQUIRE_FALSE(newer.ok());
  CHECK(newer.error().code == ErrorCode::parse_error);
  CHECK_MESSAGE(newer.error().message.find("format 2 is newer than this hostagent reads") != std::string::npos,
                newer.error().message);
  CHECK(parse_record(with_format("x1")).error().message.find("is not a format version") != std::string::npos);
}

TEST_CASE("metadata is created after <uuid>, else after <name>, else first") {
  const auto record = full_record("vm1");
  const auto first_children = [&](const std::string& domain) {
    const auto embedded = embed_record(domain, record);
    REQUIRE(embedded.ok());
    pugi::xml_document doc;
    REQUIRE(doc.load_string(embedded->c_str()));
    CHECK(parse_record(*embedded).ok());
    return child_names(doc.child("domain"));
  };
  CHECK(first_children("<domain><memory/><uuid>u</uuid><name>vm1</name><vcpu/></domain>") ==
        std::vector<std::string>{"memory", "uuid", "metadata", "name", "vcpu"});
  CHECK(first_children("<domain><memory/><name>vm1</name><vcpu/></domain>") ==
        std::vector<std::string>{"memory", "name", "metadata", "vcpu"});
  CHECK(first_children("<domain><memory/></domain>") == std::vector<std::string>{"metadata", "memory"});
}

TEST_CASE("an existing metadata element without hostagent's gets one, next to the others") {
  const std::string domain =
      "<domain><name>vm1</name><metadata><other:x xmlns:other='urn:other'>kept</other:x></metadata></domain>";
  const auto embedded = embed_record(domain, full_record("vm1"));
  REQUIRE(embedded.ok());
  pugi::xml_document doc;
  REQUIRE(doc.load_string(embedded->c_str()));
  const auto metadata = doc.child("domain").child("metadata");
  CHECK(child_names(metadata) == std::vector<std::string>{"other:x", "hostagent:vm"});
  CHECK(std::string(metadata.child_value("other:x")) == "kept");
  const auto parsed = parse_record(*embedded);
  REQUIRE(parsed.ok());
  check_same(*parsed, full_record("vm1"));
}

TEST_CASE("the record round-trips through the bare element virDomainGetMetadata returns") {
  const std::string bare = bare_element_xml();
  CHECK(bare.rfind("<hostagent:vm xmlns:hostagent=", 0) == 0);
  const auto parsed = parse_record(bare);
  REQUIRE(parsed.ok());
  check_same(*parsed, full_record(kGoldenName));
}

TEST_CASE("the record parses from the element as libvirt 9 returns it: prefix and namespace stripped") {
  // virDomainGetMetadata(VIR_DOMAIN_METADATA_ELEMENT) on libvirt 9.0 answers "<vm><template .../>
  // ...</vm>": the same element with no prefix and no xmlns declaration.
  pugi::xml_document doc;
  REQUIRE(doc.load_string(bare_element_xml().c_str()));
  auto root = doc.document_element();
  Reprefix prefixless("");
  prefixless.apply(root);
  root.remove_attribute("xmlns");
  std::ostringstream text;
  doc.save(text, "  ", pugi::format_default | pugi::format_no_declaration);
  CHECK(text.str().rfind("<vm format=\"1\">", 0) == 0);
  const auto parsed = parse_record(text.str());
  REQUIRE_MESSAGE(parsed.ok(), parsed.error().message);
  check_same(*parsed, full_record(kGoldenName));
}

TEST_CASE("the element is found by namespace URI, under any prefix or as the default namespace") {
  const auto expected = full_record(kGoldenName);
  for (const std::string prefix : {"ha", "", "x1"}) {
    CAPTURE(prefix);
    const auto bare = parse_reprefixed(bare_element_xml(), prefix);
    REQUIRE(bare.ok());
    check_same(*bare, expected);
  }
  // Whole domains too, and with the prefix declared on an ancestor rather than on the element.
  const std::string domain = edited(embedded_golden(expected), [](pugi::xml_document& doc) {
    auto vm = doc.child("domain").child("metadata").child("hostagent:vm");
    Reprefix("ha").apply(vm);
    vm.remove_attribute("xmlns:ha");
    doc.child("domain").append_attribute("xmlns:ha").set_value(std::string(kMetadataNamespace).c_str());
  });
  CHECK(contains(domain, "<ha:record"));
  const auto whole = parse_record(domain);
  REQUIRE(whole.ok());
  check_same(*whole, expected);
}

TEST_CASE("embedding into a domain whose element has another prefix keeps that prefix") {
  const std::string domain = edited(embedded_golden(full_record(kGoldenName)), [](pugi::xml_document& doc) {
    Reprefix("ha").apply(doc.child("domain").child("metadata").child("hostagent:vm"));
  });
  auto changed = full_record(kGoldenName);
  changed.request_id = "r-18";
  const auto embedded = embed_record(domain, changed);
  REQUIRE(embedded.ok());
  CHECK(contains(*embedded,
                 "<ha:record name='gx3-32x256x2h100' uuid='53de1e96-5e2d-4b83-9b47-78fb492f724d' request-id='r-18'"));
  CHECK_FALSE(contains(*embedded, "hostagent:"));
  const auto parsed = parse_record(*embedded);
  REQUIRE(parsed.ok());
  check_same(*parsed, changed);
}

TEST_CASE("elements of other namespaces inside hostagent's are not read as the record") {
  const std::string bare = edited(bare_element_xml(), [](pugi::xml_document& doc) {
    auto vm = doc.document_element();
    auto impostor = vm.prepend_child("other:record");
    impostor.append_attribute("xmlns:other").set_value("urn:other");
    impostor.append_attribute("name").set_value("impostor");
    impostor.append_attribute("created-at").set_value("2000-01-01T00:00:00Z");
  });
  const auto parsed = parse_record(bare);
  REQUIRE(parsed.ok());
  CHECK(parsed->name == kGoldenName);
}

TEST_CASE("values with markup characters are escaped and come back unchanged") {
  auto record = full_record(kGoldenName);
  record.inputs.seed_iso = "ssh-ed25519 AAAA <b>&amp; \"quoted\" 'single' ]]> --> user@host";
  record.request_id = "r<1>&\"'";
  record.inputs.boot_image = "/images/a&b <c> \"d\" 'e'.qcow2";
  record.inputs.disk_volume = "vol ]]> &#x41;";
  record.template_name = "t'\"<&>";
  const std::string xml = embedded_golden(record);
  CHECK_FALSE(contains(xml, record.inputs.seed_iso));
  CHECK_FALSE(contains(xml, "<b>"));
  pugi::xml_document doc;
  REQUIRE(doc.load_string(xml.c_str()));
  const auto parsed = parse_record(xml);
  REQUIRE(parsed.ok());
  check_same(*parsed, record);
}

TEST_CASE("the embedded domain is valid for libvirt's domain schema") {
  const auto validator = hostagent::testing::find_program("virt-xml-validate");
  if (!validator) {
    hostagent::testing::skip("virt-xml-validate (libvirt-clients) is not installed");
    return;
  }
  hostagent::testing::TempDir dir;
  auto record = full_record(kGoldenName);
  record.inputs.seed_iso = "key <with> & \"markup\" 'and' caf\xc3\xa9";
  const auto path = dir.path() / "domain.xml";
  {
    std::ofstream out(path);
    out << embedded_golden(record);
  }
  const auto result = hostagent::testing::run_command({validator->string(), path.string(), "domain"});
  CAPTURE(result.output);
  CHECK(result.exit_code == 0);
}

TEST_CASE("embedding again replaces the record, and the same record gives the same XML") {
  const auto first = full_record(kGoldenName);
  auto second = full_record(kGoldenName);
  second.allocation.cpus = {4, 5};
  second.allocation.devices.clear();
  second.allocation.hugepages = {{1, 2}};
  second.inputs.macs.clear();
  second.request_id.clear();
  const std::string once = embedded_golden(first);
  const auto twice = embed_record(once, first);
  REQUIRE(twice.ok());
  CHECK(*twice == once);
  const auto replaced = embed_record(once, second);
  REQUIRE(replaced.ok());
  pugi::xml_document doc;
  REQUIRE(doc.load_string(replaced->c_str()));
  const auto vm = doc.child("domain").child("metadata").child("hostagent:vm");
  CHECK(child_names(vm) == std::vector<std::string>{"hostagent:template", "hostagent:metadata", "hostagent:record",
                                                    "hostagent:allocation", "hostagent:inputs", "hostagent:rdma",
                                                    "hostagent:rdma"});
  const auto parsed = parse_record(*replaced);
  REQUIRE(parsed.ok());
  check_same(*parsed, second);
}

TEST_CASE("embedding sets the template name, overwriting render's or creating the element") {
  auto record = full_record(kGoldenName);
  record.template_name = "another-shape";
  const std::string xml = embedded_golden(record);
  const auto parsed = parse_record(xml);
  REQUIRE(parsed.ok());
  CHECK(parsed->template_name == "another-shape");
  pugi::xml_document doc;
  REQUIRE(doc.load_string(xml.c_str()));
  const auto vm = doc.child("domain").child("metadata").child("hostagent:vm");
  CHECK(std::distance(vm.children("hostagent:template").begin(), vm.children("hostagent:template").end()) == 1);

  const std::string without = edited(golden_domain_xml(), [](pugi::xml_document& d) {
    auto v = d.child("domain").child("metadata").child("hostagent:vm");
    v.remove_child("hostagent:template");
  });
  const auto created = embed_record(without, record);
  REQUIRE(created.ok());
  const auto reparsed = parse_record(*created);
  REQUIRE(reparsed.ok());
  CHECK(reparsed->template_name == "another-shape");
}

TEST_CASE("empty optional fields are left out and come back empty") {
  VmRecord record;
  record.name = "vm1";
  record.uuid = "53de1e96-5e2d-4b83-9b47-78fb492f724d";
  record.template_name = "t";
  record.created_at = "2026-01-01T00:00:00Z";
  record.allocation.vm = "vm1";
  record.allocation.hugepage_size_bytes = 0;
  const auto embedded = embed_record("<domain><name>vm1</name></domain>", record);
  REQUIRE(embedded.ok());
  CHECK_FALSE(contains(*embedded, "request-id"));
  CHECK_FALSE(contains(*embedded, "boot-image"));
  CHECK_FALSE(contains(*embedded, "seed-iso"));
  CHECK(contains(*embedded, "user-data='no'"));
  const auto parsed = parse_record(*embedded);
  REQUIRE(parsed.ok());
  check_same(*parsed, record);
}

// One UUID rule from the request to the record: what is read back is a Uuid, in its one spelling.
TEST_CASE(
    "a record's UUID is read by the UUID rule: upper case in its normal spelling, not a UUID refused, nil never "
    "written") {
  VmRecord record = full_record("vm1");
  auto embedded = embed_record("<domain><name>vm1</name></domain>", record);
  REQUIRE(embedded.ok());
  const std::string uuid = record.uuid.str();
  std::string upper = uuid;
  for (auto& c : upper) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  REQUIRE(upper != uuid);
  const auto spelled = [&](const std::string& text) {
    std::string xml = *embedded;
    xml.replace(xml.find("uuid='" + uuid + "'"), uuid.size() + 7, "uuid='" + text + "'");
    return parse_record(xml);
  };
  const auto read = spelled(upper);
  REQUIRE_MESSAGE(read.ok(), read.error().message);
  CHECK(read->uuid == record.uuid);
  const auto malformed = spelled("53de1e96-5e2d-4b83-9b47");
  REQUIRE_FALSE(malformed.ok());
  CHECK(malformed.error().message.find("uuid") != std::string::npos);
  record.uuid = "00000000-0000-0000-0000-000000000000";
  const auto nil = embed_record("<domain><name>vm1</name></domain>", record);
  REQUIRE_FALSE(nil.ok());
  CHECK(nil.error().message.find("nil UUID") != std::string::npos);
}

}  // namespace
}  // namespace hostagent::state::testing
