// Real-kernel harness: what this machine must have to boot the emulated GPU host, found or named by
// the Debian package that provides it (scripts/install-deps.sh installs them all).
#pragma once

#include <filesystem>
#include <string>
#include <variant>

namespace hostagent::testing::kernel {

struct HostPrerequisites {
  std::filesystem::path qemu;            // qemu-system-x86_64 (qemu-system-x86)
  std::string kernel_version;            // "6.1.0-57-amd64"
  std::filesystem::path kernel;          // /boot/vmlinuz-VERSION (linux-image-amd64)
  std::filesystem::path modules_dir;     // /lib/modules/VERSION
  std::filesystem::path headers;         // /usr/src/linux-headers-VERSION (linux-headers-amd64)
  std::filesystem::path source_tarball;  // /usr/src/linux-source-X.Y.tar.xz (linux-source-X.Y)
  std::string source_top;                // "linux-source-X.Y": the tarball's top directory
  std::filesystem::path busybox;         // a static /bin/busybox (busybox-static)
  std::filesystem::path rdma;            // /usr/bin/rdma (iproute2)
  std::filesystem::path ip;              // /usr/sbin/ip, /bin/ip (iproute2)
  std::filesystem::path rxe_provider;    // libibverbs' rxe provider (ibverbs-providers)
  std::filesystem::path rxe_driver;      // /etc/libibverbs.d/rxe.driver (ibverbs-providers)
};

struct MissingPrerequisite {
  std::string what;     // "/usr/src/linux-source-6.1.tar.xz does not exist"
  std::string package;  // "linux-source-6.1"
};

// Which of the kernels in /boot with their modules and headers: the newest (what a host boots), or
// the oldest (the host-life boots' first, before an upgrade: Debian 12's 6.1 beside 6.12).
enum class KernelPick { newest, oldest };

// That kernel in /boot, with its modules, headers and source installed; the first thing missing
// otherwise.
std::variant<HostPrerequisites, MissingPrerequisite> find_host_prerequisites(KernelPick pick = KernelPick::newest);

// "6.1.0-57-amd64" -> "6.1": the linux-source package's version.
std::string kernel_series(const std::string& version);

}  // namespace hostagent::testing::kernel
