// verify/guest_view: the probe's console lines read back, and the probe's /init parsed by
// busybox's shell.
#include <doctest/doctest.h>

#include <fstream>

#include "hostagent/verify/guest_image.hpp"
#include "hostagent/verify/guest_view.hpp"
#include "test_support.hpp"

namespace hostagent::verify {
namespace {

PciAddress address(const char* text) {
  auto parsed = PciAddress::parse(text);
  REQUIRE(parsed.ok());
  return *parsed;
}

// What OVMF and the probe print, CRLF line ends and escape sequences included.
const std::string kConsole =
    "\x1b[2J\x1b[01;01H\x1b[=3hhostagent-guest-view: begin version=1\r\n"
    "hostagent-guest-view: node 1 cpus=2-3 mem_kib=250000\r\n"
    "hostagent-guest-view: node 0 cpus=0-1 mem_kib=180000\r\n"
    "[    1.234567] a kernel line in between\r\n"
    "hostagent-guest-view: pci 0000:41:00.0 vendor=0x104c device=0x8232 class=0x060400 numa_node=0 "
    "path=pci0000:40/0000:40:00.0/0000:41:00.0\r\n"
    "hostagent-guest-view: pci 0000:00:02.0 vendor=0x1af4 device=0x1005 class=0x00ff00 numa_node=-1 "
    "path=pci0000:00/0000:00:02.0\r\n"
    "hostagent-guest-view: pci 0000:43:00.0 vendor=0x1af4 device=0x1044 class=0x00ff00 numa_node=0 "
    "path=pci0000:40/0000:40:00.0/0000:41:00.0/0000:42:00.0/0000:43:00.0\r\n"
    "hostagent-guest-view: end\r\n"
    "[    3.8] reboot: Power down\r\n";

TEST_CASE("the probe's lines are read among firmware and kernel output, sorted") {
  const auto view = parse_guest_view(kConsole);
  REQUIRE_MESSAGE(view.ok(), view.error().message);
  REQUIRE(view->nodes.size() == 2);
  CHECK(view->nodes[0].id == 0);
  CHECK(view->nodes[0].cpus == std::vector<int>{0, 1});
  CHECK(view->nodes[0].mem_kib == 180000);
  CHECK(view->nodes[1].cpus == std::vector<int>{2, 3});
  REQUIRE(view->functions.size() == 3);
  CHECK(view->functions.front().address == address("0000:00:02.0"));

  const auto* rng = view->find(address("0000:43:00.0"));
  REQUIRE(rng != nullptr);
  CHECK(rng->vendor == 0x1af4);
  CHECK(rng->device == 0x1044);
  CHECK(rng->class_code == 0x00ff00);
  CHECK(rng->numa_node == 0);
  CHECK(rng->root_bus == 0x40);
  CHECK(rng->bridges ==
        std::vector<PciAddress>{address("0000:40:00.0"), address("0000:41:00.0"), address("0000:42:00.0")});
  CHECK_FALSE(rng->is_bridge());
  CHECK(view->find(address("0000:41:00.0"))->is_bridge());

  const auto* root = view->find(address("0000:00:02.0"));
  REQUIRE(root != nullptr);
  CHECK_FALSE(root->numa_node.has_value());  // -1: no proximity domain above it
  CHECK(root->bridges.empty());
  CHECK(view->find(address("0000:99:00.0")) == nullptr);
}

TEST_CASE("a guest that never reached the probe or stopped inside it is an error that says so") {
  const auto silent = parse_guest_view("BdsDxe: loading Boot0001\r\n[    0.5] Kernel panic - not syncing\r\n");
  REQUIRE_FALSE(silent.ok());
  CHECK(silent.error().code == ErrorCode::parse_error);
  CHECK(silent.error().message.find("never reached the probe") != std::string::npos);

  const auto cut = parse_guest_view(kConsole.substr(0, kConsole.find("hostagent-guest-view: end")));
  REQUIRE_FALSE(cut.ok());
  CHECK(cut.error().message.find("stops before its end line") != std::string::npos);
}

TEST_CASE("a guest whose kernel panicked is an error that names the panic") {
  // As a TCG guest on a loaded machine printed it, before no_timer_check.
  const std::string console =
      "[    0.041234] ..MP-BIOS bug: 8254 timer not connected to IO-APIC\r\n"
      "[    0.042000] Kernel panic - not syncing: IO-APIC + timer doesn't work!  Boot with apic=debug and send a "
      "report.  Then try booting with the 'noapic' option.\r\n"
      "[    0.042100] CPU: 0 PID: 1 Comm: swapper/0 Not tainted 6.1.0-57-amd64 #1  Debian 6.1.158-1\r\n";
  const auto panic = kernel_panic(console);
  REQUIRE(panic.has_value());
  CHECK(*panic ==
        "Kernel panic - not syncing: IO-APIC + timer doesn't work!  Boot with apic=debug and send a report.  Then try "
        "booting with the 'noapic' option.");
  const auto view = parse_guest_view(console);
  REQUIRE_FALSE(view.ok());
  CHECK(view.error().message.find("the guest's kernel panicked (Kernel panic - not syncing: IO-APIC + timer") == 0);
  CHECK(view.error().message.find("never reached the probe") != std::string::npos);

  CHECK_FALSE(kernel_panic("[    0.5] Run /init as init process\r\n").has_value());
  // The panic after a complete view does not make the view an error.
  CHECK(parse_guest_view(kConsole + "[    9.0] Kernel panic - not syncing: Attempted to kill init!\r\n").ok());
}

TEST_CASE("a console's last line is what a boot given up names") {
  CHECK(last_console_line("[    0.1] Linux version 6.1\r\n[    2.3] Run /init as init process\r\n\r\n") ==
        "[    2.3] Run /init as init process");
  CHECK(last_console_line("no newline at all") == "no newline at all");
  CHECK(last_console_line("") == "");
  CHECK(last_console_line("\r\n\n") == "");
  // What a guest printed reaches the message escaped, and only its first 160 bytes.
  CHECK(last_console_line("ok\n\x1b[2Jcleared\n") == "\\x1b[2Jcleared");
  CHECK(last_console_line(std::string(400, 'x')).size() == 160);
}

TEST_CASE("links and distances: a number pair, none ('-'), the kernel's Unknown, or a line without them") {
  const auto view = parse_guest_view(
      "hostagent-guest-view: begin version=1\n"
      "hostagent-guest-view: node 0 cpus=0 mem_kib=1 distance=10,21\n"
      "hostagent-guest-view: node 1 cpus=1 mem_kib=1\n"
      "hostagent-guest-view: pci 0000:40:00.0 vendor=0x1b36 device=0x000c class=0x060400 numa_node=0 "
      "path=pci0000:40/0000:40:00.0 max_link=16.0/16 link=2.5/1\n"
      "hostagent-guest-view: pci 0000:42:00.0 vendor=0x104c device=0x8233 class=0x060400 numa_node=0 "
      "path=pci0000:40/0000:40:00.0/0000:42:00.0 max_link=Unknown/0 link=2.5/1\n"
      "hostagent-guest-view: pci 0000:00:02.0 vendor=0x1af4 device=0x1005 class=0x00ff00 numa_node=-1 "
      "path=pci0000:00/0000:00:02.0 max_link=- link=-\n"
      "hostagent-guest-view: end\n");
  REQUIRE_MESSAGE(view.ok(), view.error().message);
  CHECK(view->nodes[0].distances == std::vector<int>{10, 21});
  CHECK(view->nodes[1].distances.empty());
  const auto* port = view->find(*PciAddress::parse("0000:40:00.0"));
  REQUIRE(port != nullptr);
  REQUIRE(port->max_link.has_value());
  CHECK(port->max_link->speed_gts == doctest::Approx(16.0));
  CHECK(port->max_link->width == 16);
  CHECK(port->link->width == 1);
  CHECK_FALSE(view->find(*PciAddress::parse("0000:42:00.0"))->max_link.has_value());
  CHECK_FALSE(view->find(*PciAddress::parse("0000:00:02.0"))->link.has_value());
  CHECK_FALSE(view->seed.has_value());  // no seed lines: the stand-in had none
  CHECK(view->delivered.empty());
}

// As the probe prints /proc/iomem's host bridge windows (from a Vela-2 stand-in's boot).
TEST_CASE("host bridge windows: each one, in the order printed") {
  const auto view = parse_guest_view(
      "hostagent-guest-view: begin version=1\n"
      "hostagent-guest-view: window bus=0000:00 start=0x000a0000 end=0x000bffff\n"
      "hostagent-guest-view: window bus=0000:40 start=0x8000100000 end=0x80002fffff\n"
      "hostagent-guest-view: window bus=0000:00 start=0x8000000000 end=0x80000fffff\n"
      "hostagent-guest-view: end\n");
  REQUIRE_MESSAGE(view.ok(), view.error().message);
  REQUIRE(view->windows.size() == 3);
  CHECK(view->windows[0].bus == "0000:00");
  CHECK(view->windows[0].start == 0xa0000);
  CHECK(view->windows[1].bus == "0000:40");
  CHECK(view->windows[1].end == 0x80002fffffULL);
  CHECK(parse_guest_view(kConsole)->windows.empty());  // a probe that printed none
}

TEST_CASE("a malformed probe line is refused with its line number") {
  const auto check_refused = [](const std::string& line, const std::string& expected) {
    CAPTURE(line);
    const auto view = parse_guest_view("hostagent-guest-view: begin version=1\nhostagent-guest-view: " + line +
                                       "\nhostagent-guest-view: end\n");
    REQUIRE_FALSE(view.ok());
    CHECK(view.error().message.find("guest console line 2: ") == 0);
    CHECK(view.error().message.find(expected) != std::string::npos);
  };
  check_refused("node x cpus=0 mem_kib=1", "node ID cpus=LIST mem_kib=N");
  check_refused("node 0 cpus=0 mem_kib=", "node ID cpus=LIST mem_kib=N");
  check_refused("pci 0000:43:00.0 vendor=0x1af4 device=0x1044 class=0x00ff00 path=pci0000:40/0000:43:00.0",
                "numa_node=");
  check_refused("pci 0000:43:00.0 vendor=0x1af4 device=0x1044 class=0x00ff00 numa_node=0 path=0000:43:00.0",
                "does not start at a root bus");
  check_refused("pci 0000:43:00.0 vendor=0x1af4 device=0x1044 class=0x00ff00 numa_node=0 path=pci0000:40/0000:44:00.0",
                "does not end at 0000:43:00.0");
  check_refused(
      "pci 0000:43:00.0 vendor=0x1af4 device=0x1044 class=0x00ff00 numa_node=0 path=pci0000:40/xyz/0000:43:00.0",
      "has 'xyz'");
  check_refused("bridge 0000:40:00.0", "unknown probe line 'bridge'");
  check_refused("node 0 cpus=0 mem_kib=1 distance=10,x", "distance '10,x' is not a list of numbers");
  check_refused("file path=/etc/nccl.conf sha256=abc", "a file line needs 'file path=PATH sha256=HEX'");
  check_refused("window bus=0000:00 start=0x10 end=0xf", "end >= start");
  check_refused("window bus=0000:00 start=0x10", "a window line needs");
  check_refused("window start=0x0 end=0x1", "a window line needs");
  check_refused(
      "pci 0000:40:00.0 vendor=0x1b36 device=0x000c class=0x060400 numa_node=0 path=pci0000:40/0000:40:00.0 "
      "max_link=16.0",
      "link '16.0' is not GTS/WIDTH");

  const auto other_version = parse_guest_view("hostagent-guest-view: begin version=2\n");
  REQUIRE_FALSE(other_version.ok());
  CHECK(other_version.error().message.find("another version") != std::string::npos);
  const auto no_begin = parse_guest_view("hostagent-guest-view: node 0 cpus=0 mem_kib=1\n");
  REQUIRE_FALSE(no_begin.ok());
  CHECK(no_begin.error().message.find("before the probe's begin line") != std::string::npos);
}

TEST_CASE("the probe's /init is shell that busybox parses") {
  const auto busybox = testing::find_program("busybox");
  if (!busybox) {
    testing::skip("busybox is not installed (package busybox-static)");
    return;
  }
  testing::TempDir dir;
  const auto write = [&](const char* name, const std::string& text) {
    std::ofstream(dir.path() / name) << text;
    return (dir.path() / name).string();
  };
  const auto parsed = testing::run_command({busybox->string(), "sh", "-n", write("init", probe_init_script())});
  CHECK_MESSAGE(parsed.exit_code == 0, parsed.output);
  const auto broken = write("broken", probe_init_script() + "for x in; do\n");
  CHECK(testing::run_command({busybox->string(), "sh", "-n", broken}).exit_code != 0);
  CHECK(probe_init_script().starts_with("#!/bin/busybox sh\n"));
}

}  // namespace
}  // namespace hostagent::verify
