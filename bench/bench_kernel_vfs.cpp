// VF creation, VF configuration and vfio binding of 16 VFs on a real kernel: boots the real-kernel
// harness's emulated GPU host (tests/kernel/emulated_host.hpp, Debian's kernel under QEMU TCG) with
// 16 VFs per NVMe PF and kernel_vfs_guest as its guest program, which times the device code against
// the bare kernel writes, round by round, inside the guest (see kernel_vfs_guest.cpp). This side
// builds the initramfs, boots it, prints what the guest measured, and runs the same calibration
// loop as the guest so the TCG slowdown can be read off. `bench_kernel_vfs [ROUNDS]` (default 11);
// about 3-5 minutes on 2 cores. Without the harness's packages it says which and exits 0.
//
// The harness library asserts with doctest (tests/support/test_guest.cpp), so this program carries
// doctest's implementation itself, with its own main (the tests' main lives in the same library).
#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "doctest_asserts.hpp"
#include "emulated_host.hpp"
#include "harness/guest_results.hpp"
#include "harness/host_prerequisites.hpp"
#include "harness/initramfs.hpp"
#include "harness/netdevsim_module.hpp"
#include "harness/qemu_command.hpp"
#include "kernel_vfs_bench.hpp"
#include "test_support.hpp"

namespace {

namespace fs = std::filesystem;
namespace kernel = hostagent::testing::kernel;
namespace kvf = hostagent::bench::kernel_vfs;
using hostagent::Result;
using hostagent::Status;

constexpr int kVfs = 16;
constexpr const char* kGuestProgram = "/hostagent/kernel_vfs_guest";
// As tests/kernel/kernel_boot.cpp loads them: the same emulated host, netdev and rxe0 included.
const std::vector<std::string> kGuestModules = {"vfio-pci", "vfio_iommu_type1", "nvme",         "netdevsim",
                                                "rdma_rxe", "lpc_ich",          "crc32-pclmul", "crc32_generic"};

[[noreturn]] void fail(const std::string& what) {
  std::fprintf(stderr, "bench_kernel_vfs: %s\n", what.c_str());
  std::exit(1);
}

std::string read_or_empty(const fs::path& file) {
  std::ifstream in(file, std::ios::binary);
  std::ostringstream out;
  out << in.rdbuf();
  return out.str();
}

Result<std::string> build_initramfs(const kernel::HostPrerequisites& host, const fs::path& netdevsim,
                                    const fs::path& run_dir, int rounds) {
  kernel::InitramfsTree tree;
  for (const char* dir : {"proc", "sys", "dev", "tmp", "run", "sbin", "usr/bin", "usr/sbin"}) tree.add_directory(dir);
  tree.add_char_device("dev/console", 5, 1);
  HA_TRY_STATUS(tree.add_host_file(host.busybox, 0755));
  for (const auto& elf : {host.rdma, host.ip, host.rxe_provider})
    HA_TRY_STATUS(kernel::add_elf_with_libraries(tree, elf));
  HA_TRY_STATUS(tree.add_host_file(host.rxe_driver, 0644));
  const fs::path guest = HOSTAGENT_KERNEL_VFS_GUEST;
  HA_TRY_STATUS(kernel::add_elf_with_libraries(tree, guest));
  auto program = read_or_empty(guest);
  if (program.empty()) return hostagent::Error{hostagent::ErrorCode::io_error, "cannot read " + guest.string()};
  tree.add_file(fs::path(kGuestProgram).relative_path().string(), std::move(program), 0755);
  tree.add_file(fs::path(kvf::kRoundsFile).relative_path().string(), std::to_string(rounds) + "\n", 0644);
  HA_TRY_STATUS(kernel::add_kernel_modules(
      tree, kernel::ModuleSet{host.modules_dir, host.kernel_version, kGuestModules, {netdevsim}, run_dir / "modules"}));
  // One limit per benchmark case; the whole boot has its own (below).
  tree.add_file("init", kernel::init_script(kernel::InitOptions{kGuestModules, kGuestProgram, 1500, "", "", ""}), 0755);
  return tree.archive();
}

// The guest's output of one case without doctest's own lines.
std::string without_doctest_lines(const std::string& output) {
  std::istringstream lines(output);
  std::string kept;
  for (std::string line; std::getline(lines, line);) {
    if (line.starts_with("[doctest]") || line.starts_with("=====")) continue;
    kept += line + "\n";
  }
  return kept;
}

// "kvf-calibration cpu_ms=X syscall_ms=Y" from the guest's calibration case.
std::optional<kvf::Calibration> guest_calibration(const kernel::GuestRun& run) {
  const auto* result = kernel::find_result(run, "calibration");
  if (result == nullptr) return std::nullopt;
  const auto at = result->output.find(kvf::kCalibrationPrefix);
  if (at == std::string::npos) return std::nullopt;
  kvf::Calibration c;
  if (std::sscanf(result->output.c_str() + at, "kvf-calibration cpu_ms=%lf syscall_ms=%lf", &c.cpu_ms, &c.syscall_ms) !=
      2) {
    return std::nullopt;
  }
  return c;
}

int report(const kernel::GuestRun& run, const kvf::Calibration& here) {
  int failed = 0;
  for (const auto& test : run.tests) {
    if (test.name == "calibration") continue;
    const bool ok = test.exit_code == std::optional<int>(0);
    if (!ok) ++failed;
    std::printf("\n%s%s\n", test.name.c_str(), ok ? "" : "  [FAILED in the guest]");
    std::printf("%s", without_doctest_lines(test.output).c_str());
  }
  if (const auto guest = guest_calibration(run)) {
    std::printf(
        "\nTCG: the same loops in the guest and on this machine: integer loop %.1f ms vs %.1f ms (x%.1f), "
        "getppid x100000 %.1f ms vs %.1f ms (x%.1f)\n",
        guest->cpu_ms, here.cpu_ms, guest->cpu_ms / here.cpu_ms, guest->syscall_ms, here.syscall_ms,
        guest->syscall_ms / here.syscall_ms);
  } else {
    std::printf("\nTCG: the guest's calibration did not report\n");
    ++failed;
  }
  if (!run.done || (run.listed && static_cast<int>(run.tests.size()) != *run.listed)) {
    std::printf("the guest did not finish: %zu of %d cases ran\n", run.tests.size(), run.listed.value_or(-1));
    ++failed;
  }
  return failed;
}

}  // namespace

int main(int argc, char** argv) {
  doctest::Context context;
  hostagent::bench::route_doctest_asserts<fail>(context);
  const int rounds = argc > 1 ? std::atoi(argv[1]) : kvf::kDefaultRounds;
  if (rounds < 1) fail("ROUNDS must be a positive number");

  const fs::path run_dir = HOSTAGENT_KERNEL_VFS_RUN_DIR;
  std::error_code ec;
  fs::create_directories(run_dir, ec);
  const auto found = kernel::find_host_prerequisites();
  if (const auto* missing = std::get_if<kernel::MissingPrerequisite>(&found)) {
    std::printf(
        "bench_kernel_vfs: SKIPPED: the emulated GPU host cannot be built: %s (install the Debian package %s)\n",
        missing->what.c_str(), missing->package.c_str());
    return 0;
  }
  const auto& host = std::get<kernel::HostPrerequisites>(found);
  const auto netdevsim = kernel::netdevsim_module(host, kernel::netdevsim_cache_dir(host, HOSTAGENT_NETDEVSIM_CACHE));
  if (!netdevsim.ok()) fail("netdevsim.ko: " + netdevsim.error().message);
  const auto initramfs = build_initramfs(host, *netdevsim, run_dir, rounds);
  if (!initramfs.ok()) fail("initramfs: " + initramfs.error().message);
  const fs::path initrd = run_dir / "initramfs.cpio";
  std::ofstream(initrd, std::ios::binary | std::ios::trunc) << *initramfs;
  for (const char* file : {kernel::kConsoleLog, kernel::kResultsLog}) fs::remove(run_dir / file, ec);

  kernel::QemuInputs inputs{host.qemu, host.kernel, initrd, run_dir / kernel::kConsoleLog,
                            run_dir / kernel::kResultsLog};
  inputs.nvme_max_vfs = kVfs;
  const char* limit = std::getenv("HOSTAGENT_KERNEL_BOOT_TIMEOUT");
  std::vector<std::string> command = {"timeout", "--kill-after=10", limit != nullptr ? limit : "1800"};
  const auto qemu = kernel::qemu_argv(inputs);
  command.insert(command.end(), qemu.begin(), qemu.end());
  std::printf("bench_kernel_vfs: %d rounds per case, %d VFs, kernel %s under QEMU TCG; run directory %s\n", rounds,
              kVfs, host.kernel_version.c_str(), run_dir.string().c_str());
  std::fflush(stdout);
  const auto start = std::chrono::steady_clock::now();
  const auto result = hostagent::testing::run_command(command);
  const double seconds = kvf::ms_since(start) / 1000;
  const kernel::GuestRun run = kernel::parse_guest_run(read_or_empty(run_dir / kernel::kResultsLog));
  const kvf::Calibration here = kvf::calibrate();
  int failed = report(run, here);
  std::printf("QEMU ran %.0f s (exit %d)\n", seconds, result.exit_code);
  if (result.exit_code != 0) {
    std::printf("the guest's console (%s), last lines:\n%s\n", (run_dir / kernel::kConsoleLog).string().c_str(),
                kernel::tail_lines(read_or_empty(run_dir / kernel::kConsoleLog), 30).c_str());
    ++failed;
  }
  return failed == 0 ? 0 : 1;
}
