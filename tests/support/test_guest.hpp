// Test helper: a guest that really boots, for the lifecycle tests that run QEMU under libvirtd. It
// is Debian's own kernel and a few-megabyte initramfs built here (busybox and a shell script as
// /init), booted directly by QEMU: no disk image, no network, no download. Once up it prints one
// line on its serial console saying what it sees, and it powers off on the ACPI power button, so
// a graceful shutdown (virDomainShutdown) ends it. Then a shell reads its serial console.
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "hostagent/verify/guest_image.hpp"

namespace hostagent::testing {

struct TestGuest {
  std::filesystem::path kernel;  // a copy of the host's kernel, beside the initramfs
  std::filesystem::path initrd;  // the initramfs: an uncompressed cpio "newc" archive
  std::string cmdline;
};

// Finds Debian's kernel (the newest /boot/vmlinuz-*, or $HOSTAGENT_TEST_KERNEL) with the modules
// the guest needs from /lib/modules/VERSION, and busybox-static's /bin/busybox; builds the
// initramfs into dir and makes dir readable for libvirt's QEMU user. When something is missing:
// nullopt after "SKIPPED: ..." naming the Debian package to install (linux-image-amd64,
// busybox-static), or a failed check instead when HOSTAGENT_REQUIRE_LIBVIRTD=1.
std::optional<TestGuest> build_test_guest(const std::filesystem::path& dir);

// Writes dir/NAME.yaml, a template for the guest: 2 vCPUs, 1 GiB in 2M hugepages, one guest NUMA
// cell, q35, BIOS, direct kernel boot of `guest`, and a disk over `image` when one is given (the
// guest writes to it). Returns the file's path.
std::filesystem::path write_test_guest_template(const std::filesystem::path& dir, const std::string& name,
                                                const TestGuest& guest, const std::filesystem::path& image = {});
// A 64 MiB raw file at dir/base.raw, for write_test_guest_template's image; its path.
std::filesystem::path write_test_guest_image(const std::filesystem::path& dir);

// On a guest's kernel command line: the guest runs no agent and ignores the power button, so only
// a power-off stops it.
inline constexpr const char* kTestGuestDeaf = "hostagent_test_guest.deaf";

// The guest's console lines, for tests to wait for.
inline constexpr const char* kTestGuestUp = "hostagent-test-guest: up ";
// What the guest says on its console when its agent powers it off (guest-shutdown).
inline constexpr const char* kTestGuestAgentShutdown = "hostagent-test-guest: guest agent shutdown";
// Before "up": each line of each file of the NoCloud seed it mounted ("...: seed meta-data:
// instance-id: ..."), then "...: seed label=cidata files=meta-data,user-data"; or "...: seed none".
inline constexpr const char* kTestGuestSeed = "hostagent-test-guest: seed ";
inline constexpr const char* kTestGuestPowerButton = "hostagent-test-guest: power button pressed, powering off";

// What the guest reports once booted, in its line
//   hostagent-test-guest: up cpus=2 nodes=1 node_cpus=0-1 mem_kib=1001234 power_button=yes
struct TestGuestReport {
  int cpus = 0;                        // online CPUs
  int nodes = 0;                       // NUMA nodes
  std::vector<std::string> node_cpus;  // each node's CPU list, as the guest kernel prints it ("0-1")
  uint64_t mem_kib = 0;                // MemTotal: the memory the guest kernel manages
  bool power_button = false;           // an ACPI power button is watched: a graceful shutdown works
};

// The report in a console log, or nullopt when the "up" line is not (yet) there or is incomplete.
std::optional<TestGuestReport> find_test_guest_report(const std::string& console);

// The NoCloud seed as the guest read it from its CD-ROM: the volume label and each file's text (its
// lines joined with '\n'), by name.
struct TestGuestSeed {
  std::string label;
  std::map<std::string, std::string> files;
};
// The seed of the first boot in a console log; nullopt when that boot showed none (no CD-ROM, not
// readable) or has not shown it yet.
std::optional<TestGuestSeed> find_test_guest_seed(const std::string& console);

// For a boot's failure message: " (the guest's kernel panicked: MESSAGE)" when the console shows a
// panic (verify::kernel_panic), else "".
std::string panic_note(const std::string& console);

// The pieces, for their own tests.
namespace guest_detail {

// The archive writer is the probe guest's (hostagent/verify/guest_image.hpp).
using CpioEntry = verify::CpioEntry;

// The guest's /init script.
std::string init_script();
// /sbin/shutdown, which qemu-ga's guest-shutdown runs.
std::string shutdown_script();

// A kernel module file's ELF image: NAME.ko as is, NAME.ko.xz decompressed (busybox insmod loads
// only uncompressed modules); nullopt with `why` set when it cannot be read or decompressed.
std::optional<std::string> read_module(const std::filesystem::path& file, std::string& why);

}  // namespace guest_detail
}  // namespace hostagent::testing
