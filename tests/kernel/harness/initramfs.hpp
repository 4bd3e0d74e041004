// Real-kernel harness: the initramfs of the emulated GPU host. Everything the guest runs comes from
// this machine: busybox-static, the guest test program with every shared library it needs (and the
// dynamic loader), rdma-core's rxe provider, iproute2's rdma and ip, and Debian's kernel modules
// with their dependencies plus the out-of-tree netdevsim.ko, indexed by depmod so modprobe works.
// The archive is written with tests/support/test_guest.hpp's newc writer.
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "hostagent/common/result.hpp"
#include "test_guest.hpp"

namespace hostagent::testing::kernel {

// Files by their path inside the archive ("lib/x86_64-linux-gnu/libc.so.6"), every parent directory
// included. A map: paths sort parents first, the order the kernel's unpacker needs (it creates no
// missing directory, init/initramfs.c do_name).
class InitramfsTree {
 public:
  void add_directory(const std::string& path);
  void add_file(const std::string& path, std::string data, uint32_t permissions);
  void add_char_device(const std::string& path, uint32_t major, uint32_t minor);
  // host_file's contents at the same path inside (symlinks followed: the archive holds none).
  Status add_host_file(const std::filesystem::path& host_file, uint32_t permissions);
  bool contains(const std::string& path) const { return entries_.contains(path); }
  std::string archive() const;

 private:
  void add_parents(const std::string& path);
  std::map<std::string, guest_detail::CpioEntry> entries_;
};

// The shared objects an ELF file needs, the dynamic loader included, from the output of
// `ld.so --list FILE`; an error naming each library it did not find.
Result<std::vector<std::filesystem::path>> parse_loader_list(const std::string& output,
                                                             const std::filesystem::path& file);

// Adds an ELF program or shared library and everything it needs (runs the loader's --list).
Status add_elf_with_libraries(InitramfsTree& tree, const std::filesystem::path& file);

// The modules.dep entries ("kernel/drivers/vfio/vfio.ko", relative to the modules directory) of the
// named modules and of everything they depend on, sorted. Names as modprobe takes them: dashes and
// underscores are the same ("vfio-pci" is kernel/drivers/vfio/pci/vfio-pci.ko). A name that
// modules.builtin lists is left out: the kernel has it built in (6.12's virtio_pci).
Result<std::vector<std::string>> module_closure(const std::string& modules_dep, const std::string& modules_builtin,
                                                const std::vector<std::string>& names);

struct ModuleSet {
  std::filesystem::path modules_dir;  // /lib/modules/VERSION
  std::string version;
  std::vector<std::string> names;            // what the guest loads, with their dependencies
  std::vector<std::filesystem::path> extra;  // out-of-tree modules (netdevsim.ko) into extra/, with
                                             // the kernel's modules they depend on (their .modinfo)
  std::filesystem::path scratch;             // a directory for depmod -b, emptied first
};

// Adds lib/modules/VERSION: the closure of names, the extra modules, modules.builtin (so modprobe
// knows what is built in) and the indexes depmod -b writes for that set. A name may be an extra
// module's.
Status add_kernel_modules(InitramfsTree& tree, const ModuleSet& modules);

struct InitOptions {
  std::vector<std::string> modules;  // modprobe'd in this order
  std::string guest_program;         // the path inside the archive, absolute
  int test_timeout_s = 300;          // per test case
  // Shell lines run after the NIC is set up and before the tests (the end-to-end boot mounts this
  // machine's root and starts libvirtd there: host_root.hpp).
  std::string setup;
  // When set, the guest program runs chrooted into this directory, at its path there.
  std::string chroot;
  // When set, only the test cases this doctest pattern matches run (the host-life boots split the
  // guest program's cases between the boot before a reboot and the boot after it).
  std::string test_filter = {};
};

// The guest's /init: mounts, loads the modules, sets up the emulated NIC (netdevsim device, its
// netdev up with an IPv4 address, rxe on top of it), runs the setup lines, then runs each test
// case of the guest program with its output between the markers of guest_results.hpp on ttyS1,
// and powers off.
std::string init_script(const InitOptions& options);

}  // namespace hostagent::testing::kernel
