// Details of the domain XML: VF MACs and VLANs, a GPU's companion functions, firmware, the CPU model
// per domain type, managed hostdevs, the boot disk (and no cloud-init data in the XML), the cloud-init
// seed CD-ROM, direct kernel boot, the console log, the allocation threads, the guest agent's channel,
// metadata, and the guest CPU topology limits.
#include <doctest/doctest.h>

#include <algorithm>
#include <set>

#include "render_fixture.hpp"

namespace hostagent::render::testing {
namespace {

std::unique_ptr<pugi::xml_document> domain_of(const Case& c) {
  return parse(render_ok(c.host->model, c.shape, c.placement, c.opts).domain_xml);
}

std::vector<pugi::xml_node> interfaces(const pugi::xml_document& doc) {
  std::vector<pugi::xml_node> out;
  for (const auto& n : doc.child("domain").child("devices").children("interface")) out.push_back(n);
  return out;
}

TEST_CASE("VF MACs come from the request, lower-cased, in placement order, with the template's VLAN") {
  auto c = make_case("vela2-2gpu");
  c.shape.nics.vf.vlan = 2042;
  const auto doc = domain_of(c);
  const auto nics = interfaces(*doc);
  REQUIRE(nics.size() == 2);
  // Placement order is GPU order; the layout sorts by guest address, which here is the same.
  CHECK(std::string(nics[0].child("mac").attribute("address").value()) == "52:54:00:aa:00:01");
  CHECK(std::string(nics[1].child("mac").attribute("address").value()) == "52:54:00:aa:00:02");
  for (const auto& nic : nics) {
    CHECK(std::string(nic.attribute("type").value()) == "hostdev");
    CHECK(nic.child("vlan").child("tag").attribute("id").as_int() == 2042);
    CHECK(std::string(nic.child("source").child("address").attribute("type").value()) == "pci");
  }
}

TEST_CASE("derived VF MACs are locally administered unicast, distinct, stable for a VM, and the host's own") {
  auto c = make_case("vela1-gx2-80x1280x8a100");
  const auto collect = [&](const std::string& host_id, const std::string& uuid) {
    c.opts.host_id = host_id;
    c.opts.uuid = Uuid::parse(uuid, "uuid").value();
    std::vector<std::string> macs;
    const auto doc = domain_of(c);
    for (const auto& nic : interfaces(*doc)) macs.emplace_back(nic.child("mac").attribute("address").value());
    return macs;
  };
  const std::string host = "3d1219c7c4c5404aaa1f6d2a48adfda4";
  const std::string uuid = "6f3b8c1e-2a4d-4e5f-9a0b-1c2d3e4f5a6b";
  const auto macs = collect(host, uuid);
  REQUIRE(macs.size() == 10);
  CHECK(std::set<std::string>(macs.begin(), macs.end()).size() == macs.size());
  for (const auto& mac : macs) {
    CAPTURE(mac);
    CHECK((std::stoul(mac.substr(0, 2), nullptr, 16) & 0x03) == 0x02);  // U/L bit set, I/G bit clear
  }
  const auto doc = domain_of(c);
  CHECK_FALSE(interfaces(*doc).front().child("vlan"));  // the template sets no VLAN
  CHECK(collect(host, uuid) == macs);
  // The same VM name on another host of the fabric, or another VM (UUID) here: other MACs.
  const auto elsewhere = collect("0123456789abcdef0123456789abcdef", uuid);
  const auto another = collect(host, "6f3b8c1e-2a4d-4e5f-9a0b-1c2d3e4f5a6c");
  for (std::size_t i = 0; i < macs.size(); ++i) {
    CHECK(elsewhere[i] != macs[i]);
    CHECK(another[i] != macs[i]);
  }
}

TEST_CASE("a GPU's companion is function 1 of its slot and function 0 is multifunction") {
  const auto c = make_case("quirks-3gpu");
  REQUIRE(c.placement.gpus.size() == 3);
  REQUIRE(c.placement.gpus[0].companions == std::vector<numa::PciAddress>{pci("0000:01:00.1")});
  const auto guest = render_ok(c.host->model, c.shape, c.placement, c.opts);
  const auto doc = parse(guest.domain_xml);
  std::map<std::string, pugi::xml_node> by_alias;
  for (const auto& h : doc->child("domain").child("devices").children("hostdev")) {
    by_alias[h.child("alias").attribute("name").value()] = h;
  }
  const auto gpu = by_alias.at("ua-gpu0").child("address");
  const auto audio = by_alias.at("ua-gpu0-fn1").child("address");
  CHECK(std::string(gpu.attribute("multifunction").value()) == "on");
  CHECK(std::string(gpu.attribute("function").value()) == "0x0");
  CHECK(std::string(audio.attribute("function").value()) == "0x1");
  CHECK(std::string(audio.attribute("bus").value()) == gpu.attribute("bus").value());
  CHECK(std::string(audio.attribute("slot").value()) == gpu.attribute("slot").value());
  const auto companion = std::find_if(guest.addresses.begin(), guest.addresses.end(),
                                      [](const GuestDeviceAddress& a) { return a.role == "companion"; });
  REQUIRE(companion != guest.addresses.end());
  CHECK(companion->host == pci("0000:01:00.1"));
  // The A6000 has no switch above it: it gets a root port of its own on its cell's expander bus.
  const auto view = guest_view(*doc);
  CHECK(view.upstream.at(pci("0000:01:00.0")) == -1);
  CHECK(companion->guest.bus == view.guest.at(pci("0000:01:00.0")).bus);
}

TEST_CASE("EFI firmware is autoselected and told the MMIO window, BIOS gets neither") {
  auto c = make_case("vela2-2gpu");
  auto doc = domain_of(c);
  CHECK(std::string(doc->child("domain").child("os").attribute("firmware").value()) == "efi");
  CHECK(doc->child("domain").child("qemu:commandline"));
  CHECK(std::string(doc->child("domain").attribute("xmlns:qemu").value()) ==
        "http://libvirt.org/schemas/domain/qemu/1.0");
  c.shape.firmware = vmtemplates::Firmware::bios;
  doc = domain_of(c);
  CHECK_FALSE(doc->child("domain").child("os").attribute("firmware"));
  CHECK_FALSE(doc->child("domain").child("qemu:commandline"));
  CHECK(doc->child("domain")
            .child("devices")
            .find_child_by_attribute("controller", "model", "pcie-root")
            .child("pcihole64"));
}

TEST_CASE("KVM passes the host CPU through, TCG gets QEMU's maximum model") {
  auto c = make_case("vela1-nodevice");
  const auto kvm = domain_of(c);
  auto cpu = kvm->child("domain").child("cpu");
  CHECK(std::string(cpu.attribute("mode").value()) == "host-passthrough");
  CHECK(std::string(cpu.attribute("check").value()) == "none");
  CHECK(std::string(cpu.attribute("migratable").value()) == "off");
  CHECK(std::string(cpu.child("maxphysaddr").attribute("mode").value()) == "passthrough");
  c.opts.domain_type = "qemu";
  const auto doc = domain_of(c);
  cpu = doc->child("domain").child("cpu");
  CHECK(std::string(doc->child("domain").attribute("type").value()) == "qemu");
  CHECK(std::string(cpu.attribute("mode").value()) == "maximum");
  CHECK_FALSE(cpu.child("maxphysaddr"));
}

TEST_CASE("managed='no' when hostagent prepares the devices itself") {
  const auto c = make_case("vela2-2gpu");  // its options say managed_hostdevs = false
  const auto doc = domain_of(c);
  int seen = 0;
  for (const auto& n : doc->child("domain").child("devices").children()) {
    if (std::string(n.name()) != "hostdev" && std::string(n.name()) != "interface") continue;
    CHECK(std::string(n.attribute("managed").value()) == "no");
    ++seen;
  }
  CHECK(seen == 5);  // 2 GPUs, 2 VFs, 1 NVMe
}

TEST_CASE("the boot disk is the template's image and cloud-init user data never enters the XML") {
  auto c = make_case("vela1-8gpu");
  c.shape.boot.cloud_init = "#cloud-config\nchpasswd: {list: 'root:hunter2'}\n";
  const auto xml = render_ok(c.host->model, c.shape, c.placement, c.opts).domain_xml;
  CHECK(xml.find("hunter2") == std::string::npos);
  CHECK(xml.find("cloud-config") == std::string::npos);
  const auto doc = parse(xml);
  const auto disk = doc->child("domain").child("devices").child("disk");
  CHECK(std::string(disk.child("source").attribute("file").value()) == c.shape.boot.image);
  CHECK(std::string(disk.child("driver").attribute("type").value()) == "qcow2");
  CHECK(std::string(disk.child("target").attribute("bus").value()) == "virtio");
  CHECK(disk.previous_sibling().type() == pugi::node_comment);
  c.shape.boot.image.clear();
  CHECK_FALSE(domain_of(c)->child("domain").child("devices").child("disk"));
}

TEST_CASE("boot.from_nvme gives each NVMe hostdev a boot order after the image's, and nothing else one") {
  auto c = make_case("vela2-2gpu");  // one NVMe
  const auto orders = [](const pugi::xml_document& doc) {
    std::vector<std::pair<std::string, int>> out;  // alias, boot order
    for (const auto& n : doc.child("domain").child("devices").children()) {
      if (!n.child("boot")) continue;
      out.emplace_back(n.child("alias").attribute("name").value(), n.child("boot").attribute("order").as_int());
    }
    return out;
  };
  const auto without = orders(*domain_of(c));
  CHECK(std::none_of(without.begin(), without.end(), [](const auto& o) { return o.first.starts_with("ua-nvme"); }));
  c.shape.boot.from_nvme = true;
  c.shape.boot.image = "/var/lib/hostagent/images/boot.qcow2";
  CHECK(orders(*domain_of(c)) == std::vector<std::pair<std::string, int>>{{"ua-boot", 1}, {"ua-nvme0", 2}});
  c.shape.boot.image.clear();
  CHECK(orders(*domain_of(c)) == std::vector<std::pair<std::string, int>>{{"ua-nvme0", 1}});
}

TEST_CASE("direct kernel boot puts kernel, initrd and command line in <os>, and the image stays a disk") {
  auto c = make_case("vela1-kernel-boot");
  auto doc = domain_of(c);
  const auto os = doc->child("domain").child("os");
  CHECK(std::string(os.child("kernel").text().get()) == c.shape.boot.kernel);
  CHECK(std::string(os.child("initrd").text().get()) == c.shape.boot.initrd);
  CHECK(std::string(os.child("cmdline").text().get()) == "console=ttyS0 panic=-1 quiet");
  CHECK(std::string(os.child("type").next_sibling().name()) == "kernel");  // after <type>, as libvirt writes it
  const auto disk = doc->child("domain").child("devices").child("disk");
  CHECK(std::string(disk.child("source").attribute("file").value()) == c.shape.boot.image);
  // Without an initrd or a command line only the kernel is there; without a kernel, none of them.
  c.shape.boot.initrd.clear();
  c.shape.boot.cmdline.clear();
  doc = domain_of(c);
  CHECK(doc->child("domain").child("os").child("kernel"));
  CHECK_FALSE(doc->child("domain").child("os").child("initrd"));
  CHECK_FALSE(doc->child("domain").child("os").child("cmdline"));
  c.shape.boot.kernel.clear();
  CHECK_FALSE(domain_of(c)->child("domain").child("os").child("kernel"));
}

TEST_CASE("the command line is escaped text, never markup") {
  auto c = make_case("vela1-kernel-boot");
  c.shape.boot.cmdline = "console=ttyS0 x=</cmdline><kernel>/evil</kernel> y=\"&amp;\"";
  const auto xml = render_ok(c.host->model, c.shape, c.placement, c.opts).domain_xml;
  CHECK(xml.find("<kernel>/evil") == std::string::npos);
  const auto doc = parse(xml);
  CHECK(std::string(doc->child("domain").child("os").child("cmdline").text().get()) == c.shape.boot.cmdline);
  CHECK(std::distance(doc->child("domain").child("os").children("kernel").begin(),
                      doc->child("domain").child("os").children("kernel").end()) == 1);
}

TEST_CASE("the serial console is logged to console_log, appending, and not logged without it") {
  auto c = make_case("vela1-kernel-boot");
  auto doc = domain_of(c);
  const auto serial = doc->child("domain").child("devices").child("serial");
  CHECK(std::string(serial.attribute("type").value()) == "pty");
  CHECK(std::string(serial.child("log").attribute("file").value()) == c.opts.console_log);
  CHECK(std::string(serial.child("log").attribute("append").value()) == "on");
  CHECK(serial.child("target").attribute("port").as_int(-1) == 0);
  c.opts.console_log.clear();
  doc = domain_of(c);
  CHECK_FALSE(doc->child("domain").child("devices").child("serial").child("log"));
  CHECK(doc->child("domain").child("devices").child("serial").child("target"));
}

TEST_CASE("memory is allocated up front by as many threads as the VM has pinned CPUs in its smallest cell") {
  const auto threads = [](const Case& c) {
    const auto doc = domain_of(c);
    const auto allocation = doc->child("domain").child("memoryBacking").child("allocation");
    CHECK(std::string(allocation.attribute("mode").value()) == "immediate");
    return allocation.attribute("threads").as_int(-1);
  };
  const auto quirks = make_case("quirks-3gpu");  // 12 vCPUs, 6 on each of two cells
  REQUIRE(quirks.placement.cells.size() == 2);
  CHECK(threads(quirks) == 6);
  CHECK(threads(make_case("vela2-2gpu")) == 12);  // one cell of 12
  CHECK(threads(make_case("vela1-8gpu")) == 16);  // 32 vCPUs, 16 per cell
  auto vela2 = make_case("vela2-8gpu");           // 64 vCPUs, 32 per cell: QEMU 7.2 runs 16 per backend at most
  CHECK(threads(vela2) == 16);
  vela2.shape.allocation_threads = 2;  // the template's count wins
  CHECK(threads(vela2) == 2);
}

TEST_CASE("the guest agent's channel is a virtio port on a virtio-serial controller at 00:03.0") {
  const auto doc = domain_of(make_case("vela1-kernel-boot"));
  const auto devices = doc->child("domain").child("devices");
  const auto controller = devices.find_child_by_attribute("controller", "type", "virtio-serial");
  REQUIRE(controller);
  CHECK(controller.attribute("index").as_int(-1) == 0);
  const auto address = controller.child("address");
  CHECK(std::string(address.attribute("bus").value()) == "0x00");
  CHECK(std::string(address.attribute("slot").value()) == "0x03");
  CHECK(std::string(address.attribute("function").value()) == "0x0");
  const auto channel = devices.child("channel");
  CHECK(std::string(channel.attribute("type").value()) == "unix");
  CHECK(std::string(channel.child("target").attribute("type").value()) == "virtio");
  CHECK(std::string(channel.child("target").attribute("name").value()) == "org.qemu.guest_agent.0");
  CHECK_FALSE(channel.child("source"));  // libvirt names the socket under its own run directory
}

TEST_CASE("the cloud-init seed is a read-only raw SATA CD-ROM beside the boot disk, and absent without seed_iso") {
  auto c = make_case("vela1-cloud-init");
  auto doc = domain_of(c);
  const auto devices = doc->child("domain").child("devices");
  const auto cdrom = devices.find_child_by_attribute("disk", "device", "cdrom");
  REQUIRE(cdrom);
  CHECK(std::string(cdrom.attribute("type").value()) == "file");
  CHECK(std::string(cdrom.child("driver").attribute("name").value()) == "qemu");
  CHECK(std::string(cdrom.child("driver").attribute("type").value()) == "raw");
  CHECK(std::string(cdrom.child("source").attribute("file").value()) == c.opts.seed_iso);
  CHECK(std::string(cdrom.child("target").attribute("dev").value()) == "sda");
  CHECK(std::string(cdrom.child("target").attribute("bus").value()) == "sata");
  CHECK(cdrom.child("readonly"));
  // Not bootable, and on the AHCI controller q35 has built in: no PCI address of the layout's.
  CHECK_FALSE(cdrom.child("boot"));
  CHECK_FALSE(cdrom.child("address"));
  const auto boot = devices.find_child_by_attribute("disk", "device", "disk");
  CHECK(std::string(boot.child("source").attribute("file").value()) == c.shape.boot.image);
  CHECK(boot.child("boot").attribute("order").as_int() == 1);

  // Markup in the path stays text.
  c.opts.seed_iso = "/var/lib/hostagent/seeds/a'b\"<c>&.iso";
  doc = domain_of(c);
  CHECK(std::string(doc->child("domain")
                        .child("devices")
                        .find_child_by_attribute("disk", "device", "cdrom")
                        .child("source")
                        .attribute("file")
                        .value()) == c.opts.seed_iso);
  c.opts.seed_iso.clear();
  doc = domain_of(c);
  CHECK_FALSE(doc->child("domain").child("devices").find_child_by_attribute("disk", "device", "cdrom"));
  CHECK(doc->child("domain").child("devices").find_child_by_attribute("disk", "device", "disk"));
}

TEST_CASE("metadata carries the template name and its key/values in the hostagent namespace, escaped") {
  const auto c = make_case("vela2-8gpu");
  const auto xml = render_ok(c.host->model, c.shape, c.placement, c.opts).domain_xml;
  CHECK(xml.find("R&amp;D &lt;4711&gt;") != std::string::npos);
  const auto doc = parse(xml);
  const auto vm = doc->child("domain").child("metadata").child("hostagent:vm");
  CHECK(std::string(vm.attribute("xmlns:hostagent").value()) == "https://hostagent.dev/xmlns/domain/1");
  CHECK(std::string(vm.child("hostagent:template").attribute("name").value()) == "vela2-8gpu");
  CHECK(std::string(vm.child("hostagent:metadata").child("hostagent:cost_center").text().get()) == "R&D <4711>");
  CHECK(std::string(vm.child("hostagent:metadata").child("hostagent:team").text().get()) == "llm-pretraining");
}

TEST_CASE("name, UUID and emulator as given, and no emulatorpin without housekeeping CPUs") {
  auto c = make_case("vela1-nodevice");
  c.placement.emulator_cpus.clear();
  c.opts.emulator = "/usr/libexec/qemu-kvm";
  const auto doc = domain_of(c);
  const auto domain = doc->child("domain");
  CHECK(std::string(domain.child("name").text().get()) == "vela1-nodevice");
  CHECK(std::string(domain.child("uuid").text().get()) == c.opts.uuid);
  CHECK(std::string(domain.child("devices").child("emulator").text().get()) == "/usr/libexec/qemu-kvm");
  CHECK_FALSE(domain.child("cputune").child("emulatorpin"));
}

TEST_CASE("x2APIC ids past 254 get the split irqchip, and two cells on one host node are 11 apart") {
  // 9 cells of 17 vCPUs: QEMU packs 17 cores into 5 bits, so socket 8 starts at APIC id 256.
  Want want;
  want.host_nodes = {0, 1, 0, 1, 0, 1, 0, 1, 0};
  want.vcpus_per_cell = 17;
  want.smt = false;
  want.memory_per_cell = 4 * GiB;
  const auto host = discover("vela2");
  auto shape = make_shape("wide", want);
  auto placement = make_placement(host->model, want);
  REQUIRE(placement.topology.cores == 17);
  auto doc = parse(render_ok(host->model, shape, placement, options("wide")).domain_xml);
  CHECK(std::string(doc->child("domain").child("features").child("ioapic").attribute("driver").value()) == "qemu");
  const auto cell0 = doc->child("domain").child("cpu").child("numa").child("cell");
  CHECK(cell0.child("distances").find_child_by_attribute("sibling", "id", "2").attribute("value").as_int() == 11);
  CHECK(cell0.child("distances").find_child_by_attribute("sibling", "id", "1").attribute("value").as_int() == 21);
  if (const auto result = virt_xml_validate(render_ok(host->model, shape, placement, options("wide")).domain_xml)) {
    CHECK_MESSAGE(result->exit_code == 0, result->output);
  }
  // 2 sockets of 8 cores x 2 threads stay within xAPIC ids.
  const auto narrow = make_case("vela1-8gpu");
  doc = parse(render_ok(narrow.host->model, narrow.shape, narrow.placement, narrow.opts).domain_xml);
  CHECK_FALSE(doc->child("domain").child("features").child("ioapic"));
}

// The seed's files: the nvidia module's options turn NVLink off exactly where the VM's GPUs are
// joined to an NVSwitch fabric it does not get (numa/nvlink.hpp); the guest's driver would otherwise
// wait for a fabric no one trains.
TEST_CASE("the guest's nvidia options turn NVLink off for GPUs of a fabric the VM does not get, and only there") {
  const auto paths = [](const RenderedGuest& guest) {
    std::vector<std::string> out;
    for (const auto& file : guest_files(guest))
      out.push_back(file.path + (file.reload_module.empty() ? "" : " (reload " + file.reload_module + ")"));
    return out;
  };
  // Two of Vela-2's eight GPUs, no NVSwitch.
  auto two = make_case("vela2-2gpu");
  const auto partial = render_ok(two.host->model, two.shape, two.placement, two.opts);
  CHECK(partial.nvidia_options.find("\noptions nvidia NVreg_NvLinkDisable=1\n") != std::string::npos);
  CHECK(paths(partial) == std::vector<std::string>{"/etc/nccl/hostagent-topology.xml", "/etc/nccl.conf",
                                                   "/etc/modprobe.d/hostagent-nvidia.conf (reload nvidia)"});
  // All eight with every NVSwitch: the VM trains the fabric, its driver keeps NVLink.
  auto eight = make_case("vela2-8gpu");
  for (const auto& f : eight.host->model.pci_devices) {
    if (f.role == numa::PciRole::nvswitch)
      eight.placement.nvswitches.push_back({f.address, f.numa_node, std::nullopt, 0});
  }
  REQUIRE(eight.placement.nvswitches.size() == 4);
  const auto whole = render_ok(eight.host->model, eight.shape, eight.placement, eight.opts);
  CHECK(whole.nvidia_options.empty());
  CHECK(paths(whole) == std::vector<std::string>{"/etc/nccl/hostagent-topology.xml", "/etc/nccl.conf"});
  // No NVSwitch on the host: nothing to turn off.
  auto quirks = make_case("quirks-3gpu");
  CHECK(render_ok(quirks.host->model, quirks.shape, quirks.placement, quirks.opts).nvidia_options.empty());
  // No GPU: no files at all.
  auto none = make_case("vela1-nodevice");
  CHECK(guest_files(render_ok(none.host->model, none.shape, none.placement, none.opts)).empty());
}

}  // namespace
}  // namespace hostagent::render::testing
