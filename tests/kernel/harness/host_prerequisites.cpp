// Real-kernel harness: finding what the emulated GPU host is built from (see host_prerequisites.hpp).
#include "host_prerequisites.hpp"

#include <algorithm>
#include <cstring>
#include <optional>
#include <vector>

#include "test_support.hpp"

namespace hostagent::testing::kernel {
namespace {

namespace fs = std::filesystem;

bool path_exists(const fs::path& path) {
  std::error_code ec;
  return fs::exists(path, ec);
}

// The versions of /boot/vmlinuz-VERSION, newest first (strverscmp: 6.1.0-10 after 6.1.0-9).
std::vector<std::string> boot_kernels() {
  std::vector<std::string> versions;
  std::error_code ec;
  for (fs::directory_iterator it("/boot", ec), end; !ec && it != end; it.increment(ec)) {
    const std::string name = it->path().filename().string();
    if (name.starts_with("vmlinuz-")) versions.push_back(name.substr(8));
  }
  std::sort(versions.begin(), versions.end(),
            [](const std::string& a, const std::string& b) { return strverscmp(a.c_str(), b.c_str()) > 0; });
  return versions;
}

std::optional<fs::path> first_existing(const std::vector<fs::path>& candidates) {
  for (const auto& candidate : candidates) {
    if (path_exists(candidate)) return candidate;
  }
  return std::nullopt;
}

// The kernel: the newest (or oldest) in /boot with modules and headers (a kernel without them is an
// upgrade waiting for its reboot, or a foreign one).
std::variant<HostPrerequisites, MissingPrerequisite> find_kernel(KernelPick pick) {
  const auto versions = boot_kernels();
  if (versions.empty()) return MissingPrerequisite{"no kernel in /boot (vmlinuz-*)", "linux-image-amd64"};
  auto tried = versions;  // in the order of the pick
  if (pick == KernelPick::oldest) std::reverse(tried.begin(), tried.end());
  for (const auto& version : tried) {
    HostPrerequisites found;
    found.kernel_version = version;
    found.kernel = "/boot/vmlinuz-" + version;
    found.modules_dir = "/lib/modules/" + version;
    found.headers = "/usr/src/linux-headers-" + version;
    if (path_exists(found.modules_dir / "modules.dep") && path_exists(found.headers / "Makefile")) return found;
  }
  return MissingPrerequisite{
      "no kernel in /boot has both /lib/modules/VERSION and /usr/src/linux-headers-VERSION (newest: " +
          versions.front() + ")",
      "linux-headers-amd64"};
}

// libibverbs loads providers from here by name, librxe-rdmavABI.so (rdma-core's
// VERBS_PROVIDER_DIR), after reading /etc/libibverbs.d/rxe.driver.
constexpr const char* kProviderDir = "/usr/lib/x86_64-linux-gnu/libibverbs";

std::optional<fs::path> rxe_provider() {
  std::error_code ec;
  for (fs::directory_iterator it(kProviderDir, ec), end; !ec && it != end; it.increment(ec)) {
    const std::string name = it->path().filename().string();
    if (name.starts_with("librxe-rdmav") && name.ends_with(".so")) return it->path();
  }
  return std::nullopt;
}

}  // namespace

std::string kernel_series(const std::string& version) {
  const auto first = version.find('.');
  if (first == std::string::npos) return version;
  const auto second = version.find_first_of(".-", first + 1);
  return version.substr(0, second);
}

std::variant<HostPrerequisites, MissingPrerequisite> find_host_prerequisites(KernelPick pick) {
  const auto qemu = find_program("qemu-system-x86_64");
  if (!qemu) return MissingPrerequisite{"qemu-system-x86_64 is not on PATH", "qemu-system-x86"};
  auto kernel = find_kernel(pick);
  if (std::holds_alternative<MissingPrerequisite>(kernel)) return kernel;
  auto found = std::get<HostPrerequisites>(std::move(kernel));
  found.qemu = *qemu;
  found.source_top = "linux-source-" + kernel_series(found.kernel_version);
  found.source_tarball = "/usr/src/" + found.source_top + ".tar.xz";
  if (!path_exists(found.source_tarball)) {
    return MissingPrerequisite{found.source_tarball.string() + " does not exist (netdevsim.ko is built from it)",
                               found.source_top};
  }
  if (!find_program("make")) return MissingPrerequisite{"make is not on PATH", "build-essential"};
  found.busybox = "/bin/busybox";
  if (!path_exists(found.busybox)) return MissingPrerequisite{"/bin/busybox does not exist", "busybox-static"};
  // The loader lists a dynamic executable's libraries and refuses a static one.
  if (run_command({"/lib64/ld-linux-x86-64.so.2", "--list", found.busybox.string()}).exit_code == 0) {
    return MissingPrerequisite{"/bin/busybox is dynamically linked (Debian's busybox, not busybox-static)",
                               "busybox-static"};
  }
  if (!path_exists("/usr/sbin/depmod") && !path_exists("/sbin/depmod") && !find_program("depmod")) {
    return MissingPrerequisite{"depmod is not installed", "kmod"};
  }
  const auto rdma = first_existing({"/usr/bin/rdma", "/bin/rdma", "/usr/sbin/rdma", "/sbin/rdma"});
  const auto ip = first_existing({"/usr/sbin/ip", "/sbin/ip", "/usr/bin/ip", "/bin/ip"});
  if (!rdma || !ip) return MissingPrerequisite{"iproute2's rdma or ip is not installed", "iproute2"};
  found.rdma = *rdma;
  found.ip = *ip;
  const auto provider = rxe_provider();
  found.rxe_driver = "/etc/libibverbs.d/rxe.driver";
  if (!provider || !path_exists(found.rxe_driver)) {
    return MissingPrerequisite{
        std::string(kProviderDir) + "/librxe-rdmav*.so or " + found.rxe_driver.string() + " does not exist",
        "ibverbs-providers"};
  }
  found.rxe_provider = *provider;
  return found;
}

}  // namespace hostagent::testing::kernel
