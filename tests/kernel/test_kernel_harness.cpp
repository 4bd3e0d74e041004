// The real-kernel harness's own pieces, on any machine: the guest's results log, the module and
// library closures that fill the initramfs, the archive's order, the QEMU command line.
#include <doctest/doctest.h>

#include <algorithm>
#include <filesystem>
#include <map>
#include <set>

#include "emulated_host.hpp"
#include "harness/guest_results.hpp"
#include "harness/host_prerequisites.hpp"
#include "harness/host_root.hpp"
#include "harness/initramfs.hpp"
#include "harness/qemu_command.hpp"
#include "test_support.hpp"

namespace hostagent::testing::kernel {
namespace {

namespace fs = std::filesystem;

TEST_CASE("the results log gives each test case its output and exit status, an unfinished one none") {
  const std::string log =
      "hostagent-kernel-guest: tests 3\r\n"
      "hostagent-kernel-guest: begin a passing case, with a comma\r\n"
      "[doctest] test cases: 1 | 1 passed\r\n"
      "hostagent-kernel-guest: end 0 a passing case, with a comma\r\n"
      "hostagent-kernel-guest: begin failing\n"
      "CHECK( x == 1 ) is NOT correct!\n"
      "hostagent-kernel-guest: end 1 failing\n"
      "hostagent-kernel-guest: begin hangs\n"
      "still running";
  const GuestRun run = parse_guest_run(log);
  CHECK(run.listed == 3);
  CHECK_FALSE(run.done);
  REQUIRE(run.tests.size() == 3);
  const auto* passing = find_result(run, "a passing case, with a comma");
  REQUIRE(passing != nullptr);
  CHECK(passing->exit_code == 0);
  CHECK(passing->output == "[doctest] test cases: 1 | 1 passed\n");
  CHECK(find_result(run, "failing")->exit_code == 1);
  CHECK(find_result(run, "failing")->output == "CHECK( x == 1 ) is NOT correct!\n");
  CHECK_FALSE(find_result(run, "hangs")->exit_code.has_value());
  CHECK(find_result(run, "hangs")->output == "still running\n");
  CHECK(find_result(run, "never began") == nullptr);
  CHECK(parse_guest_run("hostagent-kernel-guest: tests 0\nhostagent-kernel-guest: done\n").done);
}

TEST_CASE("an end marker for another test case does not end the current one") {
  const GuestRun run = parse_guest_run(
      "hostagent-kernel-guest: begin one\nhostagent-kernel-guest: end 0 two\nhostagent-kernel-guest: done\n");
  REQUIRE(run.tests.size() == 1);
  CHECK_FALSE(run.tests[0].exit_code.has_value());
}

TEST_CASE("an end marker between test cases whose begin line was lost still counts that test case") {
  const GuestRun run = parse_guest_run(
      "hostagent-kernel-guest: tests 2\n"
      "hostagent-kernel-guest: begin one\nhostagent-kernel-guest: end 0 one\n"
      "[doctest] test cases: 1 | 1 passed\n"
      "hostagent-kernel-guest: end 1 two\nhostagent-kernel-guest: done\n");
  REQUIRE(run.tests.size() == 2);
  CHECK(find_result(run, "one")->exit_code == 0);
  REQUIRE(find_result(run, "two") != nullptr);
  CHECK(find_result(run, "two")->exit_code == 1);  // a failure stays a failure
  CHECK(find_result(run, "two")->output.find("begin line was lost") != std::string::npos);
}

TEST_CASE("tail_lines keeps the last lines") {
  CHECK(tail_lines("a\nb\nc\n", 2) == "b\nc\n");
  CHECK(tail_lines("a\nb\nc", 5) == "a\nb\nc");
  CHECK(tail_lines("", 3).empty());
}

TEST_CASE("the module closure follows modules.dep, with dashes and underscores alike") {
  const std::string dep =
      "kernel/drivers/vfio/vfio.ko:\n"
      "kernel/virt/lib/irqbypass.ko:\n"
      "kernel/drivers/vfio/pci/vfio-pci-core.ko: kernel/virt/lib/irqbypass.ko kernel/drivers/vfio/vfio.ko\n"
      "kernel/drivers/vfio/pci/vfio-pci.ko: kernel/drivers/vfio/pci/vfio-pci-core.ko\n"
      "kernel/drivers/nvme/host/nvme.ko.xz: kernel/drivers/nvme/host/nvme-core.ko.xz\n"
      "kernel/drivers/nvme/host/nvme-core.ko.xz:\n";
  CHECK(module_closure(dep, "", {"vfio_pci"}).value() ==
        std::vector<std::string>{"kernel/drivers/vfio/pci/vfio-pci-core.ko", "kernel/drivers/vfio/pci/vfio-pci.ko",
                                 "kernel/drivers/vfio/vfio.ko", "kernel/virt/lib/irqbypass.ko"});
  CHECK(module_closure(dep, "", {"nvme", "vfio"}).value() ==
        std::vector<std::string>{"kernel/drivers/nvme/host/nvme-core.ko.xz", "kernel/drivers/nvme/host/nvme.ko.xz",
                                 "kernel/drivers/vfio/vfio.ko"});
  const auto missing = module_closure(dep, "", {"netdevsim"});
  REQUIRE_FALSE(missing.ok());
  CHECK(missing.error().code == ErrorCode::not_found);
  CHECK(missing.error().message.find("netdevsim") != std::string::npos);
  // Built in (6.12's virtio_pci): nothing to stage, not an error.
  const std::string builtin = "kernel/drivers/virtio/virtio_pci.ko\nkernel/drivers/virtio/virtio.ko\n";
  CHECK(module_closure(dep, builtin, {"virtio-pci", "vfio"}).value() ==
        std::vector<std::string>{"kernel/drivers/vfio/vfio.ko"});
  CHECK_FALSE(module_closure(dep, builtin, {"netdevsim"}).ok());
}

TEST_CASE("the loader's --list output gives the libraries and the loader, and names what it cannot find") {
  const std::string listed =
      "\tlinux-vdso.so.1 (0x00007ffd0b5f2000)\n"
      "\tlibmnl.so.0 => /lib/x86_64-linux-gnu/libmnl.so.0 (0x00007f8659083000)\n"
      "\tlibc.so.6 => /lib/x86_64-linux-gnu/libc.so.6 (0x00007f8658e7f000)\n"
      "\t/lib64/ld-linux-x86-64.so.2 (0x00007f86590d4000)\n";
  CHECK(parse_loader_list(listed, "/usr/bin/rdma").value() == std::vector<fs::path>{"/lib/x86_64-linux-gnu/libmnl.so.0",
                                                                                    "/lib/x86_64-linux-gnu/libc.so.6",
                                                                                    "/lib64/ld-linux-x86-64.so.2"});
  const auto missing = parse_loader_list(listed + "\tlibgone.so.1 => not found\n", "/usr/bin/rdma");
  REQUIRE_FALSE(missing.ok());
  CHECK(missing.error().message.find("libgone.so.1") != std::string::npos);
  CHECK(missing.error().message.find("/usr/bin/rdma") != std::string::npos);
}

TEST_CASE("a program goes into the initramfs with its libraries and the dynamic loader") {
  const fs::path program = "/bin/sh";
  if (!fs::exists("/lib64/ld-linux-x86-64.so.2")) {
    skip("no x86-64 dynamic loader on this machine");
    return;
  }
  InitramfsTree tree;
  REQUIRE(add_elf_with_libraries(tree, fs::canonical(program)).ok());
  CHECK(tree.contains(fs::canonical(program).relative_path().string()));
  CHECK(tree.contains("lib64/ld-linux-x86-64.so.2"));
  CHECK(tree.contains("lib/x86_64-linux-gnu/libc.so.6"));
  CHECK(tree.contains("lib64"));
}

TEST_CASE("the archive lists each directory before what it holds") {
  InitramfsTree tree;
  tree.add_file("usr/lib/x86_64-linux-gnu/libibverbs/librxe-rdmav34.so", "elf", 0755);
  tree.add_file("init", "#!/bin/busybox sh\n", 0755);
  tree.add_char_device("dev/console", 5, 1);
  const std::string archive = tree.archive();
  const auto at = [&](const std::string& name) { return archive.find(std::string(name) + '\0'); };
  for (const char* name : {"usr", "usr/lib", "usr/lib/x86_64-linux-gnu", "usr/lib/x86_64-linux-gnu/libibverbs",
                           "usr/lib/x86_64-linux-gnu/libibverbs/librxe-rdmav34.so", "dev", "dev/console", "init"}) {
    INFO(name);
    CHECK(at(name) != std::string::npos);
  }
  CHECK(at("usr") < at("usr/lib"));
  CHECK(at("usr/lib/x86_64-linux-gnu/libibverbs") < at("usr/lib/x86_64-linux-gnu/libibverbs/librxe-rdmav34.so"));
  CHECK(at("dev") < at("dev/console"));
  CHECK(archive.find("TRAILER!!!") > at("usr/lib/x86_64-linux-gnu/libibverbs/librxe-rdmav34.so"));
}

// "key=value,key=value" of a -device argument, its driver under "driver".
std::map<std::string, std::string> device_properties(const std::string& device) {
  std::map<std::string, std::string> properties;
  std::size_t start = 0;
  for (bool first = true; start <= device.size(); first = false) {
    const auto end = std::min(device.find(',', start), device.size());
    const std::string item = device.substr(start, end - start);
    const auto equals = item.find('=');
    if (first) {
      properties["driver"] = item;
    } else if (equals != std::string::npos) {
      properties[item.substr(0, equals)] = item.substr(equals + 1);
    }
    start = end + 1;
  }
  return properties;
}

TEST_CASE("every device plugs into a bus created before it, and every PCIe port has a chassis of its own") {
  std::set<std::string> ids = {"pcie.0"};
  std::set<std::string> chassis;
  std::map<std::string, int> drivers;
  const auto devices = device_arguments();
  REQUIRE(!devices.empty());
  CHECK(devices.front() == "intel-iommu,intremap=on,caching-mode=on");
  for (const auto& device : devices) {
    INFO(device);
    auto properties = device_properties(device);
    ++drivers[properties["driver"]];
    if (properties.contains("bus")) CHECK(ids.contains(properties["bus"]));
    if (properties.contains("chassis")) CHECK(chassis.insert(properties["chassis"]).second);
    if (properties.contains("id")) CHECK(ids.insert(properties["id"]).second);
  }
  namespace host = emulated_host;
  CHECK(drivers["pxb-pcie"] == host::kNodes);
  CHECK(drivers["edu"] == host::kNodes * host::kEduPerNode);
  CHECK(drivers["nvme"] == host::kNodes);
  CHECK(drivers["nvme-subsys"] == host::kNodes);
  CHECK(drivers["x3130-upstream"] == host::kNodes);
  CHECK(drivers["virtio-rng-pci"] == 1);
}

TEST_CASE("the QEMU command line: Q35 with a split irqchip, two NUMA nodes, the IOMMU on in the kernel") {
  const auto argv = qemu_argv(QemuInputs{"qemu-system-x86_64", "/boot/vmlinuz", "/tmp/initrd", "/tmp/c", "/tmp/r"});
  const auto after = [&](const std::string& option) {
    std::vector<std::string> values;
    for (std::size_t i = 0; i + 1 < argv.size(); ++i) {
      if (argv[i] == option) values.push_back(argv[i + 1]);
    }
    return values;
  };
  CHECK(after("-machine") == std::vector<std::string>{"q35,kernel-irqchip=split"});
  CHECK(after("-numa").size() == static_cast<std::size_t>(emulated_host::kNodes));
  CHECK(after("-serial") == std::vector<std::string>{"file:/tmp/c", "file:/tmp/r"});
  CHECK(after("-append").at(0).find("intel_iommu=on") != std::string::npos);
  // Under TCG on a busy machine the kernel's timer check would panic it (verify::kTcgKernelParameters).
  CHECK(after("-append").at(0).find(" no_timer_check") != std::string::npos);
  CHECK(after("-kernel") == std::vector<std::string>{"/boot/vmlinuz"});
  for (const auto& device : after("-device")) {
    if (!device.starts_with("nvme,")) continue;
    INFO(device);
    CHECK(device.find("sriov_max_vfs=" + std::to_string(emulated_host::kNvmeMaxVfs)) != std::string::npos);
    CHECK(device.find("subsys=") != std::string::npos);
  }
}

TEST_CASE("the guest's /init loads the modules, then runs the guest program's test cases between markers") {
  const std::string script = init_script(InitOptions{{"vfio-pci", "nvme"}, "/hostagent/guest", 77, "", "", ""});
  CHECK(script.starts_with("#!/bin/busybox sh\n"));
  CHECK(script.find("for module in vfio-pci nvme; do") != std::string::npos);
  CHECK(script.find("guest=/hostagent/guest\nrun=\n") != std::string::npos);
  CHECK(script.find("timeout 77 $run $guest --test-case=") != std::string::npos);
  CHECK(script.find("report done") != std::string::npos);
  CHECK(script.find("poweroff -f") != std::string::npos);
}

TEST_CASE("the end-to-end /init mounts this machine's root, starts libvirtd there, and runs the program chrooted") {
  const std::string setup = host_root_setup();
  const std::string script = init_script(InitOptions{{"nvme"}, "/build/kernel_e2e_tests", 77, setup, kNewRoot, ""});
  CHECK(script.find(setup) != std::string::npos);
  CHECK(script.find(setup) < script.find("report \"tests"));
  CHECK(script.find("run=\"chroot /newroot\"\n") != std::string::npos);
  CHECK(setup.find(std::string("mount -t 9p -o trans=virtio,version=9p2000.L,ro,msize=512000,cache=loose ") +
                   kHostRootTag) != std::string::npos);
  CHECK(setup.find("lowerdir=/mnt/host,upperdir=") != std::string::npos);
  CHECK(setup.find("chroot \"$R\" /usr/sbin/libvirtd -d") != std::string::npos);
  CHECK(setup.find("namespaces = [ ]") != std::string::npos);
  // The mounts' modules come after virtio_pci, which binds the 9p transport's PCI function.
  const auto modules = host_root_modules();
  CHECK(modules.front() == "virtio_pci");
  // Every test case is listed unless a filter says otherwise.
  CHECK(script.find("listed='*'\n") != std::string::npos);
  CHECK(setup.find("findfs") == std::string::npos);
}

TEST_CASE("a host-life boot mounts its persistent disk and takes libvirt's state from it, before libvirtd starts") {
  const std::string setup = host_root_setup(true);
  const auto mount = setup.find(std::string("disk=$(findfs LABEL=") + kPersistentLabel + ")");
  REQUIRE(mount != std::string::npos);
  // After libvirt's state is reset, before libvirtd reads it.
  CHECK(setup.find("rm -rf \"$R/etc/libvirt/qemu\"") < mount);
  CHECK(mount < setup.find("/usr/sbin/libvirtd -d"));
  CHECK(setup.find("mount --bind \"$P/libvirt-qemu\" \"$R/etc/libvirt/qemu\"") != std::string::npos);
  const auto modules = host_root_modules(true);
  CHECK(std::find(modules.begin(), modules.end(), "ext4") != modules.end());
  const std::string script =
      init_script(InitOptions{{"nvme"}, "/build/guest", 77, setup, kNewRoot, "*before the reboot*"});
  CHECK(script.find("listed='*before the reboot*'\n") != std::string::npos);
  CHECK(script.find("--list-test-cases --test-case=\"$listed\"") != std::string::npos);
  // The disk: an NVMe of its own, serial and drive named, only when asked for.
  QemuInputs inputs{"qemu-system-x86_64", "/boot/vmlinuz", "/tmp/initrd", "/tmp/c", "/tmp/r"};
  inputs.persistent_disk = "/tmp/life.img";
  const auto argv = qemu_argv(inputs);
  CHECK(std::find(argv.begin(), argv.end(), "file=/tmp/life.img,if=none,id=persist,format=raw") != argv.end());
  CHECK(std::find(argv.begin(), argv.end(), "nvme,id=nvmepersist,serial=hostagent-persist,drive=persist,bus=pcie.0") !=
        argv.end());
}

TEST_CASE("the end-to-end boot shares this machine's root read-only over virtio-9p, and the device boot does not") {
  QemuInputs inputs{"qemu-system-x86_64", "/boot/vmlinuz", "/tmp/initrd", "/tmp/c", "/tmp/r"};
  const auto plain = qemu_argv(inputs);
  CHECK(std::find(plain.begin(), plain.end(), std::string("-fsdev")) == plain.end());
  inputs.share_host_root = true;
  const auto shared = qemu_argv(inputs);
  const auto fsdev = std::find(shared.begin(), shared.end(), std::string("-fsdev"));
  REQUIRE(fsdev != shared.end());
  CHECK(fsdev[1].find("path=/,") != std::string::npos);
  CHECK(fsdev[1].find("readonly=on") != std::string::npos);
  CHECK(fsdev[2] == "-device");
  CHECK(fsdev[3].find(std::string("mount_tag=") + kHostRootTag) != std::string::npos);
}

TEST_CASE("the hygiene boot gives every edu the ROM image, one the kernel's ROM parser sizes exactly") {
  const auto plain = device_arguments();
  CHECK(std::none_of(plain.begin(), plain.end(),
                     [](const std::string& d) { return d.find("romfile=") != std::string::npos; }));
  const auto with_rom = device_arguments(emulated_host::kNvmeMaxVfs, "/run/edu-rom.bin");
  CHECK(std::count_if(with_rom.begin(), with_rom.end(), [](const std::string& d) {
          return d.starts_with("edu,romfile=/run/edu-rom.bin,bus=");
        }) == emulated_host::kNodes * emulated_host::kEduPerNode);
  // What drivers/pci/rom.c pci_get_rom_size reads: 55 AA, the PCIR offset at 0x18, the length at
  // PCIR+16 in 512-byte blocks, the last-image bit at PCIR+21.
  const std::string rom = emulated_host::edu_option_rom();
  const auto byte = [&](std::size_t at) { return static_cast<unsigned>(static_cast<unsigned char>(rom[at])); };
  CHECK(byte(0) == 0x55);
  CHECK(byte(1) == 0xAA);
  const std::size_t pcir = byte(0x18) | (byte(0x19) << 8U);
  CHECK(rom.substr(pcir, 4) == "PCIR");
  CHECK((byte(pcir + 16) | (byte(pcir + 17) << 8U)) * 512 == rom.size());
  CHECK((byte(pcir + 21) & 0x80U) != 0);
  CHECK(emulated_host::edu_option_rom('x') != rom);
  CHECK(emulated_host::edu_option_rom('x').size() == rom.size());
}

TEST_CASE("the hygiene boot's tenant NVMe is a whole controller on node 1, after its PF, on the tenant drive") {
  const auto plain = device_arguments();
  CHECK(std::none_of(plain.begin(), plain.end(),
                     [](const std::string& d) { return d.find("tenant") != std::string::npos; }));
  const auto with_tenant = device_arguments(emulated_host::kNvmeMaxVfs, {}, true);
  const auto controller = std::find_if(with_tenant.begin(), with_tenant.end(),
                                       [](const std::string& d) { return d.starts_with("nvme,id=nvmetenant,"); });
  REQUIRE(controller != with_tenant.end());
  CHECK(controller->find(",drive=tenant,") != std::string::npos);
  CHECK(controller->find("sriov") == std::string::npos);
  CHECK(controller[-1].find("bus=pxb1,") != std::string::npos);
  const auto pf = std::find_if(with_tenant.begin(), with_tenant.end(),
                               [](const std::string& d) { return d.starts_with("nvme,id=nvme1,"); });
  CHECK(pf < controller);
  QemuInputs inputs{"qemu", "vmlinuz", "initrd", "console", "results"};
  inputs.tenant_disk = "/run/tenant.img";
  const auto argv = qemu_argv(inputs);
  CHECK(std::find(argv.begin(), argv.end(), "file=/run/tenant.img,if=none,id=tenant,format=raw") != argv.end());
}

TEST_CASE("the linux-source package of a Debian kernel version") {
  CHECK(kernel_series("6.1.0-57-amd64") == "6.1");
  CHECK(kernel_series("6.12.9-amd64") == "6.12");
  CHECK(kernel_series("6.1") == "6.1");
}

}  // namespace
}  // namespace hostagent::testing::kernel
