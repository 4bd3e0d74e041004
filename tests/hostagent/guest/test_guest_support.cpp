// The test guest's pieces, without libvirtd: the initramfs built from this host (its cpio writer is
// tested with verify), /init's syntax, the template, the console report and module
// decompression.
#include <doctest/doctest.h>
#include <sys/stat.h>

#include <algorithm>
#include <fstream>

#include "hostagent/vmtemplates/vm_template.hpp"
#include "newc_reader.hpp"
#include "test_guest.hpp"
#include "test_support.hpp"

namespace hostagent::testing {
namespace {

namespace fs = std::filesystem;

std::string write_temp(const fs::path& file, const std::string& data) {
  std::ofstream(file, std::ios::binary) << data;
  return file.string();
}

TEST_CASE("the guest's /init is shell that busybox parses") {
  const auto busybox = find_program("busybox");
  if (!busybox) {
    skip("busybox is not installed (package busybox-static)");
    return;
  }
  TempDir dir;
  const auto file = write_temp(dir.path() / "init", guest_detail::init_script());
  const auto parsed = run_command({busybox->string(), "sh", "-n", file});
  CHECK_MESSAGE(parsed.exit_code == 0, parsed.output);
  // A syntax error is caught: the check above can fail.
  const auto broken = write_temp(dir.path() / "broken", guest_detail::init_script() + "if true; then\n");
  CHECK(run_command({busybox->string(), "sh", "-n", broken}).exit_code != 0);
  CHECK(guest_detail::init_script().starts_with("#!/bin/busybox sh\n"));
}

TEST_CASE("the initramfs built on this host holds a static busybox, /init, a console and the modules, in load order") {
  TempDir dir;
  const auto guest = build_test_guest(dir.path());
  if (!guest) return;
  CHECK(guest->cmdline.find("console=ttyS0") != std::string::npos);
  CHECK(guest->cmdline.find(" no_timer_check") != std::string::npos);
  CHECK(guest->kernel.parent_path() == dir.path());
  CHECK(fs::file_size(guest->kernel) > 1'000'000);
  CHECK(fs::status(dir.path()).permissions() == fs::perms(0755));
  CHECK(fs::status(guest->initrd).permissions() == fs::perms(0644));
  const auto records = parse_newc(read_text_file(guest->initrd));
  CHECK(records.at("init").data == guest_detail::init_script());
  CHECK(records.at("init").mode == (S_IFREG | 0755));
  CHECK(records.at("bin/busybox").data == read_text_file("/bin/busybox"));
  CHECK(records.at("dev/console").mode == (S_IFCHR | 0600));
  for (const char* dir_name : {"proc", "sys", "dev", "bin", "lib/modules"}) {
    CAPTURE(dir_name);
    CHECK(records.at(dir_name).mode == (S_IFDIR | 0755));
  }
  // Debian 12 builds the ACPI button, evdev and the seed CD-ROM's stack as modules; they go in
  // uncompressed, as ELF objects, named so that the guest's glob loads each after what it needs.
  const std::vector<std::string> in_order = {"00-button",  "01-evdev", "02-scsi_common", "03-scsi_mod", "04-libata",
                                             "05-libahci", "06-ahci",  "07-cdrom",       "08-sr_mod",   "09-isofs"};
  for (const auto& module : in_order) {
    const std::string path = "lib/modules/" + module + ".ko";
    CAPTURE(path);
    REQUIRE(records.count(path) == 1);
    CHECK(records.at(path).data.starts_with("\177ELF"));
  }
  CHECK(std::is_sorted(in_order.begin(), in_order.end()));
}

TEST_CASE("the seed the guest shows is read back from its console, file by file, and none is none") {
  const std::string console =
      "[    1.0] boot\n"
      "hostagent-test-guest: seed meta-data: instance-id: \"7c1e\"\n"
      "hostagent-test-guest: seed meta-data: local-hostname: \"vm1\"\n"
      "hostagent-test-guest: seed user-data: #cloud-config\n"
      "hostagent-test-guest: seed user-data: \n"
      "hostagent-test-guest: seed user-data: ssh_authorized_keys: [\"ssh-ed25519 AAAA k\"]\n"
      "hostagent-test-guest: seed label=cidata files=meta-data,user-data\n"
      "hostagent-test-guest: up cpus=2\n"
      "hostagent-test-guest: seed none\n";  // a second boot's lines do not mix in
  const auto seed = find_test_guest_seed(console);
  REQUIRE(seed.has_value());
  CHECK(seed->label == "cidata");
  REQUIRE(seed->files.size() == 2);
  CHECK(seed->files.at("meta-data") == "instance-id: \"7c1e\"\nlocal-hostname: \"vm1\"");
  CHECK(seed->files.at("user-data") == "#cloud-config\n\nssh_authorized_keys: [\"ssh-ed25519 AAAA k\"]");
  CHECK_FALSE(find_test_guest_seed("hostagent-test-guest: seed none\nhostagent-test-guest: up cpus=2\n"));
  CHECK_FALSE(find_test_guest_seed("hostagent-test-guest: seed unreadable: sr0 label=other\n"));
  // Lines without the end of the seed: not shown yet.
  CHECK_FALSE(find_test_guest_seed("hostagent-test-guest: seed meta-data: instance-id: x\n"));
}

TEST_CASE("the test guest's template loads with the documented shape") {
  TempDir dir;
  const TestGuest guest{"/tmp/a \"b\": c/vmlinuz", "/tmp/a \\ #d/initramfs.cpio", "console=ttyS0 x=\"y z\""};
  const auto file = write_test_guest_template(dir.path(), "test-guest", guest);
  CHECK(file == dir.path() / "test-guest.yaml");
  const auto shape = vmtemplates::load_template_file(file, {});
  REQUIRE_MESSAGE(shape.ok(), (shape.ok() ? "" : shape.error().message));
  CHECK(shape->name == "test-guest");
  CHECK(shape->vcpus == 2);
  CHECK(shape->memory_bytes == 1ULL << 30);
  CHECK(shape->hugepage_size_bytes == 2ULL << 20);
  CHECK_FALSE(shape->guest_numa.mirror);
  CHECK(shape->guest_numa.cells == 1);
  CHECK(shape->machine == "q35");
  CHECK(shape->firmware == vmtemplates::Firmware::bios);
  CHECK(shape->gpus.count == 0);
  CHECK(shape->boot.image.empty());
  CHECK(shape->boot.kernel == guest.kernel.string());
  CHECK(shape->boot.initrd == guest.initrd.string());
  CHECK(shape->boot.cmdline == guest.cmdline);
}

TEST_CASE("the guest's report is read from its up line, CRLF and all, and only when complete") {
  const std::string line = "hostagent-test-guest: up cpus=2 nodes=2 node_cpus=0/1 mem_kib=1001234 power_button=yes";
  const auto report = find_test_guest_report("[    1.5] booting\r\n" + line + "\r\nafter\r\n");
  REQUIRE(report.has_value());
  CHECK(report->cpus == 2);
  CHECK(report->nodes == 2);
  CHECK(report->node_cpus == std::vector<std::string>{"0", "1"});
  CHECK(report->mem_kib == 1001234);
  CHECK(report->power_button);
  CHECK_FALSE(find_test_guest_report(line).has_value());  // no line end yet: still being written
  CHECK_FALSE(find_test_guest_report("nothing here\n").has_value());
  CHECK_FALSE(find_test_guest_report("hostagent-test-guest: up cpus=two nodes=1 mem_kib=1 power_button=no\n"));
  CHECK_FALSE(find_test_guest_report("hostagent-test-guest: up cpus=2 nodes=1 power_button=no\n"));
  CHECK_FALSE(find_test_guest_report("hostagent-test-guest: up cpus=2 nodes=1 mem_kib=1 power_button=maybe\n"));
  const auto no_button =
      find_test_guest_report("hostagent-test-guest: up cpus=1 nodes=1 node_cpus=0 mem_kib=9 power_button=no\n");
  REQUIRE(no_button.has_value());
  CHECK_FALSE(no_button->power_button);
}

TEST_CASE("kernel modules: .ko as is, .ko.xz decompressed, other compressions refused with the file named") {
  TempDir dir;
  const std::string elf("\177ELF module body \0\1\2", 20);
  std::string why;
  const auto plain = write_temp(dir.path() / "m.ko", elf);
  CHECK(guest_detail::read_module(plain, why) == elf);
  CHECK_FALSE(guest_detail::read_module(write_temp(dir.path() / "m.ko.zst", "(zstd)"), why).has_value());
  CHECK(why.find("m.ko.zst") != std::string::npos);
  CHECK_FALSE(guest_detail::read_module(write_temp(dir.path() / "bad.ko.xz", "not xz"), why).has_value());
  CHECK(why.find("bad.ko.xz") != std::string::npos);
  CHECK_FALSE(guest_detail::read_module(dir.path() / "absent.ko", why).has_value());
  CHECK(why.find("absent.ko") != std::string::npos);
  const auto xz = find_program("xz");
  if (!xz) {
    skip("xz is not installed (package xz-utils): .ko.xz decompression untested");
    return;
  }
  const auto compressed = run_command({xz->string(), "--keep", "--check=crc32", plain});
  REQUIRE_MESSAGE(compressed.exit_code == 0, compressed.output);
  const auto decompressed = guest_detail::read_module(dir.path() / "m.ko.xz", why);
  if (why.find("without liblzma") != std::string::npos) {
    skip(why);
    return;
  }
  CHECK_MESSAGE(decompressed == elf, why);
}

}  // namespace
}  // namespace hostagent::testing
