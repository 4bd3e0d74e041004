// Records and domain XML for the state tests.
#include "record_fixture.hpp"

#include <doctest/doctest.h>

#include <sstream>

#include "test_support.hpp"

namespace hostagent::state::testing {
namespace {

PciAddress address(const std::string& text) {
  auto parsed = PciAddress::parse(text);
  REQUIRE(parsed.ok());
  return *parsed;
}

}  // namespace

std::string golden_domain_xml() {
  return hostagent::testing::read_text_file(hostagent::testing::golden_dir() /
                                            "shapes/vela2/gx3-32x256x2h100.domain.xml");
}

VmRecord full_record(const std::string& name) {
  VmRecord record;
  record.name = name;
  record.template_name = "gx3-32x256x2h100";
  record.uuid = "53de1e96-5e2d-4b83-9b47-78fb492f724d";
  record.request_id = "r-17";
  record.created_at = "2026-11-29T23:00:00.125Z";
  record.allocation.vm = name;
  record.allocation.cpus = {0, 1, 2, 3, 96, 97, 98, 99, 150};
  record.allocation.devices = {address("0000:1b:00.0"), address("0000:1b:00.1"), address("10000:e3:1f.7")};
  record.allocation.hugepage_size_bytes = 2ULL << 20U;
  record.allocation.hugepages = {{0, 896}, {1, 18446744073709551615ULL}, {7, 0}};
  record.allocation.p2p_ports = {address("0000:1a:00.0"), address("10000:e0:02.0")};
  record.allocation.fabric_partition = 6;
  record.inputs.boot_image = "/var/lib/hostagent/images/ubuntu 24.04 caf\xc3\xa9.qcow2";
  record.inputs.disk_pool = "default";
  record.inputs.disk_volume = name + "-disk.qcow2";
  record.inputs.macs = {"52:54:00:00:00:01", "52:54:00:ab:cd:02"};
  record.inputs.seed_iso = "/var/lib/hostagent/seeds/vm1.iso";
  record.inputs.user_data = true;
  record.rdma = {VfRdma{address("0000:1b:00.1"), "mlx5_10", 1, "ACTIVE", "Ethernet", 3, "0c42:a103:0012:3456", ""},
                 VfRdma{address("10000:e3:1f.7"), "mlx5_ib.7", 2, "DOWN", "InfiniBand", std::nullopt,
                        "0c42:a103:0012:3457", "0c42:a103:0012:3458"}};
  return record;
}

void check_same(const VmRecord& actual, const VmRecord& expected) {
  CHECK(actual.name == expected.name);
  CHECK(actual.template_name == expected.template_name);
  CHECK(actual.uuid == expected.uuid);
  CHECK(actual.request_id == expected.request_id);
  CHECK(actual.created_at == expected.created_at);
  CHECK(actual.allocation.vm == expected.allocation.vm);
  CHECK(actual.allocation.cpus == expected.allocation.cpus);
  CHECK(actual.allocation.devices == expected.allocation.devices);
  CHECK(actual.allocation.hugepage_size_bytes == expected.allocation.hugepage_size_bytes);
  CHECK(actual.allocation.hugepages == expected.allocation.hugepages);
  CHECK(actual.allocation.p2p_ports == expected.allocation.p2p_ports);
  CHECK(actual.allocation.fabric_partition == expected.allocation.fabric_partition);
  CHECK(actual.inputs.boot_image == expected.inputs.boot_image);
  CHECK(actual.inputs.disk_pool == expected.inputs.disk_pool);
  CHECK(actual.inputs.disk_volume == expected.inputs.disk_volume);
  CHECK(actual.inputs.macs == expected.inputs.macs);
  CHECK(actual.inputs.seed_iso == expected.inputs.seed_iso);
  CHECK(actual.inputs.user_data == expected.inputs.user_data);
}

std::string bare_element_xml() {
  const auto embedded = embed_record(golden_domain_xml(), full_record(kGoldenName));
  REQUIRE(embedded.ok());
  pugi::xml_document doc;
  REQUIRE(doc.load_string(embedded->c_str()));
  const auto vm = doc.child("domain").child("metadata").child("hostagent:vm");
  REQUIRE(vm);
  std::ostringstream out;
  vm.print(out, "  ");
  return out.str();
}

std::string edited(const std::string& xml, const std::function<void(pugi::xml_document&)>& edit) {
  pugi::xml_document doc;
  REQUIRE(doc.load_string(xml.c_str()));
  edit(doc);
  std::ostringstream out;
  doc.save(out, "  ", pugi::format_indent | pugi::format_no_declaration);
  return out.str();
}

pugi::xml_node find_element(pugi::xml_node root, const std::string& name) {
  return root.find_node([&](pugi::xml_node node) { return name == node.name(); });
}

Journal open_journal(const std::filesystem::path& directory) {
  auto journal = Journal::open(directory);
  REQUIRE(journal.ok());
  return std::move(*journal);
}

}  // namespace hostagent::state::testing
