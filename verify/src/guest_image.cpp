// verify/guest_image: the probe guest's kernel and initramfs (see the header).
#include "hostagent/verify/guest_image.hpp"
#include "hostagent/verify/xz.hpp"

#include <sys/stat.h>

#include <array>
#include <cstdio>
#include <cstring>

#include "hostagent/common/text.hpp"
#include "hostagent/common/text_file.hpp"

namespace hostagent::verify {
namespace {

namespace fs = std::filesystem;

// ttyS0: the guest's first serial port, which the stand-in domain writes to a file. panic=-1
// reboots at once on a kernel panic, and the stand-in maps a reboot to the end of the domain, so a
// broken guest stops with its panic in the log instead of hanging. quiet and loglevel=1 keep
// kernel messages from interleaving with the probe's lines; a panic is printed at KERN_EMERG, so
// the console shows it all the same.
constexpr std::string_view kCmdline = "console=ttyS0 panic=-1 quiet loglevel=1";

constexpr std::string_view kPanicPrefix = "Kernel panic - not syncing: ";

void append_hex(std::string& out, uint32_t value) {
  std::array<char, 9> text{};
  std::snprintf(text.data(), text.size(), "%08x", value);
  out.append(text.data(), 8);
}

void pad_to_4(std::string& out) {
  while (out.size() % 4 != 0) out += '\0';
}

uint32_t mode_of(const CpioEntry& entry) {
  switch (entry.kind) {
    case CpioEntry::Kind::directory:
      return S_IFDIR | entry.permissions;
    case CpioEntry::Kind::char_device:
      return S_IFCHR | entry.permissions;
    case CpioEntry::Kind::file:
      break;
  }
  return S_IFREG | entry.permissions;
}

// One "newc" record: "070701", then 13 fields of 8 hex digits (ino, mode, uid, gid, nlink, mtime,
// filesize, devmajor, devminor, rdevmajor, rdevminor, namesize with its NUL, check = 0), the name
// and its NUL padded to 4 bytes, the data padded to 4 bytes. Owner root, mtime 0: the archive is
// the same bytes on every run.
void append_record(std::string& out, uint32_t ino, const CpioEntry& entry) {
  const bool directory = entry.kind == CpioEntry::Kind::directory;
  out += "070701";
  for (const uint32_t field :
       {ino, mode_of(entry), 0U, 0U, directory ? 2U : 1U, 0U, static_cast<uint32_t>(entry.data.size()), 0U, 0U,
        entry.rdev_major, entry.rdev_minor, static_cast<uint32_t>(entry.path.size() + 1), 0U}) {
    append_hex(out, field);
  }
  out += entry.path;
  out += '\0';
  pad_to_4(out);
  out += entry.data;
  pad_to_4(out);
}

Result<fs::path> kernel_of(const GuestImageSources& sources) {
  std::error_code ec;
  if (!sources.kernel.empty()) {
    if (fs::is_regular_file(sources.kernel, ec)) return sources.kernel;
    return Error{ErrorCode::not_found, "--kernel " + sources.kernel.string() + " is not a file"};
  }
  auto newest = newest_boot_kernel("/boot");
  if (!newest) {
    return Error{ErrorCode::not_found,
                 "no kernel in /boot (vmlinuz-*): install the Debian package linux-image-amd64, or pass --kernel FILE"};
  }
  return *newest;
}

Result<std::string> static_busybox(const fs::path& busybox) {
  std::error_code ec;
  if (!fs::is_regular_file(busybox, ec)) {
    return Error{ErrorCode::not_found, busybox.string() +
                                           " does not exist: install the Debian package busybox-static, or pass "
                                           "--busybox FILE"};
  }
  HA_TRY(auto image, read_text_file(busybox));
  if (!is_static_elf(image)) {
    return Error{ErrorCode::not_found, busybox.string() +
                                           " is not a static x86-64 executable (Debian's busybox is dynamic; the "
                                           "initramfs has no C library): install busybox-static"};
  }
  return image;
}

// What the probe needs to read the seed CD-ROM on q35's AHCI controller, when not built in, in the
// order busybox insmod must load them (it resolves no dependency): the SCSI core, libata and AHCI,
// the CD-ROM driver and ISO 9660 (all =m in Debian's kernels).
constexpr std::array<const char*, 8> kSeedModules = {
    "kernel/drivers/scsi/scsi_common.ko", "kernel/drivers/scsi/scsi_mod.ko", "kernel/drivers/ata/libata.ko",
    "kernel/drivers/ata/libahci.ko",      "kernel/drivers/ata/ahci.ko",      "kernel/drivers/cdrom/cdrom.ko",
    "kernel/drivers/scsi/sr_mod.ko",      "kernel/fs/isofs/isofs.ko"};

bool built_in(const std::string& builtin, const std::string& module) {
  return builtin.starts_with(module + "\n") || builtin.find("\n" + module + "\n") != std::string::npos;
}

// A module as busybox insmod takes it: DIR/MODULE (6.1's), or DIR/MODULE.xz decompressed (6.12's).
Result<std::string> module_image(const fs::path& dir, const std::string& module) {
  std::error_code ec;
  if (fs::is_regular_file(dir / module, ec)) return read_text_file(dir / module);
  const fs::path xz = dir / (module + ".xz");
  if (!fs::is_regular_file(xz, ec)) {
    return Error{ErrorCode::not_found, module + " is neither in " + dir.string() + " (.ko or .ko.xz) nor built in"};
  }
  HA_TRY(const auto packed, read_text_file(xz));
  return decompress_xz(packed, xz.string());
}

// The seed modules of the kernel's /lib/modules/VERSION, as lib/modules/NN-NAME.ko (NN: load order);
// without them the probe reports the seed unread, and verify-guest says why.
struct SeedModules {
  std::vector<CpioEntry> entries;
  std::string missing;  // why they are not all there; "" when they are
};

SeedModules seed_modules(const fs::path& kernel, const fs::path& modules_root) {
  const std::string name = kernel.filename().string();
  const fs::path dir = modules_root / (name.starts_with("vmlinuz-") ? name.substr(8) : name);
  SeedModules out;
  const auto builtin = read_text_file(dir / "modules.builtin");
  if (!builtin.ok()) {
    out.missing = dir.string() + " has no modules.builtin: the kernel's modules are not installed";
    return out;
  }
  for (std::size_t place = 0; place < kSeedModules.size(); ++place) {
    const std::string module = kSeedModules[place];
    if (built_in(*builtin, module)) continue;
    auto image = module_image(dir, module);
    if (!image.ok()) {
      out.missing = image.error().message;
      return out;
    }
    out.entries.push_back({"lib/modules/" + std::to_string(place) + "-" + fs::path(module).filename().string(),
                           CpioEntry::Kind::file, 0644, std::move(*image)});
  }
  return out;
}

std::vector<CpioEntry> initramfs_entries(std::string busybox, std::string init) {
  using Kind = CpioEntry::Kind;
  return {
      {"bin", Kind::directory, 0755, {}},
      {"bin/busybox", Kind::file, 0755, std::move(busybox)},
      // The kernel opens /dev/console for init's stdin, stdout and stderr before init runs, from
      // the initramfs: without this node init's lines would go nowhere.
      {"dev", Kind::directory, 0755, {}},
      {"dev/console", Kind::char_device, 0600, {}, 5, 1},
      {"proc", Kind::directory, 0755, {}},
      {"sys", Kind::directory, 0755, {}},
      {"lib", Kind::directory, 0755, {}},
      {"lib/modules", Kind::directory, 0755, {}},
      {"seed", Kind::directory, 0755, {}},
      {"init", Kind::file, 0755, std::move(init)},
  };
}

Status make_readable(const fs::path& path, fs::perms mode) {
  std::error_code ec;
  fs::permissions(path, mode, ec);
  if (ec) return errno_error(ec.value(), "chmod", path.string());
  return ok_status();
}

}  // namespace

std::string tcg_kernel_cmdline(std::string_view base) {
  return std::string(base) + " " + std::string(kTcgKernelParameters);
}

std::optional<std::string> kernel_panic(std::string_view console) {
  // panic() prints its message after this prefix (kernel/panic.c), on the console whatever the
  // loglevel; the line ends with the message, or with a carriage return on a serial console.
  const auto at = console.find(kPanicPrefix);
  if (at == std::string_view::npos) return std::nullopt;
  auto line = console.substr(at, console.find('\n', at) - at);
  while (!line.empty() && (line.back() == '\r' || line.back() == ' ')) line.remove_suffix(1);
  return std::string(line);
}

std::string last_console_line(std::string_view console) {
  while (!console.empty() && (console.back() == '\n' || console.back() == '\r')) console.remove_suffix(1);
  const auto start = console.find_last_of('\n');
  const std::string_view line = start == std::string_view::npos ? console : console.substr(start + 1);
  constexpr size_t kShown = 160;
  return text::shown(line.substr(0, kShown));
}

std::string newc_archive(const std::vector<CpioEntry>& entries) {
  std::string out;
  uint32_t ino = 1;
  for (const auto& entry : entries) append_record(out, ino++, entry);
  append_record(out, 0, CpioEntry{"TRAILER!!!", CpioEntry::Kind::file, 0, {}});
  return out;
}

bool is_static_elf(std::string_view image) {
  constexpr uint32_t kPtInterp = 3;
  const auto read = [&](std::size_t at, std::size_t size) -> std::optional<uint64_t> {
    if (at + size > image.size()) return std::nullopt;
    uint64_t value = 0;
    std::memcpy(&value, image.data() + at, size);  // x86-64 is little-endian, like the file
    return value;
  };
  if (image.size() < 64 || image.substr(0, 4) != "\177ELF" || image[4] != 2) return false;  // ELFCLASS64
  const auto phoff = read(0x20, 8);
  const auto phentsize = read(0x36, 2);
  const auto phnum = read(0x38, 2);
  if (!phoff || !phentsize || !phnum || *phoff + *phnum * *phentsize > image.size()) return false;
  for (uint64_t i = 0; i < *phnum; ++i) {
    const auto type = read(*phoff + i * *phentsize, 4);
    if (!type || *type == kPtInterp) return false;
  }
  return true;
}

std::optional<fs::path> newest_boot_kernel(const fs::path& boot_dir) {
  std::optional<fs::path> newest;
  std::error_code ec;
  for (fs::directory_iterator it(boot_dir, ec), end; !ec && it != end; it.increment(ec)) {
    const std::string name = it->path().filename().string();
    if (!name.starts_with("vmlinuz-") || !it->is_regular_file(ec)) continue;
    if (!newest || strverscmp(name.c_str(), newest->filename().c_str()) > 0) newest = it->path();
  }
  return newest;
}

Result<GuestImage> build_guest_image(const fs::path& dir, const GuestImageSources& sources, const std::string& init) {
  HA_TRY(const auto kernel, kernel_of(sources));
  HA_TRY(auto busybox, static_busybox(sources.busybox));
  // With no_timer_check (tcg_kernel_cmdline): the probe boots under TCG, where load can fail the timer check.
  GuestImage image{dir / "vmlinuz", dir / "initramfs.cpio", tcg_kernel_cmdline(kCmdline)};
  // A copy, not the host's /boot file: libvirt's DAC driver relabels the kernel and initrd for
  // QEMU's user while the VM runs, which must not touch /boot.
  std::error_code ec;
  fs::copy_file(kernel, image.kernel, fs::copy_options::overwrite_existing, ec);
  if (ec) return errno_error(ec.value(), "copy " + kernel.string() + " to", image.kernel.string());
  auto entries = initramfs_entries(std::move(busybox), init);
  auto modules = seed_modules(kernel, sources.modules_root);
  image.seed_modules_missing = std::move(modules.missing);
  if (image.seed_modules_missing.empty()) {
    for (auto& module : modules.entries) entries.push_back(std::move(module));
  }
  HA_TRY_STATUS(write_text_file(image.initrd, newc_archive(entries)));
  HA_TRY_STATUS(make_readable(image.kernel, fs::perms(0644)));
  HA_TRY_STATUS(make_readable(image.initrd, fs::perms(0644)));
  return image;
}

}  // namespace hostagent::verify
