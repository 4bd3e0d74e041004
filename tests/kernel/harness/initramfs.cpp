// Real-kernel harness: assembling the emulated GPU host's initramfs (see initramfs.hpp).
#include "initramfs.hpp"

#include <algorithm>
#include <fstream>
#include <set>
#include <sstream>

#include "test_support.hpp"

namespace hostagent::testing::kernel {
namespace {

namespace fs = std::filesystem;
using guest_detail::CpioEntry;

// The x86-64 dynamic loader (the System V x86-64 ABI's PT_INTERP). Run as a program with --list it
// prints what `ldd` prints, without ldd's shell script.
constexpr const char* kLoader = "/lib64/ld-linux-x86-64.so.2";

std::string archive_path(const fs::path& path) {
  return path.relative_path().string();
}

Result<std::string> read_binary(const fs::path& file) {
  std::ifstream in(file, std::ios::binary);
  if (!in) return errno_error(errno, "open", file.string());
  std::ostringstream out;
  out << in.rdbuf();
  if (in.bad()) return Error{ErrorCode::io_error, "read " + file.string() + " failed"};
  return out.str();
}

Status write_binary(const fs::path& file, const std::string& data) {
  std::error_code ec;
  fs::create_directories(file.parent_path(), ec);
  std::ofstream out(file, std::ios::binary | std::ios::trunc);
  out << data;
  out.flush();
  if (!out) return Error{ErrorCode::io_error, "write " + file.string() + " failed"};
  return ok_status();
}

// "kernel/drivers/vfio/pci/vfio-pci.ko.xz" -> "vfio_pci": the name modprobe and lsmod use.
std::string module_name(const std::string& path) {
  std::string name = fs::path(path).filename().string();
  name = name.substr(0, name.find(".ko"));
  std::replace(name.begin(), name.end(), '-', '_');
  return name;
}

// modules.dep: "PATH: DEPENDENCY..." per line, paths relative to the modules directory.
std::map<std::string, std::pair<std::string, std::vector<std::string>>> parse_modules_dep(const std::string& text) {
  std::map<std::string, std::pair<std::string, std::vector<std::string>>> by_name;
  std::istringstream lines(text);
  for (std::string line; std::getline(lines, line);) {
    const auto colon = line.find(':');
    if (colon == std::string::npos) continue;
    const std::string path = line.substr(0, colon);
    std::istringstream words(line.substr(colon + 1));
    std::vector<std::string> dependencies;
    for (std::string word; words >> word;) dependencies.push_back(word);
    by_name[module_name(path)] = {path, std::move(dependencies)};
  }
  return by_name;
}

// A module file as the guest loads it: uncompressed (busybox's modprobe reads only plain .ko).
std::string uncompressed_name(const std::string& path) {
  return path.substr(0, path.find(".ko")) + ".ko";
}

// The modules an out-of-tree module needs: its .modinfo section's "depends=a,b" (what modinfo -F
// depends prints), found in the image as the NUL-terminated string modpost wrote.
std::vector<std::string> modinfo_depends(const std::string& image) {
  static const std::string kKey = std::string(1, '\0') + "depends=";
  std::vector<std::string> depends;
  const auto at = image.find(kKey);
  if (at == std::string::npos) return depends;
  const auto start = at + kKey.size();
  std::istringstream list(image.substr(start, image.find('\0', start) - start));
  for (std::string name; std::getline(list, name, ',');) {
    if (!name.empty()) depends.push_back(name);
  }
  return depends;
}

Status stage_modules(const ModuleSet& modules, const fs::path& staged) {
  std::vector<std::string> from_kernel;  // names, with what the extra modules depend on
  std::set<std::string> extra_names;
  for (const auto& module : modules.extra) {
    const auto image = read_binary(module);
    if (!image) return image.error();
    HA_TRY_STATUS(write_binary(staged / "extra" / module.filename(), *image));
    extra_names.insert(module_name(module.filename().string()));
    for (const auto& name : modinfo_depends(*image)) from_kernel.push_back(name);
  }
  for (const auto& name : modules.names) {
    if (!extra_names.contains(module_name(name))) from_kernel.push_back(name);
  }
  const auto dep = read_binary(modules.modules_dir / "modules.dep");
  if (!dep) return dep.error();
  // 6.12 builds in what 6.1 has as modules (virtio_pci): such a module is loaded already.
  std::string builtin;
  if (fs::exists(modules.modules_dir / "modules.builtin")) {
    auto read = read_binary(modules.modules_dir / "modules.builtin");
    if (!read) return read.error();
    builtin = std::move(*read);
  }
  const auto closure = module_closure(*dep, builtin, from_kernel);
  if (!closure) return closure.error();
  for (const auto& path : *closure) {
    std::string why;
    const auto image = guest_detail::read_module(modules.modules_dir / path, why);
    if (!image) return Error{ErrorCode::io_error, why};
    HA_TRY_STATUS(write_binary(staged / uncompressed_name(path), *image));
  }
  // Without modules.builtin modprobe takes a built-in module for a missing one and fails.
  for (const char* index : {"modules.builtin", "modules.builtin.modinfo", "modules.order"}) {
    if (!fs::exists(modules.modules_dir / index)) continue;
    const auto data = read_binary(modules.modules_dir / index);
    if (!data) return data.error();
    HA_TRY_STATUS(write_binary(staged / index, *data));
  }
  return ok_status();
}

std::string depmod_program() {
  if (const auto found = find_program("depmod")) return found->string();
  for (const char* candidate : {"/usr/sbin/depmod", "/sbin/depmod"}) {
    if (fs::exists(candidate)) return candidate;
  }
  return "depmod";
}

std::string shell_words(const std::vector<std::string>& words) {
  std::string out;
  for (const auto& word : words) out += (out.empty() ? "" : " ") + word;
  return out;
}

}  // namespace

void InitramfsTree::add_parents(const std::string& path) {
  for (fs::path parent = fs::path(path).parent_path(); !parent.empty(); parent = parent.parent_path()) {
    entries_.try_emplace(parent.string(), CpioEntry{parent.string(), CpioEntry::Kind::directory, 0755, {}});
  }
}

void InitramfsTree::add_directory(const std::string& path) {
  add_parents(path);
  entries_.try_emplace(path, CpioEntry{path, CpioEntry::Kind::directory, 0755, {}});
}

void InitramfsTree::add_file(const std::string& path, std::string data, uint32_t permissions) {
  add_parents(path);
  entries_.insert_or_assign(path, CpioEntry{path, CpioEntry::Kind::file, permissions, std::move(data)});
}

void InitramfsTree::add_char_device(const std::string& path, uint32_t major, uint32_t minor) {
  add_parents(path);
  entries_.insert_or_assign(path, CpioEntry{path, CpioEntry::Kind::char_device, 0600, {}, major, minor});
}

Status InitramfsTree::add_host_file(const fs::path& host_file, uint32_t permissions) {
  auto data = read_binary(host_file);
  if (!data) return data.error();
  add_file(archive_path(host_file), std::move(*data), permissions);
  return ok_status();
}

std::string InitramfsTree::archive() const {
  std::vector<CpioEntry> entries;
  entries.reserve(entries_.size());
  for (const auto& [path, entry] : entries_) entries.push_back(entry);
  return verify::newc_archive(entries);
}

Result<std::vector<fs::path>> parse_loader_list(const std::string& output, const fs::path& file) {
  std::vector<fs::path> libraries;
  std::vector<std::string> missing;
  std::istringstream lines(output);
  for (std::string line; std::getline(lines, line);) {
    std::istringstream words(line);
    std::string first, arrow, target;
    words >> first >> arrow >> target;
    if (arrow == "=>") {
      if (target == "not") {
        missing.push_back(first);
      } else if (target.starts_with("/")) {
        libraries.emplace_back(target);
      }
    } else if (first.starts_with("/")) {
      libraries.emplace_back(first);  // the loader: "/lib64/ld-linux-x86-64.so.2 (0x...)"
    }
  }
  if (!missing.empty()) {
    return Error{ErrorCode::not_found, file.string() + " needs " + shell_words(missing) +
                                           ", which the dynamic loader cannot find on this machine"};
  }
  return libraries;
}

Status add_elf_with_libraries(InitramfsTree& tree, const fs::path& file) {
  const auto listed = run_command({kLoader, "--list", file.string()});
  if (listed.exit_code != 0) {
    return Error{ErrorCode::io_error, std::string(kLoader) + " --list " + file.string() + " failed: " + listed.output};
  }
  const auto libraries = parse_loader_list(listed.output, file);
  if (!libraries) return libraries.error();
  HA_TRY_STATUS(tree.add_host_file(file, 0755));
  for (const auto& library : *libraries) HA_TRY_STATUS(tree.add_host_file(library, 0755));
  return ok_status();
}

Result<std::vector<std::string>> module_closure(const std::string& modules_dep, const std::string& modules_builtin,
                                                const std::vector<std::string>& names) {
  const auto by_name = parse_modules_dep(modules_dep);
  std::set<std::string> built_in;
  std::istringstream lines(modules_builtin);
  for (std::string line; std::getline(lines, line);) {
    if (!line.empty()) built_in.insert(module_name(line));
  }
  std::set<std::string> closure;
  std::vector<std::string> pending;
  for (const auto& name : names) {
    if (built_in.contains(module_name(name))) continue;  // modprobe finds it in modules.builtin
    const auto found = by_name.find(module_name(name));
    if (found == by_name.end()) {
      return Error{ErrorCode::not_found,
                   "module " + name + " is neither in modules.dep nor built in: not in this kernel"};
    }
    pending.push_back(found->second.first);
  }
  while (!pending.empty()) {
    const std::string path = pending.back();
    pending.pop_back();
    if (!closure.insert(path).second) continue;
    const auto found = by_name.find(module_name(path));
    if (found != by_name.end()) pending.insert(pending.end(), found->second.second.begin(), found->second.second.end());
  }
  return std::vector<std::string>(closure.begin(), closure.end());
}

Status add_kernel_modules(InitramfsTree& tree, const ModuleSet& modules) {
  std::error_code ec;
  fs::remove_all(modules.scratch, ec);
  const fs::path staged = modules.scratch / "lib/modules" / modules.version;
  HA_TRY_STATUS(stage_modules(modules, staged));
  const auto depmod = run_command({depmod_program(), "-b", modules.scratch.string(), modules.version});
  if (depmod.exit_code != 0) {
    return Error{ErrorCode::io_error, "depmod -b " + modules.scratch.string() + " failed: " + depmod.output};
  }
  for (fs::recursive_directory_iterator it(modules.scratch, ec), end; !ec && it != end; it.increment(ec)) {
    if (!it->is_regular_file()) continue;
    auto data = read_binary(it->path());
    if (!data) return data.error();
    tree.add_file(fs::relative(it->path(), modules.scratch).string(), std::move(*data), 0644);
  }
  if (ec) return Error{ErrorCode::io_error, "cannot list " + modules.scratch.string() + ": " + ec.message()};
  return ok_status();
}

std::string init_script(const InitOptions& options) {
  // Busybox applets are installed as links at the start; Debian's busybox-static prefers its own
  // applets to PATH (so "ip" is busybox's), which is why iproute2's tools are called by full path.
  return R"sh(#!/bin/busybox sh
# /init of the real-kernel harness's emulated GPU host (tests/kernel/harness/initramfs.cpp). PID 1:
# it must never exit; it powers off when the tests are done, which ends QEMU (-no-reboot).
/bin/busybox --install -s
export PATH=/usr/sbin:/usr/bin:/sbin:/bin
mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev
say() { echo "hostagent-kernel-init: $*"; }
say "up after $(cut -d' ' -f1 /proc/uptime)s"

for module in )sh" +
         shell_words(options.modules) +
         R"sh(; do
  modprobe "$module" || say "modprobe $module failed"
done

# The emulated NIC: netdevsim device 1 with one port ("ID PORTS", drivers/net/netdevsim/bus.c
# new_device_store), its netdev up with an IPv4 address (which gives rxe a RoCE v2 GID at index 1,
# after the link-local one), and rxe0 on it.
netdev=
if echo "1 1" > /sys/bus/netdevsim/new_device; then
  for attempt in 1 2 3 4 5 6 7 8 9 10; do
    netdev=$(ls /sys/bus/netdevsim/devices/netdevsim1/net 2>/dev/null | head -n 1)
    [ -n "$netdev" ] && break
    sleep 0.5
  done
fi
if [ -n "$netdev" ]; then
  ip link set "$netdev" up || say "cannot bring $netdev up"
  ip addr add 192.0.2.1/24 dev "$netdev" || say "cannot add an address to $netdev"
  /usr/bin/rdma link add rxe0 type rxe netdev "$netdev" || say "rdma link add rxe0 on $netdev failed"
else
  say "netdevsim device 1 has no netdev"
fi
say "set up after $(cut -d' ' -f1 /proc/uptime)s: netdev=$netdev"

)sh" + options.setup +
         R"sh(

# The results channel: ttyS1, raw (no CR added to each LF), opened once.
stty -F /dev/ttyS1 raw -echo
exec 3>/dev/ttyS1
report() { printf 'hostagent-kernel-guest: %s\n' "$*" >&3; }
guest=)sh" +
         options.guest_program +
         "\nrun=" + (options.chroot.empty() ? std::string() : "\"chroot " + options.chroot + "\"") + "\nlisted='" +
         (options.test_filter.empty() ? std::string("*") : options.test_filter) + "'" +
         R"sh(
$run $guest --list-test-cases --test-case="$listed" >/tmp/list 2>&1 || say "$guest --list-test-cases failed: $(cat /tmp/list)"
grep -v -e '^\[doctest\]' -e '^=====' /tmp/list >/tmp/names
report "tests $(grep -c . /tmp/names)"
while IFS= read -r name; do
  [ -n "$name" ] || continue
  # doctest's --test-case takes a comma-separated list of patterns; a comma in a name is escaped.
  filter=$(printf '%s' "$name" | sed 's/,/\\,/g')
  report "begin $name"
  timeout )sh" +
         std::to_string(options.test_timeout_s) +
         R"sh( $run $guest --test-case="$filter" --case-sensitive=true --no-colors=true </dev/null >&3 2>&3
  rc=$?
  # A case cut off by its timeout (124) or killed (137, 143) may be stuck in the kernel: the kernel's
  # log says where (hung tasks, a reset that did not finish), before the boot's own limit ends all.
  if [ "$rc" -eq 124 ] || [ "$rc" -eq 137 ] || [ "$rc" -eq 143 ]; then
    echo 1 >/proc/sys/kernel/sysrq 2>/dev/null && echo w >/proc/sysrq-trigger 2>/dev/null
    printf 'the kernel log after the case was cut off (exit %s), its last 120 lines:\n' "$rc" >&3
    dmesg | tail -n 120 >&3
  fi
  report "end $rc $name"
done </tmp/names
report done
say "tests done after $(cut -d' ' -f1 /proc/uptime)s; the kernel log follows"
dmesg
sync
poweroff -f
)sh";
}

}  // namespace hostagent::testing::kernel
