// Real-kernel harness, the fixtures: builds the emulated GPU host (netdevsim.ko, the initramfs), boots
// Debian's kernel on it under QEMU, and leaves the console, the guest's results and a status file in
// the run directory, from which each guest test case becomes a CTest result of its own
// (kernel_result.cpp). Two boots, one test case each: the device tests (guest/), and the end-to-end
// run with this machine's root, libvirtd and hostagentd (e2e/). A missing package is a skip that names it, or a failure
// where CI demands the real thing (HOSTAGENT_REQUIRE_KERNEL=1, or HOSTAGENT_REQUIRE_LIBVIRTD=1 which CI sets).
#include <doctest/doctest.h>

#include <signal.h>
#include <sys/wait.h>

#include <array>
#include <chrono>
#include <cstdlib>
#include <fstream>
#include <optional>
#include <sstream>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "emulated_host.hpp"
#include "harness/guest_results.hpp"
#include "harness/host_prerequisites.hpp"
#include "harness/host_root.hpp"
#include "harness/initramfs.hpp"
#include "harness/netdevsim_module.hpp"
#include "harness/qemu_command.hpp"
#include "hostagent/verify/guest_image.hpp"
#include "test_support.hpp"

namespace hostagent::testing::kernel {
namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

// The modules the guest loads: VFIO, NVMe (the SR-IOV PFs), netdevsim, soft-RoCE, and lpc_ich (a
// host driver on a member of the ICH9 group, for the not-viable group). rdma_rxe's CRC32
// (crypto-crc32, which the kernel requests through /sbin/modprobe) comes from whichever of the
// two the CPU can run.
const std::vector<std::string> kGuestModules = {"vfio-pci", "vfio_iommu_type1", "nvme",         "netdevsim",
                                                "rdma_rxe", "lpc_ich",          "crc32-pclmul", "crc32_generic"};
constexpr const char* kGuestProgram = "/hostagent/kernel_guest_tests";

bool env_is(const char* name, const char* value) {
  const char* set = std::getenv(name);
  return set != nullptr && std::string(set) == value;
}

int env_int(const char* name, int fallback) {
  const char* set = std::getenv(name);
  return set != nullptr && *set != '\0' ? std::atoi(set) : fallback;
}

double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

void write_text(const fs::path& file, const std::string& text) {
  std::ofstream out(file, std::ios::trunc);
  out << text;
  out.flush();
  REQUIRE_MESSAGE(out.good(), "cannot write " << file.string());
}

std::string read_or_empty(const fs::path& file) {
  std::ifstream in(file, std::ios::binary);
  std::ostringstream out;
  out << in.rdbuf();
  return out.str();
}

// argv as one shell line, each word in single quotes.
std::string shell_command(const std::vector<std::string>& argv) {
  std::string line;
  for (const auto& word : argv) {
    std::string quoted = "'";
    for (const char c : word) quoted += c == '\'' ? std::string("'\\''") : std::string(1, c);
    line += (line.empty() ? "" : " ") + quoted + "'";
  }
  return line + "\n";
}

// QEMU's output (stderr) goes to this file of the run directory.
constexpr const char* kQemuLog = "qemu.log";
// A guest whose console is still empty this long after QEMU started is hung before its first line
// (/init says "up" 3 to 4 s into the guest's uptime, on two loaded CI cores too): now and then, under
// load, TCG sits silent for the whole limit (the end-to-end boot once; the host-life boot's first,
// on 6.1, once). Such a boot is stopped and started again, once. The limit is ten times the usual
// wait, so that a hang costs 45 s, not the 90 it did; HOSTAGENT_KERNEL_SILENT_LIMIT (s) changes it.
std::chrono::seconds silent_limit() {
  const char* set = std::getenv("HOSTAGENT_KERNEL_SILENT_LIMIT");
  return std::chrono::seconds(set != nullptr && *set != '\0' ? std::atoi(set) : 45);
}

struct QemuRun {
  int exit_code = -1;  // 124: the limit passed (timeout(1))
  int attempts = 0;
  std::string retried;  // why the first attempt was given up, "" when it was not
};

// QEMU 10.0's TCG (bookworm-backports' 10.0.2, with Debian's backport of upstream 2865bf1c "system/
// physmem: fix use-after-free with dispatch") reads a CPU TLB entry's section index in the live
// memory map, while the flush a map change queues on each vCPU (tcg_commit, async_run_on_cpu) has
// not run yet: an MMIO access on a stale entry then aborts in iotlb_to_section ("section_index <
// d->map.sections_nb"). The emulated host changes its map whenever VFs come and go or a BAR moves.
// Upstream master stores the section itself in the TLB entry and has no iotlb_to_section; no 10.0.x
// release fixes it. Such an abort is the emulator's, not the guest's: the boot is run again, once,
// from the disks it began with, and the test says so.
bool qemu_own_abort(const fs::path& run_dir, int exit_code) {
  return exit_code == 128 + SIGABRT &&
         read_or_empty(run_dir / kQemuLog).find("iotlb_to_section: Assertion") != std::string::npos;
}

// The disk images a boot writes, copied before it so that a boot run again begins where it did.
class DiskImages {
 public:
  explicit DiskImages(std::vector<fs::path> images) : images_(std::move(images)) {
    for (const auto& image : images_) copy(image, saved(image));
  }
  void restore() const {
    for (const auto& image : images_) copy(saved(image), image);
  }

 private:
  static fs::path saved(const fs::path& image) { return fs::path(image.string() + ".before-boot"); }
  static void copy(const fs::path& from, const fs::path& to) {
    std::error_code ec;
    fs::copy_file(from, to, fs::copy_options::overwrite_existing, ec);
    REQUIRE_MESSAGE(!ec, "cannot copy " << from.string() << " to " << to.string() << ": " << ec.message());
  }
  std::vector<fs::path> images_;
};

// Starts argv (timeout ... qemu ...) with its output in the run directory; true once it has exited,
// false when the console stayed empty for silent_limit() (then it is killed).
bool run_until_exit_or_silent(const std::vector<std::string>& argv, const fs::path& run_dir, int& exit_code) {
  const pid_t pid = spawn_logged(argv, run_dir / kQemuLog);
  const auto started = Clock::now();
  for (;;) {
    int status = 0;
    if (::waitpid(pid, &status, WNOHANG) == pid) {
      exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
      return true;
    }
    std::error_code ec;
    if (Clock::now() - started > silent_limit() && fs::file_size(run_dir / kConsoleLog, ec) == 0) {
      // timeout(1) leads a process group of its own with QEMU in it (coreutils timeout.c: setpgid).
      ::kill(-pid, SIGKILL);
      ::waitpid(pid, &status, 0);
      return false;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
}

QemuRun run_qemu(const std::vector<std::string>& argv, const fs::path& run_dir, const DiskImages& disks) {
  QemuRun run;
  std::error_code ec;
  while (run.attempts < 2) {
    ++run.attempts;
    for (const char* file : {kConsoleLog, kResultsLog, kQemuLog}) fs::remove(run_dir / file, ec);
    if (!run_until_exit_or_silent(argv, run_dir, run.exit_code)) {
      run.exit_code = 124;
      run.retried = "the first boot hung before its first line for " + std::to_string(silent_limit().count()) + " s";
      continue;  // it wrote nothing: its disks are as they were
    }
    if (run.attempts > 1 || !qemu_own_abort(run_dir, run.exit_code)) return run;
    fs::copy_file(run_dir / kConsoleLog, run_dir / "console-aborted.log", fs::copy_options::overwrite_existing, ec);
    run.retried = "QEMU aborted on its own TCG race (iotlb_to_section; console-aborted.log)";
    disks.restore();
  }
  return run;
}

// One boot of the emulated host: which guest program it runs, and from where.
struct BootPlan {
  fs::path run_dir;
  fs::path guest;  // the guest program on this machine
  // false: the program and its libraries are copied into the initramfs. true: the guest mounts this
  // machine's root (host_root.hpp) and runs the program there, chrooted, at the same path.
  bool end_to_end = false;
  // The host-life boots: the test cases this pattern matches, and a disk that outlives the boot.
  std::string test_filter = {};
  fs::path persistent_disk = {};
  fs::path edu_romfile = {};  // the hygiene boot's: an expansion ROM on every edu
  fs::path tenant_disk = {};  // the hygiene and host-life boots': a tenant's whole NVMe controller's namespace
  // The host-life boots: nvme loaded through the package's boot hold (host_root.hpp), with the
  // held-at-boot list the boot before left ("" none), as the host's rebuilt initramfs carries it.
  bool boot_hold = false;
  std::string held_at_boot = {};
};

Result<std::string> build_initramfs(const HostPrerequisites& host, const fs::path& netdevsim, const BootPlan& plan) {
  InitramfsTree tree;
  for (const char* dir : {"proc", "sys", "dev", "tmp", "run", "sbin", "usr/bin", "usr/sbin"}) tree.add_directory(dir);
  // The kernel opens /dev/console for init's stdin, stdout and stderr before devtmpfs is mounted.
  tree.add_char_device("dev/console", 5, 1);
  HA_TRY_STATUS(tree.add_host_file(host.busybox, 0755));
  for (const auto& elf : {host.rdma, host.ip, host.rxe_provider}) HA_TRY_STATUS(add_elf_with_libraries(tree, elf));
  HA_TRY_STATUS(tree.add_host_file(host.rxe_driver, 0644));
  InitOptions init;
  init.modules = kGuestModules;
  init.guest_program = plan.guest.string();
  init.test_filter = plan.test_filter;
  if (plan.end_to_end) {
    const bool persistent = !plan.persistent_disk.empty();
    const auto more = host_root_modules(persistent);
    init.modules.insert(init.modules.end(), more.begin(), more.end());
    std::optional<BootHold> hold;
    if (plan.boot_hold) {
      hold = BootHold{HOSTAGENT_SOURCE_DIR};
      std::erase(init.modules, std::string("nvme"));  // loaded by the setup, through the hold
      if (!plan.held_at_boot.empty()) {
        tree.add_file(fs::path(kHeldAtBoot).relative_path().string(), std::string(plan.held_at_boot), 0644);
      }
    }
    init.setup = host_root_setup(persistent, hold);
    init.chroot = kNewRoot;
  } else {
    // The guest program at a path of its own, with the libraries it needs at theirs.
    HA_TRY_STATUS(add_elf_with_libraries(tree, plan.guest));
    auto program = read_or_empty(plan.guest);
    if (program.empty()) return Error{ErrorCode::io_error, "cannot read " + plan.guest.string()};
    tree.add_file(fs::path(kGuestProgram).relative_path().string(), std::move(program), 0755);
    init.guest_program = kGuestProgram;
  }
  HA_TRY_STATUS(add_kernel_modules(
      tree, ModuleSet{host.modules_dir, host.kernel_version, init.modules, {netdevsim}, plan.run_dir / "modules"}));
  tree.add_file("init", init_script(init), 0755);
  return tree.archive();
}

// What the end-to-end boot runs from this machine's root besides the kernel's prerequisites: the
// guest starts libvirtd, which starts QEMU with SeaBIOS.
std::optional<MissingPrerequisite> missing_for_end_to_end() {
  if (!fs::exists("/usr/sbin/libvirtd"))
    return MissingPrerequisite{"/usr/sbin/libvirtd does not exist", "libvirt-daemon"};
  if (!fs::exists("/usr/share/seabios/bios-256k.bin")) {
    return MissingPrerequisite{"/usr/share/seabios/bios-256k.bin does not exist", "seabios"};
  }
  return std::nullopt;
}

// The prerequisites, or nullopt after a skip (or a failed check where CI requires the run).
std::optional<HostPrerequisites> prerequisites_or_skip(const BootPlan& plan, KernelPick pick = KernelPick::newest) {
  const fs::path& run_dir = plan.run_dir;
  auto found = find_host_prerequisites(pick);
  if (plan.end_to_end && std::holds_alternative<HostPrerequisites>(found)) {
    if (auto missing = missing_for_end_to_end()) found = *missing;
  }
  if (auto* host = std::get_if<HostPrerequisites>(&found)) return *host;
  const auto& missing = std::get<MissingPrerequisite>(found);
  const std::string why = "the emulated GPU host cannot be built: " + missing.what + " (install the Debian package " +
                          missing.package + ")";
  if (env_is("HOSTAGENT_REQUIRE_KERNEL", "1") || env_is("HOSTAGENT_REQUIRE_LIBVIRTD", "1")) {
    FAIL_CHECK(why);
  } else {
    write_text(run_dir / kStatusFile, "skipped: " + why + "\n");
    skip(why);
  }
  return std::nullopt;
}

// One QEMU run of a plan, built and booted; its console and results left in the run directory.
struct BootRun {
  QemuRun qemu;
  std::size_t initramfs_bytes = 0;
  double netdevsim_s = 0;
  double initramfs_s = 0;
  double boot_s = 0;
  int limit_s = 0;
};

BootRun run_boot(const BootPlan& plan, const HostPrerequisites& host) {
  const fs::path& run_dir = plan.run_dir;
  BootRun out;
  const auto start = Clock::now();
  const auto netdevsim = netdevsim_module(host, netdevsim_cache_dir(host, run_dir.parent_path()));
  REQUIRE_MESSAGE(netdevsim.ok(), "netdevsim.ko: " << netdevsim.error().message);
  out.netdevsim_s = seconds_since(start);

  const auto initramfs = build_initramfs(host, *netdevsim, plan);
  REQUIRE_MESSAGE(initramfs.ok(), "initramfs: " << initramfs.error().message);
  const fs::path initrd = run_dir / "initramfs.cpio";
  write_text(initrd, *initramfs);
  out.initramfs_bytes = initramfs->size();
  out.initramfs_s = seconds_since(start) - out.netdevsim_s;

  // TCG on two CI cores: QEMU's whole run, boot and guest tests, takes 30 to 60 s; the limit is for
  // a guest that hangs, below CTest's own timeout so that this message is what reports it.
  out.limit_s = env_int("HOSTAGENT_KERNEL_BOOT_TIMEOUT", 480);
  std::vector<std::string> argv = {"timeout", "--kill-after=10", std::to_string(out.limit_s)};
  QemuInputs inputs{host.qemu, host.kernel, initrd, run_dir / kConsoleLog, run_dir / kResultsLog};
  inputs.share_host_root = plan.end_to_end;
  inputs.persistent_disk = plan.persistent_disk;
  inputs.edu_romfile = plan.edu_romfile;
  inputs.tenant_disk = plan.tenant_disk;
  const auto qemu = qemu_argv(inputs);
  argv.insert(argv.end(), qemu.begin(), qemu.end());
  write_text(run_dir / "qemu-command", shell_command(qemu));  // to boot it again by hand
  std::vector<fs::path> images;
  for (const auto* image : {&plan.persistent_disk, &plan.tenant_disk})
    if (!image->empty()) images.push_back(*image);
  const DiskImages disks(std::move(images));
  const auto boot_start = Clock::now();
  out.qemu = run_qemu(argv, run_dir, disks);
  out.boot_s = seconds_since(boot_start);
  return out;
}

// What every boot must show: the guest ran each test case it listed and powered off, unpanicked.
void check_boot(const BootPlan& plan, const HostPrerequisites& host, const BootRun& boot) {
  const fs::path& run_dir = plan.run_dir;
  const std::string console = read_or_empty(run_dir / kConsoleLog);
  const GuestRun run = parse_guest_run(read_or_empty(run_dir / kResultsLog));
  MESSAGE("kernel " << host.kernel_version << ": netdevsim.ko " << boot.netdevsim_s << " s, initramfs "
                    << boot.initramfs_bytes / (std::size_t{1} << 20) << " MiB in " << boot.initramfs_s << " s, QEMU "
                    << boot.boot_s << " s, " << run.tests.size() << " guest test cases; run directory "
                    << run_dir.string());
  if (boot.qemu.attempts > 1) MESSAGE(boot.qemu.retried << "; booted again");
  INFO("QEMU: " << read_or_empty(run_dir / kQemuLog) << "\nthe guest's console (" << (run_dir / kConsoleLog).string()
                << "), last lines:\n"
                << tail_lines(console, 40));
  const auto panic = verify::kernel_panic(console);
  CHECK_MESSAGE(!panic.has_value(), "the guest's kernel panicked: " << panic.value_or(""));
  CHECK_MESSAGE(boot.qemu.exit_code != 124, "the guest did not power off within " << boot.limit_s
                                                                                  << " s, or twice printed nothing for "
                                                                                  << silent_limit().count() << " s");
  CHECK(boot.qemu.exit_code == 0);
  CHECK_MESSAGE(run.done, "the guest did not finish its test cases");
  REQUIRE(run.listed.has_value());
  CHECK(*run.listed > 0);
  CHECK(static_cast<int>(run.tests.size()) == *run.listed);
}

// The run directory made ready: created, the last run's files gone.
void clear_run_dir(const fs::path& run_dir) {
  std::error_code ec;
  fs::create_directories(run_dir, ec);
  for (const char* file : {kStatusFile, kConsoleLog, kResultsLog}) fs::remove(run_dir / file, ec);
}

void boot(const BootPlan& plan) {
  clear_run_dir(plan.run_dir);
  const auto host = prerequisites_or_skip(plan);
  if (!host) return;
  const auto run = run_boot(plan, *host);
  write_text(plan.run_dir / kStatusFile, "ran\n");
  check_boot(plan, *host, run);
}

// The host-life disk: a fresh ext4 file system with the label the guest mounts it by, made here
// (mke2fs writes an image file without privileges), so each run begins with a host that never ran.
void make_persistent_disk(const fs::path& image) {
  std::error_code ec;
  fs::remove(image, ec);
  { std::ofstream(image, std::ios::binary).close(); }
  fs::resize_file(image, std::uintmax_t{128} << 20U, ec);
  REQUIRE_MESSAGE(!ec, "cannot size " << image.string() << ": " << ec.message());
  const auto made = run_command({"/usr/sbin/mkfs.ext4", "-q", "-F", "-L", kPersistentLabel, image.string()});
  REQUIRE_MESSAGE(made.exit_code == 0, "mkfs.ext4 " << image.string() << ": " << made.output);
}

// What the host's initramfs would carry after the first boot: hostagentd's held-at-boot list, read
// from the persistent disk's image (debugfs, which reads ext4 without mounting it); "" when none.
std::string held_at_boot_of(const fs::path& image) {
  const auto read = run_command({"/usr/sbin/debugfs", "-R", "cat /hostagent/state/held-at-boot", image.string()});
  if (read.exit_code != 0 || read.output.find("File not found") != std::string::npos) return "";
  // debugfs prints its version line on stderr first.
  const auto start = read.output.find("# Written by hostagentd");
  return start == std::string::npos ? "" : read.output.substr(start);
}

// A tenant's controller, zeros. The hygiene boot's VM writes its pattern on it; the host-life
// boot's first boot writes what a tenant leaves (a GPT, LVM, md: e2e/tenant_storage.hpp), with the
// emulated host's own tools, which need its block devices.
void make_tenant_disk(const fs::path& image) {
  std::error_code ec;
  fs::remove(image, ec);
  { std::ofstream(image, std::ios::binary).close(); }
  fs::resize_file(image, emulated_host::kTenantNvmeBytes, ec);
  REQUIRE_MESSAGE(!ec, "cannot size " << image.string() << ": " << ec.message());
}

// The kernels of the two boots: the oldest installed, then the newest, as a host upgraded from
// Debian 12's 6.1 to the current stack's 6.12 reboots into it. Where one kernel is installed both
// boots run it, said in the log; a failure where the run must show the upgrade
// (HOSTAGENT_REQUIRE_KERNEL_UPGRADE=1: scripts/test.sh on the current stack, whose
// scripts/install-deps.sh installs Debian 12's kernel beside its own).
std::optional<std::array<HostPrerequisites, 2>> kernels_before_and_after(const BootPlan& plan) {
  const auto before = prerequisites_or_skip(plan, KernelPick::oldest);
  if (!before) return std::nullopt;
  const auto after = prerequisites_or_skip(plan, KernelPick::newest);
  if (!after) return std::nullopt;
  if (before->kernel_version == after->kernel_version) {
    const std::string why = "one kernel with its modules, headers and source (" + after->kernel_version +
                            "): both boots run it, no kernel upgrade across the reboot";
    if (env_is("HOSTAGENT_REQUIRE_KERNEL_UPGRADE", "1")) {
      FAIL_CHECK(why << " (scripts/install-deps.sh installs Debian 12's kernel beside the current stack's)");
    } else {
      MESSAGE(why);
    }
  }
  return std::array<HostPrerequisites, 2>{*before, *after};
}

// The emulated host's life across a reboot: the cases before it in one boot, those after it in a
// second boot of the same host (the same disk) on the newest kernel, each boot checked as any other.
// Each boot's console and results are kept (console-N.log, results-N.log), and results.log holds
// both, so each case is a CTest result of its own.
void boot_twice(BootPlan plan, const std::array<std::string, 2>& filters) {
  clear_run_dir(plan.run_dir);
  const auto hosts = kernels_before_and_after(plan);
  if (!hosts) return;
  plan.persistent_disk = plan.run_dir / "persistent.img";
  make_persistent_disk(plan.persistent_disk);
  plan.tenant_disk = plan.run_dir / "tenant-nvme.img";
  make_tenant_disk(plan.tenant_disk);
  plan.boot_hold = true;
  std::string results;
  for (std::size_t i = 0; i < filters.size(); ++i) {
    CAPTURE(filters[i]);
    plan.test_filter = filters[i];
    plan.held_at_boot = held_at_boot_of(plan.persistent_disk);
    if (i > 0) CHECK_MESSAGE(!plan.held_at_boot.empty(), "the first boot's hostagentd left no held-at-boot list");
    const auto& host = (*hosts)[i];
    const auto run = run_boot(plan, host);
    check_boot(plan, host, run);
    const std::string n = std::to_string(i + 1);
    results += read_or_empty(plan.run_dir / kResultsLog);
    std::error_code ec;
    fs::copy_file(plan.run_dir / kConsoleLog, plan.run_dir / ("console-" + n + ".log"),
                  fs::copy_options::overwrite_existing, ec);
    fs::copy_file(plan.run_dir / kResultsLog, plan.run_dir / ("results-" + n + ".log"),
                  fs::copy_options::overwrite_existing, ec);
  }
  write_text(plan.run_dir / kResultsLog, results);
  write_text(plan.run_dir / kStatusFile, "ran\n");
}

TEST_CASE("boot: the emulated GPU host runs the device test cases on Debian's kernel") {
  boot(BootPlan{HOSTAGENT_KERNEL_RUN_DIR, HOSTAGENT_KERNEL_GUEST, false});
}

// The emulated host with this machine's root, libvirtd and QEMU: hostagentd from the build tree
// drives them (tests/kernel/e2e/).
TEST_CASE("boot end to end: hostagentd runs VMs with libvirtd in the emulated GPU host") {
  boot(BootPlan{HOSTAGENT_KERNEL_E2E_RUN_DIR, HOSTAGENT_KERNEL_E2E_GUEST, true});
}

// The end-to-end host whose GPU stand-ins carry an expansion ROM (emulated_host::edu_option_rom):
// devices cleaned between tenants (tests/kernel/e2e/test_hygiene.cpp).
TEST_CASE("boot hygiene: hostagentd cleans the emulated GPU host's devices between tenants") {
  BootPlan plan{HOSTAGENT_KERNEL_HYGIENE_RUN_DIR, HOSTAGENT_KERNEL_HYGIENE_GUEST, true};
  plan.edu_romfile = plan.run_dir / "edu-rom.bin";
  std::error_code ec;
  fs::create_directories(plan.run_dir, ec);
  write_text(plan.edu_romfile, emulated_host::edu_option_rom());
  // A fresh namespace each run: zeros, until the guest writes a tenant's pattern on it.
  plan.tenant_disk = plan.run_dir / "tenant-nvme.img";
  make_tenant_disk(plan.tenant_disk);
  boot(plan);
}

// The same, booted twice on a disk that survives: hostagentd's state and libvirt's configuration
// outlive the reboot between the two (tests/kernel/e2e/test_host_life.cpp).
TEST_CASE("boot host life: the emulated GPU host reboots under hostagentd and its VMs come back") {
  boot_twice(BootPlan{HOSTAGENT_KERNEL_HOST_LIFE_RUN_DIR, HOSTAGENT_KERNEL_HOST_LIFE_GUEST, true},
             {"*before the reboot*", "*after the reboot*"});
}

}  // namespace
}  // namespace hostagent::testing::kernel
