// verify/guest_image: the probe guest that `hostagentctl verify-guest` boots. It is the
// host's own kernel and an initramfs written here (a static busybox and the probe's /init, in the
// kernel's cpio "newc" format, no cpio tool): no disk image, no network, no download.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "hostagent/common/result.hpp"

namespace hostagent::verify {

// What every kernel the project boots under TCG (the probe, the test guests, the kernel harness)
// adds to its command line. no_timer_check: at boot the kernel counts timer ticks over a short busy
// wait to see that the IO-APIC timer works, and under TCG on a loaded machine too few arrive, so it
// panics with "IO-APIC + timer doesn't work!" at 0.04 s; the parameter skips that check
// (timer_irq_works() in arch/x86/kernel/apic/io_apic.c returns at once), the kernel's own remedy
// for slow virtual timers (Documentation/admin-guide/kernel-parameters.txt).
inline constexpr std::string_view kTcgKernelParameters = "no_timer_check";

// base followed by kTcgKernelParameters: the command line of a kernel booted under TCG.
std::string tcg_kernel_cmdline(std::string_view base);

// The kernel's panic message on a console ("Kernel panic - not syncing: ..." up to its line end),
// or nullopt when the kernel did not panic: what a boot's error names when the guest stopped early.
std::optional<std::string> kernel_panic(std::string_view console);

// A console's last line (control characters shown escaped, at most 160 bytes), "" when it has none:
// a guest that hung sits on one line for good (a TCG vCPU that stopped taking its timer), one still
// booting slowly does not.
std::string last_console_line(std::string_view console);

struct CpioEntry {
  enum class Kind { directory, file, char_device };
  std::string path;  // inside the archive, without a leading '/': "bin/busybox"
  Kind kind = Kind::file;
  uint32_t permissions = 0644;
  std::string data;  // a file's content
  uint32_t rdev_major = 0, rdev_minor = 0;
};

// An uncompressed cpio archive in the "newc" format (the kernel's initramfs format, see the
// kernel's Documentation/driver-api/early-userspace/buffer-format.rst), ending in TRAILER!!!.
std::string newc_archive(const std::vector<CpioEntry>& entries);

// An x86-64 ELF executable without a PT_INTERP program header: it needs no dynamic loader, so it
// runs in an initramfs that holds nothing else. Debian's busybox package ships a dynamic
// /bin/busybox, busybox-static a static one.
bool is_static_elf(std::string_view image);

// The newest DIR/vmlinuz-VERSION by version order (6.1.0-10 after 6.1.0-9); nullopt when none.
std::optional<std::filesystem::path> newest_boot_kernel(const std::filesystem::path& boot_dir);

struct GuestImageSources {
  std::filesystem::path kernel;  // "" : the newest /boot/vmlinuz-*
  std::filesystem::path busybox = "/bin/busybox";
  // Where the kernel's modules are, VERSION/ below it for vmlinuz-VERSION: the probe takes the few
  // it needs to read the seed CD-ROM (the SCSI core, AHCI, the CD-ROM driver, ISO 9660).
  std::filesystem::path modules_root = "/lib/modules";
};

struct GuestImage {
  std::filesystem::path kernel;  // a copy, in the image's directory
  std::filesystem::path initrd;
  std::string cmdline;
  // Why the initramfs lacks the modules to read the seed ("" when it has them, or needs none): the
  // check then reports the delivered files unread, saying this.
  std::string seed_modules_missing = {};
};

// Writes the probe guest into dir (which must exist): a copy of the kernel, the initramfs with
// `init` as /init, and makes both readable for QEMU's user. Fails with not_found naming the Debian
// package (linux-image-amd64, busybox-static) or the option (--kernel, --busybox) when a piece is
// missing or unusable.
Result<GuestImage> build_guest_image(const std::filesystem::path& dir, const GuestImageSources& sources,
                                     const std::string& init);

}  // namespace hostagent::verify
