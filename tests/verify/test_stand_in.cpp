// verify/stand_in: the rendered domain's PCI tree, cells and addresses survive; what ties it
// to real hardware does not; and libvirt's schema accepts the result.
#include <doctest/doctest.h>

#include <unistd.h>

#include <fstream>
#include <map>
#include <pugixml.hpp>
#include <set>
#include <sstream>

#include "hostagent/virt/hypervisor.hpp"
#include "test_support.hpp"
#include "verify_fixture.hpp"

namespace hostagent::verify {
namespace {

pugi::xml_document parse(const std::string& xml) {
  pugi::xml_document doc;
  REQUIRE(doc.load_string(xml.c_str()));
  return doc;
}

std::string text_of(pugi::xml_node node) {
  std::ostringstream out;
  node.print(out, "", pugi::format_raw);
  return out.str();
}

StandIn stand_in_of(const std::string& domain_xml, const StandInOptions& options = testing::stand_in_options()) {
  auto stand_in = make_stand_in(domain_xml, options);
  REQUIRE_MESSAGE(stand_in.ok(), stand_in.error().message);
  return std::move(*stand_in);
}

// Each rendered device by its alias: its <address> as text.
std::map<std::string, std::string> addresses_by_alias(pugi::xml_node devices, const std::set<std::string>& kinds) {
  std::map<std::string, std::string> out;
  for (auto device : devices.children()) {
    if (kinds.count(device.name()) == 0) continue;
    out[device.child("alias").attribute("name").value()] = text_of(device.child("address"));
  }
  return out;
}

TEST_CASE("each passthrough device and the disk become virtio-rng at the same address, controllers untouched") {
  for (const auto& shape_host : {std::pair<std::string, std::string>{"gx3d-160x1792x8h100", "vela2"},
                                 std::pair<std::string, std::string>{"gx2-80x1280x8a100", "vela1"}}) {
    CAPTURE(shape_host.first);
    const auto placed = testing::placed_guest(shape_host.first, shape_host.second);
    const auto rendered = parse(placed.rendered.domain_xml);
    const auto stand_in = stand_in_of(placed.rendered.domain_xml);
    const auto doc = parse(stand_in.domain_xml);
    const auto before = rendered.child("domain").child("devices");
    const auto after = doc.child("domain").child("devices");

    const auto replaced = addresses_by_alias(before, {"hostdev", "interface", "disk"});
    CHECK(addresses_by_alias(after, {"rng"}) == replaced);
    CHECK(addresses_by_alias(after, {"hostdev", "interface", "disk"}).empty());
    CHECK(stand_in.devices.size() == replaced.size());
    CHECK(replaced.size() == placed.rendered.addresses.size() + 1);  // the boot disk too

    // pcie-root's 64-bit hole is resized (its own test); the rest is as rendered.
    std::vector<std::string> controllers_before, controllers_after;
    for (auto c : before.children("controller")) {
      c.remove_child("pcihole64");
      controllers_before.push_back(text_of(c));
    }
    for (auto c : after.children("controller")) {
      c.remove_child("pcihole64");
      controllers_after.push_back(text_of(c));
    }
    CHECK(controllers_after == controllers_before);
    CHECK(controllers_after.size() > 10);
  }
}

TEST_CASE("the stand-in keeps the cells and scales them, and what names the real host is moved or dropped") {
  const auto placed = testing::placed_guest("gx3d-160x1792x8h100", "vela2");
  auto options = testing::stand_in_options();
  options.vcpus_per_cell = 2;
  options.memory_per_cell_kib = 300ULL * 1024;
  const auto stand_in = stand_in_of(placed.rendered.domain_xml, options);
  const auto doc = parse(stand_in.domain_xml);
  const auto domain = doc.child("domain");

  REQUIRE(stand_in.cells.size() == placed.placement.cells.size());
  REQUIRE(stand_in.cells.size() == 2);
  CHECK(stand_in.cells[1].cpus == std::vector<int>{2, 3});
  std::vector<std::string> cells;
  for (auto cell : domain.child("cpu").child("numa").children("cell")) {
    cells.push_back(std::string(cell.attribute("cpus").value()) + "/" + cell.attribute("memory").value());
    CHECK(cell.child("distances").children("sibling").begin() != cell.child("distances").children("sibling").end());
  }
  CHECK(cells == std::vector<std::string>{"0-1/307200", "2-3/307200"});
  CHECK(std::string(domain.child_value("vcpu")) == "4");
  CHECK(std::string(domain.child_value("memory")) == std::to_string(2 * 300 * 1024));
  CHECK(domain.child("cpu").child("topology").attribute("cores").as_int() == 4);
  CHECK(std::string(domain.child("cpu").attribute("mode").value()) == "maximum");
  CHECK_FALSE(domain.child("cpu").child("maxphysaddr"));
  CHECK(domain.child("qemu:commandline"));  // OVMF's aperture, resized with the hole
  for (const char* gone : {"memoryBacking", "metadata", "uuid"}) {
    CAPTURE(gone);
    CHECK_FALSE(domain.child(gone));
  }
  // What stays is the root ports' link: they stay in the stand-in.
  for (auto override_device : domain.child("qemu:override").children("qemu:device")) {
    const std::string alias = override_device.attribute("alias").value();
    if (!alias.starts_with("ua-port")) FAIL_CHECK("a vfio-pci override is left: " << alias);
  }
  CHECK(std::string(domain.attribute("type").value()) == "qemu");
  CHECK(std::string(domain.child_value("name")) == "verify-stand-in");
  CHECK(std::string(domain.child_value("on_reboot")) == "destroy");
  CHECK(std::string(domain.child("os").child_value("kernel")) == "/work/vmlinuz");
  CHECK(std::string(domain.child("os").child_value("initrd")) == "/work/initramfs.cpio");
  CHECK(std::string(domain.child("os").attribute("firmware").value()) == "efi");  // the template's
  const auto serial = domain.child("devices").child("serial");
  CHECK(std::string(serial.attribute("type").value()) == "file");
  CHECK(std::string(serial.child("source").attribute("path").value()) == "/work/console.log");
  CHECK_FALSE(serial.next_sibling("serial"));
  CHECK_FALSE(domain.child("devices").child("console"));
  CHECK(stand_in.changes.size() >= 8);
}

// Each vCPU pin, the emulator's pin and each cell's strict binding, read as libvirt would.
struct Ties {
  std::map<int, std::string> vcpupin;  // vCPU -> cpuset
  std::string emulatorpin;
  std::string memory;                  // mode/nodeset
  std::map<int, std::string> memnode;  // cell -> mode/nodeset
};

Ties ties_of(const std::string& domain_xml) {
  const auto doc = parse(domain_xml);
  const auto domain = doc.child("domain");
  Ties out;
  for (auto pin : domain.child("cputune").children("vcpupin")) {
    out.vcpupin[pin.attribute("vcpu").as_int()] = pin.attribute("cpuset").value();
  }
  out.emulatorpin = domain.child("cputune").child("emulatorpin").attribute("cpuset").value();
  const auto memory = domain.child("numatune").child("memory");
  out.memory = std::string(memory.attribute("mode").value()) + "/" + memory.attribute("nodeset").value();
  for (auto memnode : domain.child("numatune").children("memnode")) {
    out.memnode[memnode.attribute("cellid").as_int()] =
        std::string(memnode.attribute("mode").value()) + "/" + memnode.attribute("nodeset").value();
  }
  return out;
}

TEST_CASE("pinning and strict per-cell memory move onto the machine's nodes, in the rendered nodes' order") {
  const auto placed = testing::placed_guest("gx3d-160x1792x8h100", "vela2", "0,1");
  const auto rendered = ties_of(placed.rendered.domain_xml);
  REQUIRE(rendered.memnode.size() == 2);
  REQUIRE_FALSE(rendered.emulatorpin.empty());
  auto options = testing::stand_in_options();
  options.vcpus_per_cell = 2;

  SUBCASE("two machine nodes: a cell on each, each vCPU on its node, off the emulator's CPU where it can be") {
    options.machine.nodes = {MachineNode{0, {0, 1, 2}}, MachineNode{1, {4, 5}}};
    const auto stand_in = stand_in_of(placed.rendered.domain_xml, options);
    const auto kept = ties_of(stand_in.domain_xml);
    CHECK(kept.memory == "strict/0-1");
    CHECK(kept.memnode == std::map<int, std::string>{{0, "strict/0"}, {1, "strict/1"}});
    CHECK(kept.emulatorpin == "0");
    CHECK(kept.vcpupin == std::map<int, std::string>{{0, "1-2"}, {1, "1-2"}, {2, "4-5"}, {3, "4-5"}});
    CHECK(stand_in.ties.emulator_cpus == std::vector<int>{0});
    CHECK(stand_in.ties.vcpu_cpus == std::vector<std::vector<int>>{{1, 2}, {1, 2}, {4, 5}, {4, 5}});
    CHECK(stand_in.ties.cell_nodes == std::map<int, int>{{0, 0}, {1, 1}});
  }
  SUBCASE("one node of two CPUs: both cells on it, the vCPUs keep both CPUs rather than share one") {
    options.machine.nodes = {MachineNode{0, {0, 1}}};
    const auto stand_in = stand_in_of(placed.rendered.domain_xml, options);
    const auto kept = ties_of(stand_in.domain_xml);
    CHECK(kept.memnode == std::map<int, std::string>{{0, "strict/0"}, {1, "strict/0"}});
    CHECK(kept.emulatorpin == "0");
    CHECK(kept.vcpupin == std::map<int, std::string>{{0, "0-1"}, {1, "0-1"}, {2, "0-1"}, {3, "0-1"}});
  }
  SUBCASE("no machine given: pinning and binding are dropped, and said so") {
    options.machine.nodes.clear();
    const auto stand_in = stand_in_of(placed.rendered.domain_xml, options);
    const auto doc = parse(stand_in.domain_xml);
    CHECK_FALSE(doc.child("domain").child("cputune"));
    CHECK_FALSE(doc.child("domain").child("numatune"));
    CHECK(stand_in.ties.cell_nodes.empty());
    CHECK(std::count_if(stand_in.changes.begin(), stand_in.changes.end(), [](const std::string& c) {
            return c.find("dropped: this machine's NUMA nodes and CPUs were not given") != std::string::npos;
          }) == 2);
  }
  SUBCASE("no housekeeping CPUs rendered: no emulator pin in the stand-in either") {
    const auto unpinned = testing::placed_guest("gx3d-160x1792x8h100", "vela2");
    REQUIRE(ties_of(unpinned.rendered.domain_xml).emulatorpin.empty());
    const auto stand_in = stand_in_of(unpinned.rendered.domain_xml, options);
    CHECK(ties_of(stand_in.domain_xml).emulatorpin.empty());
    CHECK(stand_in.ties.emulator_cpus.empty());
    CHECK(stand_in.ties.vcpu_cpus.size() == 4);
  }
}

TEST_CASE("the 64-bit hole is kept up to half the guest's address space, and OVMF's aperture follows it") {
  const auto placed = testing::placed_guest("gx3d-160x1792x8h100", "vela2");
  const auto rendered = parse(placed.rendered.domain_xml);
  const auto rendered_hole =
      rendered.child("domain").child("devices").find_child_by_attribute("controller", "model", "pcie-root");
  REQUIRE(std::string(rendered_hole.child_value("pcihole64")) == std::to_string((4ULL << 40) / 1024));  // 4 TiB
  const auto hole_of = [&](const StandIn& stand_in) {
    const auto doc = parse(stand_in.domain_xml);
    const auto domain = doc.child("domain");
    const auto root = domain.child("devices").find_child_by_attribute("controller", "model", "pcie-root");
    CHECK(std::string(root.child("pcihole64").attribute("unit").value()) == "KiB");
    const std::string aperture = domain.child("qemu:commandline").last_child().attribute("value").value();
    return std::pair(std::stoull(root.child_value("pcihole64")) * 1024, aperture);
  };
  auto options = testing::stand_in_options();
  const auto tcg = stand_in_of(placed.rendered.domain_xml, options);
  CHECK(hole_of(tcg) == std::pair(512ULL << 30, std::string("name=opt/ovmf/X-PciMmio64Mb,string=524288")));
  CHECK(tcg.ties.pcihole64_bytes == 512ULL << 30);
  options.machine.phys_address_bits = 46;  // a KVM guest of a host with 46 bits: the whole 4 TiB fits
  const auto kvm = stand_in_of(placed.rendered.domain_xml, options);
  CHECK(hole_of(kvm) == std::pair(4ULL << 40, std::string("name=opt/ovmf/X-PciMmio64Mb,string=4194304")));
  options.machine.phys_address_bits = 30;
  const auto refused = make_stand_in(placed.rendered.domain_xml, options);
  REQUIRE_FALSE(refused.ok());
  CHECK(refused.error().message.find("36-57 bits, not 30") != std::string::npos);
}

TEST_CASE("the machine's nodes are read from sysfs: nodes with CPUs, or every online CPU as node 0") {
  testing::TempDir root;
  const auto write = [&](const std::string& path, const std::string& text) {
    std::filesystem::create_directories((root.path() / path).parent_path());
    std::ofstream(root.path() / path) << text;
  };
  auto machine = SysfsRoot::open(root.path());
  REQUIRE(machine.ok());
  write("sys/devices/system/cpu/online", "0-3\n");
  auto read = read_machine(*machine, 40);
  REQUIRE(read.ok());
  REQUIRE(read->nodes.size() == 1);
  CHECK(read->nodes[0].cpus == std::vector<int>{0, 1, 2, 3});
  CHECK(read->phys_address_bits == 40);
  write("sys/devices/system/node/node1/cpulist", "2-3\n");
  write("sys/devices/system/node/node0/cpulist", "0-1\n");
  write("sys/devices/system/node/node2/cpulist", "\n");  // memory alone: no CPUs
  write("sys/devices/system/node/possible", "0-2\n");
  read = read_machine(*machine, 46);
  REQUIRE(read.ok());
  REQUIRE(read->nodes.size() == 2);
  CHECK(read->nodes[0].id == 0);
  CHECK(read->nodes[1].id == 1);
  CHECK(read->nodes[1].cpus == std::vector<int>{2, 3});
  write("sys/devices/system/node/node1/cpulist", "3-1\n");
  CHECK_FALSE(read_machine(*machine, 40).ok());  // a broken list is an error, not a guess
}

TEST_CASE("firmware can be chosen, and a kvm stand-in keeps host-passthrough") {
  const auto placed = testing::placed_guest("gx3-32x256x2h100", "vela2");
  auto options = testing::stand_in_options();
  options.firmware = "bios";
  options.domain_type = "kvm";
  const auto doc = parse(stand_in_of(placed.rendered.domain_xml, options).domain_xml);
  CHECK_FALSE(doc.child("domain").child("os").attribute("firmware"));
  CHECK(std::string(doc.child("domain").child("cpu").attribute("mode").value()) == "host-passthrough");
  CHECK(std::string(doc.child("domain").attribute("type").value()) == "kvm");
}

TEST_CASE("hugepages stay per cell with the machine's page size, or go") {
  const auto placed = testing::placed_guest("gx3d-160x1792x8h100", "vela2");
  const auto rendered = parse(placed.rendered.domain_xml);
  const auto rendered_page = rendered.child("domain").child("memoryBacking").child("hugepages").child("page");
  REQUIRE(std::string(rendered_page.attribute("size").value()) == "1048576");
  auto options = testing::stand_in_options();
  options.hugepage_kib = 2048;
  const auto kept = parse(stand_in_of(placed.rendered.domain_xml, options).domain_xml);
  const auto page = kept.child("domain").child("memoryBacking").child("hugepages").child("page");
  CHECK(std::string(page.attribute("size").value()) == "2048");
  CHECK(std::string(page.attribute("nodeset").value()) == rendered_page.attribute("nodeset").value());
  options.hugepage_kib = 0;
  CHECK_FALSE(
      parse(stand_in_of(placed.rendered.domain_xml, options).domain_xml).child("domain").child("memoryBacking"));
  options.hugepage_kib = 1024ULL * 1024;  // 256 MiB cells are no whole number of 1 GiB pages
  const auto refused = make_stand_in(placed.rendered.domain_xml, options);
  REQUIRE_FALSE(refused.ok());
  CHECK(refused.error().message.find("whole number of 1048576 KiB hugepages") != std::string::npos);
}

TEST_CASE("the hugepage size with room: the wanted one when free, else the largest that fits, else none") {
  testing::TempDir root;
  const auto pool = [&](const char* size, const char* free_pages) {
    const auto dir = root.path() / "sys/kernel/mm/hugepages" / size;
    std::filesystem::create_directories(dir);
    std::ofstream(dir / "free_hugepages") << free_pages << "\n";
  };
  auto machine = SysfsRoot::open(root.path());
  REQUIRE(machine.ok());
  CHECK(hugepage_size_with_room(*machine, 1048576, 512ULL * 1024).value() == std::nullopt);  // no pools at all
  pool("hugepages-2048kB", "300");
  pool("hugepages-1048576kB", "1");
  CHECK(hugepage_size_with_room(*machine, 1048576, 1024ULL * 1024).value() == 1048576);
  CHECK(hugepage_size_with_room(*machine, 1048576, 512ULL * 1024).value() == 2048);           // not whole 1 GiB pages
  CHECK(hugepage_size_with_room(*machine, 1048576, 2048ULL * 1024).value() == std::nullopt);  // 600 MiB of 2M free
  CHECK(hugepage_size_with_room(*machine, 2048, 1024ULL * 1024).value() ==
        1048576);  // 2M has too few: the largest that fits
  pool("hugepages-2048kB", "many");
  CHECK_FALSE(hugepage_size_with_room(*machine, 2048, 1024).ok());  // a broken count is an error, not a guess
}

TEST_CASE("bad options and a domain without cells are refused, naming what is wrong") {
  const auto placed = testing::placed_guest("gx3-32x256x2h100", "vela2");
  const auto refused = [&](const StandInOptions& options, const std::string& expected, std::string xml = {}) {
    if (xml.empty()) xml = placed.rendered.domain_xml;
    const auto stand_in = make_stand_in(xml, options);
    REQUIRE_FALSE(stand_in.ok());
    CHECK(stand_in.error().code == ErrorCode::invalid_argument);
    CHECK_MESSAGE(stand_in.error().message.find(expected) != std::string::npos, stand_in.error().message);
  };
  auto options = testing::stand_in_options();
  options.vcpus_per_cell = 0;
  refused(options, "vCPUs per cell must be 1-8");
  options = testing::stand_in_options();
  options.memory_per_cell_kib = 1024;
  refused(options, "at least 64 MiB");
  options = testing::stand_in_options();
  options.firmware = "uefi";
  refused(options, "'uefi'");
  options = testing::stand_in_options();
  options.domain_type = "xen";
  refused(options, "'xen'");
  refused(testing::stand_in_options(), "not XML", "<domain");
  refused(testing::stand_in_options(), "no guest NUMA cells", "<domain type='kvm'><name>x</name></domain>");
}

TEST_CASE("libvirt's schema accepts the stand-in") {
  auto hypervisor = virt::connect_libvirt(virt::LibvirtOptions{"test:///default", "", std::chrono::seconds(5)});
  REQUIRE_MESSAGE(hypervisor.ok(), hypervisor.error().message);
  const auto placed = testing::placed_guest("gx3d-160x1792x8h100", "vela2");
  auto options = testing::stand_in_options();
  options.name = "verify-schema-" + std::to_string(getpid());
  auto doc = parse(stand_in_of(placed.rendered.domain_xml, options).domain_xml);
  // The test driver runs no QEMU, and takes only its own domain type.
  doc.child("domain").attribute("type").set_value("test");
  std::ostringstream xml;
  doc.save(xml);
  const auto defined = (*hypervisor)->define(xml.str());  // VIR_DOMAIN_DEFINE_VALIDATE: the RNG schema
  CHECK_MESSAGE(defined.ok(), defined.error().message);
  CHECK((*hypervisor)->undefine(options.name).ok());
}

}  // namespace
}  // namespace hostagent::verify
