// Real-kernel harness, the fixture: builds the emulated GPU host (netdevsim.ko, the initramfs), boots
// Debian's kernel on it under QEMU once, and leaves the console, the guest's results and a status
// file in the run directory, from which each guest test case becomes a CTest result of its own
// (kernel_result.cpp). A missing package is a skip that names it, or a failure where CI demands the
// real thing (HOSTAGENT_REQUIRE_KERNEL=1, or HOSTAGENT_REQUIRE_LIBVIRTD=1 which CI sets).
#include <doctest/doctest.h>

#include <chrono>
#include <cstdlib>
#include <fstream>
#include <sstream>

#include "emulated_host.hpp"
#include "harness/guest_results.hpp"
#include "harness/host_prerequisites.hpp"
#include "harness/initramfs.hpp"
#include "harness/netdevsim_module.hpp"
#include "harness/qemu_command.hpp"
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

Result<std::string> build_initramfs(const HostPrerequisites& host, const fs::path& netdevsim, const fs::path& run_dir) {
  InitramfsTree tree;
  for (const char* dir : {"proc", "sys", "dev", "tmp", "run", "sbin", "usr/bin", "usr/sbin"}) tree.add_directory(dir);
  // The kernel opens /dev/console for init's stdin, stdout and stderr before devtmpfs is mounted.
  tree.add_char_device("dev/console", 5, 1);
  HA_TRY_STATUS(tree.add_host_file(host.busybox, 0755));
  for (const auto& elf : {host.rdma, host.ip, host.rxe_provider}) HA_TRY_STATUS(add_elf_with_libraries(tree, elf));
  HA_TRY_STATUS(tree.add_host_file(host.rxe_driver, 0644));
  // The guest program at a path of its own, with the libraries it needs at theirs.
  const fs::path guest = HOSTAGENT_KERNEL_GUEST;
  HA_TRY_STATUS(add_elf_with_libraries(tree, guest));
  auto program = read_or_empty(guest);
  if (program.empty()) return Error{ErrorCode::io_error, "cannot read " + guest.string()};
  tree.add_file(fs::path(kGuestProgram).relative_path().string(), std::move(program), 0755);
  HA_TRY_STATUS(add_kernel_modules(
      tree, ModuleSet{host.modules_dir, host.kernel_version, kGuestModules, {netdevsim}, run_dir / "modules"}));
  tree.add_file("init", init_script(InitOptions{kGuestModules, kGuestProgram}), 0755);
  return tree.archive();
}

// The prerequisites, or nullopt after a skip (or a failed check where CI requires the run).
std::optional<HostPrerequisites> prerequisites_or_skip(const fs::path& run_dir) {
  auto found = find_host_prerequisites();
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

TEST_CASE("the emulated GPU host boots Debian's kernel and runs the guest's test cases") {
  const fs::path run_dir = HOSTAGENT_KERNEL_RUN_DIR;
  std::error_code ec;
  fs::create_directories(run_dir, ec);
  for (const char* file : {kStatusFile, kConsoleLog, kResultsLog}) fs::remove(run_dir / file, ec);
  const auto host = prerequisites_or_skip(run_dir);
  if (!host) return;

  const auto start = Clock::now();
  const auto netdevsim = netdevsim_module(*host, run_dir.parent_path() / ("netdevsim-" + host->kernel_version));
  REQUIRE_MESSAGE(netdevsim.ok(), "netdevsim.ko: " << netdevsim.error().message);
  const double netdevsim_s = seconds_since(start);

  const auto initramfs = build_initramfs(*host, *netdevsim, run_dir);
  REQUIRE_MESSAGE(initramfs.ok(), "initramfs: " << initramfs.error().message);
  const fs::path initrd = run_dir / "initramfs.cpio";
  write_text(initrd, *initramfs);
  const double initramfs_s = seconds_since(start) - netdevsim_s;

  // TCG on two CI cores: QEMU's whole run, boot and guest tests, takes 30 to 60 s; the limit is for
  // a guest that hangs, below CTest's own timeout so that this message is what reports it.
  const int limit_s = env_int("HOSTAGENT_KERNEL_BOOT_TIMEOUT", 480);
  std::vector<std::string> argv = {"timeout", "--kill-after=10", std::to_string(limit_s)};
  const auto qemu =
      qemu_argv(QemuInputs{host->qemu, host->kernel, initrd, run_dir / kConsoleLog, run_dir / kResultsLog});
  argv.insert(argv.end(), qemu.begin(), qemu.end());
  write_text(run_dir / "qemu-command", shell_command(qemu));  // to boot it again by hand
  const auto boot_start = Clock::now();
  const auto result = run_command(argv);
  const double boot_s = seconds_since(boot_start);
  write_text(run_dir / kStatusFile, "ran\n");

  const std::string console = read_or_empty(run_dir / kConsoleLog);
  const GuestRun run = parse_guest_run(read_or_empty(run_dir / kResultsLog));
  MESSAGE("kernel " << host->kernel_version << ": netdevsim.ko " << netdevsim_s << " s, initramfs "
                    << initramfs->size() / (std::size_t{1} << 20) << " MiB in " << initramfs_s << " s, QEMU " << boot_s
                    << " s, " << run.tests.size() << " guest test cases; run directory " << run_dir.string());
  INFO("QEMU: " << result.output << "\nthe guest's console (" << (run_dir / kConsoleLog).string() << "), last lines:\n"
                << tail_lines(console, 40));
  CHECK_MESSAGE(result.exit_code != 124, "the guest did not power off within " << limit_s << " s");
  CHECK(result.exit_code == 0);
  CHECK_MESSAGE(run.done, "the guest did not finish its test cases");
  REQUIRE(run.listed.has_value());
  CHECK(*run.listed > 0);
  CHECK(static_cast<int>(run.tests.size()) == *run.listed);
}

}  // namespace
}  // namespace hostagent::testing::kernel
