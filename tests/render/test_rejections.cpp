// Inputs render_guest refuses, each with invalid_argument and a message naming what is wrong: VM
// names, metadata keys and values, MACs, machine types, and placements that do not fit the host.
#include <doctest/doctest.h>

#include "render_fixture.hpp"

namespace hostagent::render::testing {
namespace {

std::string rejected(const Case& c) {
  const auto result = render_guest(c.host->model, c.shape, c.placement, c.opts);
  REQUIRE_FALSE(result.ok());
  CHECK(result.error().code == ErrorCode::invalid_argument);
  return result.error().message;
}

TEST_CASE("bad VM names are rejected, naming the name") {
  auto c = make_case("vela1-nodevice");
  const std::string long_name(65, 'a');
  for (const std::string& name : {std::string("a b"), std::string("../x"), std::string(""), long_name,
                                  std::string(".hidden"), std::string("vm\x01"), std::string("vm/1")}) {
    CAPTURE(name);
    c.opts.name = name;
    const auto message = rejected(c);
    CHECK(contains(message, "VM name"));
    if (name != "vm\x01") CHECK(contains(message, "\"" + name + "\""));
  }
  c.opts.name = std::string(64, 'a');
  CHECK(render_guest(c.host->model, c.shape, c.placement, c.opts).ok());
  c.opts.name = "Train_7.run-2";
  CHECK(render_guest(c.host->model, c.shape, c.placement, c.opts).ok());
}

TEST_CASE("a metadata key that is not an XML name is rejected, naming the key") {
  auto c = make_case("vela1-nodevice");
  for (const std::string key : {"1st", "a b", "a:b", "xmlns", "XML-thing", "", "<x>", "caf\xc3\xa9"}) {
    CAPTURE(key);
    c.shape.metadata = {{key, "v"}};
    const auto message = rejected(c);
    CHECK(contains(message, "metadata key"));
    if (!key.empty() && key != "caf\xc3\xa9") CHECK(contains(message, key));
  }
  c.shape.metadata = {{"_team.name-2", "ok"}};
  CHECK(render_guest(c.host->model, c.shape, c.placement, c.opts).ok());
}

TEST_CASE("text XML cannot carry is rejected: control characters, broken UTF-8") {
  auto c = make_case("vela1-nodevice");
  c.shape.metadata = {{"team", std::string("a\x01") + "b"}};
  CHECK(contains(rejected(c), "metadata value of team"));
  c.shape.metadata = {{"team", "\xff\xfe"}};
  CHECK(contains(rejected(c), "UTF-8"));
  c.shape.metadata = {{"team", "multi\nline \xe2\x9c\x93"}};  // newlines and non-ASCII are fine
  CHECK(render_guest(c.host->model, c.shape, c.placement, c.opts).ok());
  c.shape.metadata.clear();
  c.shape.boot.image = "relative/disk.qcow2";
  CHECK(contains(rejected(c), "boot image"));
  c.shape.boot.image = "/var/lib/../../etc/shadow";
  CHECK(contains(rejected(c), ".."));
}

// The UUID is a Uuid (common/names), checked where it came in: render has no rule of its own.
TEST_CASE("options: domain type, emulator path") {
  auto c = make_case("vela1-nodevice");
  c.opts.domain_type = "xen";
  CHECK(contains(rejected(c), "xen"));
  c.opts.domain_type = "kvm";
  c.opts.emulator = "qemu-system-x86_64";
  CHECK(contains(rejected(c), "emulator"));
}

TEST_CASE("direct kernel boot: paths absolute, the command line one line, initrd and command line need a kernel") {
  auto c = make_case("vela1-kernel-boot");
  c.shape.boot.kernel = "vmlinuz";
  CHECK(contains(rejected(c), "boot kernel \"vmlinuz\" is not an absolute path"));
  c.shape.boot.kernel = "/boot/vmlinuz";
  c.shape.boot.initrd = "/boot/../../etc/shadow";
  CHECK(contains(rejected(c), "boot initrd \"/boot/../../etc/shadow\" contains \"..\""));
  c.shape.boot.initrd = "/boot/initrd.img";
  c.shape.boot.cmdline = "console=ttyS0\ninit=/bin/sh";
  CHECK(contains(rejected(c), "kernel command line \"console=ttyS0\\ninit=/bin/sh\" contains a line break"));
  c.shape.boot.cmdline = std::string("quiet\x01");
  CHECK(contains(rejected(c), "control character"));
  c.shape.boot.cmdline = std::string(4097, 'x');
  CHECK(contains(rejected(c), "4097 bytes long"));
  c.shape.boot.cmdline = std::string(4096, 'x');
  CHECK(render_guest(c.host->model, c.shape, c.placement, c.opts).ok());
  c.shape.boot.kernel.clear();
  CHECK(contains(rejected(c), "boot initrd \"/boot/initrd.img\" is given without a kernel"));
  c.shape.boot.initrd.clear();
  CHECK(contains(rejected(c), "is given without a kernel"));
  c.shape.boot.cmdline.clear();
  CHECK(render_guest(c.host->model, c.shape, c.placement, c.opts).ok());
}

TEST_CASE("the console log is an absolute path without '..'") {
  auto c = make_case("vela1-kernel-boot");
  c.opts.console_log = "console.log";
  CHECK(contains(rejected(c), "console log \"console.log\" is not an absolute path"));
  c.opts.console_log = "/var/log/../../etc/passwd";
  CHECK(contains(rejected(c), "console log \"/var/log/../../etc/passwd\" contains \"..\""));
  c.opts.console_log = "/var/log/a\x01";
  CHECK(contains(rejected(c), "console log"));
}

TEST_CASE("the seed ISO is an absolute path without '..'") {
  auto c = make_case("vela1-cloud-init");
  c.opts.seed_iso = "seed.iso";
  CHECK(contains(rejected(c), "seed ISO \"seed.iso\" is not an absolute path"));
  c.opts.seed_iso = "/var/lib/hostagent/seeds/../../../etc/shadow";
  CHECK(contains(rejected(c), "seed ISO \"/var/lib/hostagent/seeds/../../../etc/shadow\" contains \"..\""));
  c.opts.seed_iso = "/var/lib/hostagent/seeds/a\nb.iso";
  CHECK(contains(rejected(c), "contains a line break or tab"));
  c.opts.seed_iso = "/var/lib/hostagent/seeds/\xff.iso";
  CHECK(contains(rejected(c), "is not valid UTF-8"));
}

// Each MAC is a MacAddress (unicast, well-formed: common/hardware_ids), and the service refuses
// repeated ones and a count the template cannot take before placing anything (daemon/create_vm):
// render keeps only what a caller that skipped the service could still get wrong.
TEST_CASE("VF MACs: one per VF, and required when the template asks for them") {
  auto c = make_case("vela2-2gpu");
  c.opts.vf_macs = {"52:54:00:aa:00:01"};
  CHECK(contains(rejected(c), "gives 1 VF MAC addresses for 2 VFs"));
  c.opts.vf_macs.clear();
  c.shape.nics.vf.mac = vmtemplates::MacPolicy::request;
  CHECK(contains(rejected(c), "from the request"));
}

TEST_CASE("the layout needs a q35 machine") {
  auto c = make_case("vela1-nodevice");
  c.shape.machine = "pc-i440fx-8.2";
  CHECK(contains(rejected(c), "pc-i440fx-8.2"));
  c.shape.machine = "pc-q35-8.2";
  CHECK(render_guest(c.host->model, c.shape, c.placement, c.opts).ok());
}

TEST_CASE("placements that do not fit the host or the template are rejected") {
  SUBCASE("a device the host does not have") {
    auto c = make_case("vela2-2gpu");
    c.placement.nvme[0].address = pci("0000:ee:00.0");
    CHECK(contains(rejected(c), "0000:ee:00.0 is not a PCI function of this host"));
  }
  SUBCASE("a device placed twice") {
    auto c = make_case("vela2-2gpu");
    c.placement.extra_vfs.push_back(c.placement.gpus[0].vfs[0]);
    CHECK(contains(rejected(c), "placed twice"));
  }
  SUBCASE("a guest cell that does not exist") {
    auto c = make_case("vela2-2gpu");
    c.placement.nvme[0].guest_cell = 3;
    CHECK(contains(rejected(c), "guest cell 3"));
  }
  SUBCASE("a switch the host does not have the device under") {
    auto c = make_case("vela2-2gpu");
    c.placement.gpus[0].vfs[0].host_switch = c.placement.gpus[1].gpu.host_switch;
    CHECK(contains(rejected(c), "recorded under switch"));
  }
  SUBCASE("vCPUs that do not match the template") {
    auto c = make_case("vela1-nodevice");
    c.shape.vcpus = 8;
    CHECK(contains(rejected(c), "asks for 8"));
  }
  SUBCASE("a host CPU pinned twice") {
    auto c = make_case("vela1-8gpu");
    c.placement.cells[1].host_cpus[0] = c.placement.cells[0].host_cpus[0];
    CHECK(contains(rejected(c), "pinned to two vCPUs"));
  }
  SUBCASE("a topology that does not make the vCPUs") {
    auto c = make_case("vela1-8gpu");
    c.placement.topology.cores = 3;
    CHECK(contains(rejected(c), "CPU topology"));
  }
  SUBCASE("memory that is not a whole number of hugepages") {
    auto c = make_case("vela1-8gpu");
    c.placement.cells[0].memory_bytes += 1 << 20;
    CHECK(contains(rejected(c), "hugepages"));
  }
  SUBCASE("a hugepage count that does not cover the cell") {
    auto c = make_case("vela1-8gpu");
    c.placement.cells[1].hugepages = 1;
    CHECK(contains(rejected(c), "reserves 1 hugepages"));
  }
  SUBCASE("a P2P clique QEMU cannot encode") {
    auto c = make_case("vela1-8gpu");
    c.placement.gpus[3].clique = 16;
    CHECK(contains(rejected(c), "clique 16"));
  }
}

}  // namespace
}  // namespace hostagent::render::testing
