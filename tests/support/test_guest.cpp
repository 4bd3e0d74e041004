// Test helper: the bootable test guest. Finds the host's kernel, its two modules the guest needs and
// a static busybox, and writes the initramfs (a cpio archive written here, no cpio tool) and a
// template that boots it.
#include "test_guest.hpp"

#include <doctest/doctest.h>

#include <algorithm>
#include <array>
#include <charconv>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <sstream>

#include "hostagent/verify/xz.hpp"
#include "test_support.hpp"

namespace hostagent::testing {
namespace {

namespace fs = std::filesystem;
using guest_detail::CpioEntry;

// ttyS0: the guest's first serial port, which the domain's <serial> logs to a file. panic=-1
// reboots at once on a kernel panic, so a broken guest shows up in the log (and as a reboot)
// instead of hanging. loglevel=6 keeps the log to notices and above (the kernel's boot chatter is
// info), and the guest's own lines: the notices include start_kernel's "Linux version" banner, the
// daemon's kernel marker. earlycon prints it as the kernel starts rather than once the serial
// driver loads, so the kernel phase ends where the kernel's own time begins. The guest gets it
// through verify::tcg_kernel_cmdline (no_timer_check), so load on the machine cannot panic it.
constexpr std::string_view kCmdline = "console=ttyS0 earlycon=uart8250,io,0x3f8 panic=-1 loglevel=6";

// What the guest needs from the kernel's modules when they are not built in, in the order they load
// (busybox insmod resolves no dependency: each comes after those modules.dep says it needs).
// button.ko turns the ACPI power button (what virDomainShutdown presses) into a key press on an input
// device, evdev.ko makes that device readable as /dev/input/eventN (Debian: CONFIG_ACPI_BUTTON=m,
// CONFIG_INPUT_EVDEV=m). The rest read the NoCloud seed hostagent attaches as a SATA CD-ROM on q35's
// AHCI controller (render/domain_devices.cpp): the SCSI core, libata and AHCI, the CD-ROM driver and
// ISO 9660 (all =m on Debian).
// The virtio ones give the QEMU guest agent its port: the domain's org.qemu.guest_agent.0 channel on
// a virtio-serial controller (virtio_pci, then virtio_console; Debian: CONFIG_VIRTIO_PCI=m,
// CONFIG_VIRTIO_CONSOLE=m); virtio_blk, the VM's disk (CONFIG_VIRTIO_BLK=m), which the guest writes.
constexpr std::array<const char*, 17> kModules = {"kernel/drivers/acpi/button.ko",
                                                  "kernel/drivers/input/evdev.ko",
                                                  "kernel/drivers/scsi/scsi_common.ko",
                                                  "kernel/drivers/scsi/scsi_mod.ko",
                                                  "kernel/drivers/ata/libata.ko",
                                                  "kernel/drivers/ata/libahci.ko",
                                                  "kernel/drivers/ata/ahci.ko",
                                                  "kernel/drivers/cdrom/cdrom.ko",
                                                  "kernel/drivers/scsi/sr_mod.ko",
                                                  "kernel/fs/isofs/isofs.ko",
                                                  "kernel/drivers/virtio/virtio_ring.ko",
                                                  "kernel/drivers/virtio/virtio.ko",
                                                  "kernel/drivers/virtio/virtio_pci_legacy_dev.ko",
                                                  "kernel/drivers/virtio/virtio_pci_modern_dev.ko",
                                                  "kernel/drivers/virtio/virtio_pci.ko",
                                                  "kernel/drivers/char/virtio_console.ko",
                                                  "kernel/drivers/block/virtio_blk.ko"};

// The host's QEMU guest agent (Debian's qemu-guest-agent, the same build a Debian guest runs), with
// the shared objects it loads, found as its dynamic loader finds them.
constexpr const char* kGuestAgent = "/usr/sbin/qemu-ga";
constexpr const char* kDynamicLoader = "/lib64/ld-linux-x86-64.so.2";

std::nullopt_t missing(const std::string& why, const std::string& package) {
  const std::string message = why + " (install the Debian package " + package + ")";
  const char* require = std::getenv("HOSTAGENT_REQUIRE_LIBVIRTD");
  if (require != nullptr && std::string(require) == "1") {
    FAIL_CHECK("the test guest cannot be built: " << message);
  } else {
    skip("the test guest cannot be built: " + message);
  }
  return std::nullopt;
}

std::optional<std::string> read_file(const fs::path& file) {
  std::ifstream in(file, std::ios::binary);
  if (!in) return std::nullopt;
  std::ostringstream out;
  out << in.rdbuf();
  if (in.bad()) return std::nullopt;
  return out.str();
}

void write_file(const fs::path& file, const std::string& data) {
  std::ofstream out(file, std::ios::binary | std::ios::trunc);
  out << data;
  out.flush();
  REQUIRE_MESSAGE(out.good(), "cannot write " << file.string());
}

std::optional<std::string> static_busybox() {
  const fs::path busybox = "/bin/busybox";
  std::error_code ec;
  if (!fs::is_regular_file(busybox, ec)) return missing(busybox.string() + " does not exist", "busybox-static");
  auto image = read_file(busybox);
  if (!image) return missing("cannot read " + busybox.string(), "busybox-static");
  if (!verify::is_static_elf(*image)) {
    return missing(busybox.string() + " is dynamically linked (Debian's busybox): the initramfs has no C library",
                   "busybox-static");
  }
  return image;
}

struct Kernel {
  fs::path image;
  std::vector<CpioEntry> modules;  // lib/modules/NAME.ko, decompressed
};

bool built_in(const fs::path& modules_dir, const std::string& module) {
  const auto builtin = read_file(modules_dir / "modules.builtin");
  return builtin && (builtin->starts_with(module + "\n") || builtin->find("\n" + module + "\n") != std::string::npos);
}

// MODULE (kernel/...) from a modules directory, decompressed, as lib/modules/NN-NAME.ko: NN its place in
// kModules, so the guest's glob loads them in that order; nullopt after missing() when it is not
// there or cannot be read.
std::optional<CpioEntry> module_entry(const fs::path& dir, const std::string& module, std::size_t place,
                                      const std::string& package) {
  std::error_code ec;
  for (const char* suffix : {"", ".xz", ".zst", ".gz"}) {
    const fs::path file = dir / (module + suffix);
    if (!fs::exists(file, ec)) continue;
    std::string why;
    auto image = guest_detail::read_module(file, why);
    if (!image) return missing(why, package);
    const std::string order = (place < 10 ? "0" : "") + std::to_string(place);
    return CpioEntry{"lib/modules/" + order + "-" + fs::path(module).filename().string(), CpioEntry::Kind::file, 0644,
                     std::move(*image)};
  }
  return missing(module + " is in neither " + dir.string() + " nor its modules.builtin", package);
}

// The guest's modules from /lib/modules/VERSION, VERSION being the kernel file's suffix.
std::optional<std::vector<CpioEntry>> kernel_modules(const fs::path& kernel, bool from_env) {
  const std::string name = kernel.filename().string();
  const std::string version = name.starts_with("vmlinuz-") ? name.substr(8) : name;
  const std::string package = "linux-image-" + version;
  const fs::path dir = fs::path("/lib/modules") / version;
  std::error_code ec;
  // A kernel of one's own (HOSTAGENT_TEST_KERNEL) may have everything built in and no modules; its
  // guest then says power_button=no when it lacks the button.
  if (!fs::is_directory(dir, ec)) {
    if (from_env) return std::vector<CpioEntry>{};
    return missing(dir.string() + " does not exist: the modules of " + kernel.string() + " are missing", package);
  }
  std::vector<CpioEntry> modules;
  for (std::size_t place = 0; place < kModules.size(); ++place) {
    const std::string module = kModules[place];
    if (built_in(dir, module)) continue;
    auto entry = module_entry(dir, module, place, package);
    if (!entry) return std::nullopt;
    modules.push_back(std::move(*entry));
  }
  return modules;
}

std::optional<Kernel> find_kernel() {
  const char* env = std::getenv("HOSTAGENT_TEST_KERNEL");
  const bool from_env = env != nullptr && *env != '\0';
  const auto image = from_env ? std::optional<fs::path>(env) : verify::newest_boot_kernel("/boot");
  std::error_code ec;
  if (!image) return missing("no kernel in /boot (vmlinuz-*)", "linux-image-amd64");
  if (!fs::is_regular_file(*image, ec)) {
    return missing("HOSTAGENT_TEST_KERNEL=" + image->string() + " is not a file", "linux-image-amd64");
  }
  auto modules = kernel_modules(*image, from_env);
  if (!modules) return std::nullopt;
  return Kernel{*image, std::move(*modules)};
}

// Adds `path` (absolute) to the archive as a file with `data`, after the directories above it.
void add_file(std::vector<CpioEntry>& entries, const fs::path& path, std::string data, uint32_t mode) {
  const fs::path relative = path.relative_path();
  fs::path dir;
  for (auto part = relative.begin(); std::next(part) != relative.end(); ++part) {
    dir /= *part;
    const bool listed =
        std::any_of(entries.begin(), entries.end(), [&](const CpioEntry& e) { return e.path == dir.string(); });
    if (!listed) entries.push_back({dir.string(), CpioEntry::Kind::directory, 0755, {}});
  }
  entries.push_back({relative.string(), CpioEntry::Kind::file, mode, std::move(data)});
}

// qemu-ga and every shared object it loads, at the paths the loader gives (ld.so --list): the
// initramfs has no C library of its own. nullopt after missing() when it is not installed.
std::optional<std::vector<CpioEntry>> guest_agent_entries() {
  std::error_code ec;
  if (!fs::is_regular_file(kGuestAgent, ec)) {
    return missing(std::string(kGuestAgent) + " does not exist", "qemu-guest-agent");
  }
  const auto listed = run_command({kDynamicLoader, "--list", kGuestAgent});
  if (listed.exit_code != 0) return missing("ld.so --list " + std::string(kGuestAgent) + ": " + listed.output, "libc6");
  std::vector<CpioEntry> entries;
  std::vector<std::string> files = {kGuestAgent};
  std::istringstream lines(listed.output);
  for (std::string line; std::getline(lines, line);) {
    // "\tlibglib-2.0.so.0 => /lib/x86_64-linux-gnu/libglib-2.0.so.0 (0x...)", "\t/lib64/ld-linux-x86-64.so.2 (0x...)"
    const auto slash = line.find('/');
    const auto end = line.rfind(" (");
    if (slash == std::string::npos || end == std::string::npos || end < slash) continue;  // linux-vdso.so.1
    files.push_back(line.substr(slash, end - slash));
  }
  for (const auto& file : files) {
    auto data = read_file(file);  // through symlinks: the archive holds each under the name asked for
    if (!data) return missing("cannot read " + file, "qemu-guest-agent");
    add_file(entries, file, std::move(*data), 0755);
  }
  return entries;
}

std::vector<CpioEntry> initramfs_entries(const std::string& busybox, const std::vector<CpioEntry>& modules,
                                         const std::vector<CpioEntry>& agent) {
  using Kind = CpioEntry::Kind;
  std::vector<CpioEntry> entries = {
      {"bin", Kind::directory, 0755, {}},
      {"bin/busybox", Kind::file, 0755, busybox},
      // The kernel opens /dev/console for init's stdin, stdout and stderr before init runs, from
      // the initramfs: without this node init's messages and errors would go nowhere.
      {"dev", Kind::directory, 0755, {}},
      {"dev/console", Kind::char_device, 0600, {}, 5, 1},
      {"proc", Kind::directory, 0755, {}},
      {"sys", Kind::directory, 0755, {}},
      {"lib", Kind::directory, 0755, {}},
      {"lib/modules", Kind::directory, 0755, {}},
      {"run", Kind::directory, 0755, {}},
      {"init", Kind::file, 0755, guest_detail::init_script()},
  };
  entries.insert(entries.end(), modules.begin(), modules.end());
  for (const auto& entry : agent) {
    if (entry.kind == Kind::directory && entry.path == "lib") continue;  // listed above
    entries.push_back(entry);
  }
  // What qemu-ga's guest-shutdown runs (qga/commands-posix.c: /sbin/shutdown -h -P +0 ...).
  add_file(entries, "/sbin/shutdown", guest_detail::shutdown_script(), 0755);
  return entries;
}

// A YAML double-quoted scalar: the paths come from $TMPDIR and the environment.
std::string yaml_quoted(const std::string& text) {
  std::string out = "\"";
  for (const char c : text) {
    if (c == '"' || c == '\\') out += '\\';
    out += c;
  }
  return out + "\"";
}

std::optional<uint64_t> number(const std::string& text) {
  uint64_t value = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc() || end != text.data() + text.size() || text.empty()) return std::nullopt;
  return value;
}

}  // namespace

namespace guest_detail {

std::string init_script() {
  // Every command is spelled "busybox APPLET": the archive holds the binary and no applet links.
  return R"sh(#!/bin/busybox sh
# /init of hostagent's test guest (tests/support/test_guest.cpp): PID 1, started by the kernel from
# the initramfs. It must never exit: the kernel panics when PID 1 does.
bb=/bin/busybox
$bb mount -t proc proc /proc
$bb mount -t sysfs sysfs /sys
# devtmpfs: the kernel makes the device nodes itself (/dev/input/eventN among them); no mdev needed.
$bb mount -t devtmpfs devtmpfs /dev

# The modules the kernel does not have built in, in kModules' order (test_guest.cpp). insmod returns
# once the module's init and the asynchronous probes it started are done (do_init_module waits for
# them), so after ahci.ko the SATA ports are scanned, and after sr_mod.ko a CD-ROM has its sr0.
for module in /lib/modules/*.ko; do
  [ -e "$module" ] && $bb insmod "$module"
done

# A guest booted with hostagent_test_guest.deaf on its command line ignores every request to shut
# down: no agent, no power button (a drain powers it off at its deadline).
deaf=no
case " $($bb cat /proc/cmdline) " in *" hostagent_test_guest.deaf "*) deaf=yes ;; esac

# The QEMU guest agent on the domain's org.qemu.guest_agent.0 port: the daemon's "up" is its first
# answer, and its guest-shutdown runs /sbin/shutdown. The port appears once virtio_console has
# talked to QEMU, a moment after its insmod.
agent=no
for attempt in 1 2 3 4 5 6 7 8 9 10; do
  [ $deaf = yes ] && break
  for port in /sys/class/virtio-ports/*; do
    [ "$($bb cat "$port/name" 2>/dev/null)" = org.qemu.guest_agent.0 ] || continue
    [ -c "/dev/${port##*/}" ] || continue
    /usr/sbin/qemu-ga -m virtio-serial -p "/dev/${port##*/}" -t /run -f /run/qemu-ga.pid &
    agent=yes
  done
  [ $agent = yes ] && break
  $bb sleep 0.2
done

# The NoCloud seed, when the domain has one: an ISO 9660 CD-ROM whose volume id (32 bytes at
# 0x8028, ECMA-119 8.4.6) is "cidata". Each of its files is shown line by line, so a test can see
# what cloud-init in a real guest would read. Its device node may follow the probe by a moment.
for attempt in 1 2 3 4 5 6 7 8 9 10; do
  [ -b /dev/sr0 ] && break
  $bb sleep 0.2
done
if [ -b /dev/sr0 ]; then
  label=$($bb dd if=/dev/sr0 bs=1 skip=32808 count=32 2>/dev/null | $bb tr -d ' ')
  $bb mkdir -p /seed
  if [ "$label" = cidata ] && $bb mount -t iso9660 -o ro /dev/sr0 /seed; then
    files=
    for file in /seed/*; do
      name=${file##*/}
      files="${files:+$files,}$name"
      while IFS= read -r line || [ -n "$line" ]; do
        echo "hostagent-test-guest: seed $name: $line" >/dev/console
      done <"$file"
    done
    echo "hostagent-test-guest: seed label=$label files=$files" >/dev/console
  else
    echo "hostagent-test-guest: seed unreadable: sr0 label=$label" >/dev/console
  fi
else
  echo "hostagent-test-guest: seed none" >/dev/console
fi

# A graceful shutdown (virDomainShutdown) is an ACPI power button press: the button driver reports
# it as KEY_POWER on the "Power Button" input device. Reading one struct input_event (24 bytes on
# x86-64) from its evdev node is the press; poweroff -f then powers off through ACPI at once, and
# QEMU exits. This is armed before the "up" line, so a shutdown sent after it is not missed.
power_button=no
for input in /sys/class/input/input*; do
  [ $deaf = yes ] && break
  [ "$($bb cat "$input/name" 2>/dev/null)" = "Power Button" ] || continue
  for event in "$input"/event*; do
    node=/dev/input/${event##*/}
    [ -c "$node" ] || continue
    power_button=yes
    (
      if $bb dd if="$node" of=/dev/null bs=24 count=1 2>/dev/null; then
        echo "hostagent-test-guest: power button pressed, powering off" >/dev/console
        $bb poweroff -f
      fi
    ) &
  done
done

# The domain's virtio disk (the overlay of its boot image) gets 1 MiB written before "up", so that
# its write counters (virConnectGetAllDomainStats' block.N.wr.bytes) have something to show.
if [ -b /dev/vda ] && $bb dd if=/dev/zero of=/dev/vda bs=64k count=16 conv=fsync 2>/dev/null; then
  echo "hostagent-test-guest: wrote 1 MiB to vda" >/dev/console
fi

# What the guest sees, for the tests to compare with its template: online CPUs (/proc/cpuinfo lists
# those), NUMA nodes with their CPUs, and the memory the kernel manages.
cpus=$($bb grep -c '^processor' /proc/cpuinfo)
nodes=0
node_cpus=
for node in /sys/devices/system/node/node[0-9]*; do
  [ -d "$node" ] || continue
  nodes=$((nodes + 1))
  node_cpus="${node_cpus:+$node_cpus/}$($bb cat "$node/cpulist")"
done
mem_kib=$($bb awk '/^MemTotal:/ { print $2 }' /proc/meminfo)
echo "hostagent-test-guest: up cpus=$cpus nodes=$nodes node_cpus=$node_cpus mem_kib=$mem_kib power_button=$power_button agent=$agent" >/dev/console

# A shell on the serial console, for the console tests (the daemon's WebSocket console): what is
# typed there runs here. It reads ttyS0, where the kernel's console is; one that exits is started
# again.
while true; do
  $bb sh </dev/ttyS0 >/dev/ttyS0 2>&1
  $bb sleep 1
done
)sh";
}

std::string shutdown_script() {
  return R"sh(#!/bin/busybox sh
# /sbin/shutdown of hostagent's test guest: what the QEMU guest agent runs for guest-shutdown. It
# says so on the console, so a test tells an agent's shutdown from the power button's.
echo "hostagent-test-guest: guest agent shutdown ($*), powering off" >/dev/console
/bin/busybox poweroff -f
)sh";
}

std::optional<std::string> read_module(const fs::path& file, std::string& why) {
  auto data = read_file(file);
  if (!data) {
    why = "cannot read " + file.string();
    return std::nullopt;
  }
  if (file.extension() == ".ko") return data;
  if (file.extension() != ".xz") {
    why = file.string() + " is compressed in a format the test support cannot decompress (only .ko and .ko.xz)";
    return std::nullopt;
  }
  auto unpacked = verify::decompress_xz(*data, file.string());
  if (unpacked.ok()) return std::move(*unpacked);
  why = unpacked.error().message;
  return std::nullopt;
}

}  // namespace guest_detail

std::string panic_note(const std::string& console) {
  const auto panic = verify::kernel_panic(console);
  return panic ? " (the guest's kernel panicked: " + *panic + ")" : "";
}

std::optional<TestGuest> build_test_guest(const fs::path& dir) {
  const auto busybox = static_busybox();
  if (!busybox) return std::nullopt;
  const auto kernel = find_kernel();
  if (!kernel) return std::nullopt;
  TestGuest guest{dir / "vmlinuz", dir / "initramfs.cpio", verify::tcg_kernel_cmdline(kCmdline)};
  // A copy, not the host's /boot file: libvirt's DAC driver relabels the kernel and initrd for
  // QEMU's user while the VM runs, which must not touch /boot.
  std::error_code ec;
  fs::copy_file(kernel->image, guest.kernel, fs::copy_options::overwrite_existing, ec);
  REQUIRE_MESSAGE(!ec,
                  "cannot copy " << kernel->image.string() << " to " << guest.kernel.string() << ": " << ec.message());
  const auto agent = guest_agent_entries();
  if (!agent) return std::nullopt;
  write_file(guest.initrd, verify::newc_archive(initramfs_entries(*busybox, kernel->modules, *agent)));
  // QEMU runs as libvirt-qemu and opens both files itself; a TempDir is 0700 root.
  for (const auto& mode : {std::pair{dir, fs::perms(0755)}, std::pair{guest.kernel, fs::perms(0644)},
                           std::pair{guest.initrd, fs::perms(0644)}}) {
    fs::permissions(mode.first, mode.second, ec);
    REQUIRE_MESSAGE(!ec, "cannot chmod " << mode.first.string() << ": " << ec.message());
  }
  return guest;
}

fs::path write_test_guest_image(const fs::path& dir) {
  auto path = dir / "base.raw";
  std::ofstream(path, std::ios::binary).close();
  fs::resize_file(path, 64ULL << 20);
  return path;
}

fs::path write_test_guest_template(const fs::path& dir, const std::string& name, const TestGuest& guest,
                                   const fs::path& image) {
  // 2M pages and BIOS, as the shipped cx-2x1: what CI machines without 1G pages or OVMF can run.
  const std::string yaml = "name: " + name +
                           "\n"
                           "description: hostagent's bootable test guest (tests/support/test_guest.hpp)\n"
                           "vcpus: 2\n"
                           "memory: 1GiB\n"
                           "hugepage_size: 2M\n"
                           "guest_numa: {cells: 1}\n"
                           "machine: q35\n"
                           "firmware: bios\n"
                           "boot:\n" +
                           (image.empty() ? std::string() : "  image: " + yaml_quoted(image.string()) + "\n") +
                           "  kernel: " + yaml_quoted(guest.kernel.string()) +
                           "\n  initrd: " + yaml_quoted(guest.initrd.string()) +
                           "\n  cmdline: " + yaml_quoted(guest.cmdline) +
                           // Up is its guest agent's first answer (the template's default).
                           "\nmetadata: {purpose: ci}\n";
  fs::path file = dir / (name + ".yaml");
  write_file(file, yaml);
  return file;
}

std::optional<TestGuestReport> find_test_guest_report(const std::string& console) {
  const auto at = console.find(kTestGuestUp);
  if (at == std::string::npos) return std::nullopt;
  const auto end = console.find('\n', at);
  if (end == std::string::npos) return std::nullopt;  // the guest is still writing it
  std::istringstream words(console.substr(at + std::strlen(kTestGuestUp), end - at - std::strlen(kTestGuestUp)));
  std::map<std::string, std::string> fields;
  for (std::string word; words >> word;) {
    const auto equals = word.find('=');
    if (equals != std::string::npos) fields[word.substr(0, equals)] = word.substr(equals + 1);
  }
  const auto cpus = number(fields["cpus"]);
  const auto nodes = number(fields["nodes"]);
  const auto mem_kib = number(fields["mem_kib"]);
  const std::string& button = fields["power_button"];
  if (!cpus || !nodes || !mem_kib || (button != "yes" && button != "no")) return std::nullopt;
  TestGuestReport report{static_cast<int>(*cpus), static_cast<int>(*nodes), {}, *mem_kib, button == "yes"};
  std::istringstream lists(fields["node_cpus"]);
  for (std::string list; std::getline(lists, list, '/');) report.node_cpus.push_back(list);
  return report;
}

std::optional<TestGuestSeed> find_test_guest_seed(const std::string& console) {
  const std::string prefix = kTestGuestSeed;
  TestGuestSeed seed;
  std::istringstream lines(console);
  for (std::string line; std::getline(lines, line);) {
    const auto at = line.find(prefix);
    if (at == std::string::npos) continue;
    const std::string rest = line.substr(at + prefix.size());
    if (rest.starts_with("none") || rest.starts_with("unreadable")) return std::nullopt;
    if (rest.starts_with("label=")) {
      seed.label = rest.substr(6, rest.find(' ') - 6);
      return seed;
    }
    const auto colon = rest.find(": ");
    if (colon == std::string::npos) return std::nullopt;
    auto& text = seed.files[rest.substr(0, colon)];
    text += (text.empty() ? "" : "\n") + rest.substr(colon + 2);
  }
  return std::nullopt;
}

}  // namespace hostagent::testing
