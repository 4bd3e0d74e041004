// What a tenant leaves on a whole NVMe, and what the host's tools show of it (see tenant_storage.hpp).
#include "tenant_storage.hpp"

#include <doctest/doctest.h>

#include <algorithm>
#include <cctype>
#include <fstream>
#include <sstream>

#include "../emulated_host.hpp"
#include "../guest/guest_host.hpp"
#include "e2e_host.hpp"

namespace hostagent::testing::e2e {
namespace {

namespace fs = std::filesystem;

// Every UUID the tenant writes begins with this (the GPT's disk and partition GUIDs, the file
// system's, the md array's), so one mark finds each wherever a tool prints it, in any spelling.
constexpr const char* kUuidPrefix = "7e4a0c1d-44ab-4c5e-9f00-";
constexpr const char* kGptUuid = "7e4a0c1d-44ab-4c5e-9f00-000000000044";
constexpr const char* kFsUuid = "7e4a0c1d-44ab-4c5e-9f00-0000000000e4";
constexpr const char* kMdUuid = "7e4a0c1d:44ab4c5e:9f000000:000000d4";  // mdadm's spelling
// LVM's UUIDs are 32 of [0-9a-zA-Z] in groups of 6-4-4-4-4-4-6 (lib/uuid/uuid.c id_valid).
constexpr const char* kPvUuid = "Tenant-PV44-0000-0000-0000-0000-000044";
// The md array's name, and the name (GPT PARTLABEL) of the partition it is on.
constexpr const char* kMdName = "tenant-md";
// The other partitions' names, and the tenant VG's LV.
constexpr const char* kFsPart = "tenant-fs";
constexpr const char* kPvPart = "tenant-pv";
constexpr const char* kTenantLv = "data";
constexpr const char* kHostLv = "root";

// LVM without udev: libdevmapper makes the /dev/mapper nodes itself and waits for no udev event
// (libdm/libdm-common.c, DM_DISABLE_UDEV), and the device list comes from /dev, not udev's database.
const std::vector<std::string> kLvmEnv = {"DM_DISABLE_UDEV=1", "LVM_SUPPRESS_FD_WARNINGS=1"};

// Lower case without '-' and ':': "7E4A-0C1D" and "7e4a0c1d" are one mark.
std::string folded(const std::string& text) {
  std::string out;
  for (const char c : text) {
    if (c != '-' && c != ':') out += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  }
  return out;
}

const std::vector<std::string>& marks() {
  static const std::vector<std::string> all = {folded(kUuidPrefix), folded(kPvUuid),
                                               folded(kMdName),     folded(kFsPart),
                                               folded(kPvPart),     folded(emulated_host::kTenantFsLabel)};
  return all;
}

std::string file_text(const fs::path& file) {
  std::ifstream in(file);
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

CommandResult run_ok(const std::vector<std::string>& argv, const std::vector<std::string>& env = {}) {
  auto result = run_command(argv, env);
  REQUIRE_MESSAGE(result.exit_code == 0, argv.front() << " " << (argv.size() > 1 ? argv[1] : "") << " exited with "
                                                      << result.exit_code << ": " << result.output);
  return result;
}

std::string trimmed(const std::string& text) {
  const auto first = text.find_first_not_of(" \t\n");
  if (first == std::string::npos) return "";
  return text.substr(first, text.find_last_not_of(" \t\n") - first + 1);
}

// The modules the tools need, from the root's own kmod: loop for the host's VG, dm for its LVs, md
// and raid1 for the tenant's array (Debian builds each as a module).
void load_storage_modules() {
  for (const char* module : {"loop", "dm_mod", "md_mod", "raid1"}) run_ok({"/sbin/modprobe", module});
}

// The whole-namespace block device of the controller nvme binds: /dev/nvmeXn1.
std::string namespace_device(const PciAddress& controller) {
  std::string device;
  const bool found = guest::wait_until(
      [&] {
        std::error_code ec;
        for (const auto& ctrl : fs::directory_iterator(guest::pci_path(controller, "nvme"), ec)) {
          const std::string name = ctrl.path().filename().string() + "n1";
          if (fs::exists("/dev/" + name)) device = "/dev/" + name;
        }
        return !device.empty();
      },
      std::chrono::seconds(30));
  REQUIRE_MESSAGE(found, "no namespace block device for " << controller.to_string() << " on nvme");
  return device;
}

// A GPT of three partitions in 16 MiB (sectors of 512 bytes): the file system, the PV, the md
// member. sfdisk reads its script on stdin only, hence the shell.
void write_gpt(const std::string& disk) {
  const fs::path script = "/tmp/tenant-gpt.sfdisk";
  std::ofstream(script) << "label: gpt\nlabel-id: " << kGptUuid << "\n"
                        << "start=2048, size=4096, name=" << kFsPart << ", uuid=" << kUuidPrefix << "000000000001\n"
                        << "size=16384, name=" << kPvPart << ", uuid=" << kUuidPrefix
                        << "000000000002, type=E6D6D379-F507-44C2-A23C-238F2A3DF928\n"
                        << "size=8192, name=" << kMdName << ", uuid=" << kUuidPrefix
                        << "000000000003, type=A19D880F-05FC-4D3B-A006-743F0F84911E\n";
  run_ok({"/bin/sh", "-c", "/usr/sbin/sfdisk --quiet --wipe always " + disk + " < " + script.string()});
  // sfdisk has the kernel read the new table (BLKRRPART); devtmpfs makes the nodes.
  const bool made = guest::wait_until([&] { return fs::exists(disk + "p3"); }, std::chrono::seconds(10));
  REQUIRE_MESSAGE(made, "no " << disk << "p3 after sfdisk");
}

std::string host_vg_uuid(const HostVg& vg) {
  return trimmed(file_text(vg.uuid_file));
}

// The device-mapper name LVM gives an LV: VG and LV joined by '-', each '-' within them doubled
// (lib/misc/lvm-string.c build_dm_name).
std::string mapper_name(const std::string& vg, const std::string& lv) {
  std::string name;
  for (const std::string& part : {vg, lv}) {
    if (!name.empty()) name += '-';
    for (const char c : part) name += c == '-' ? std::string("--") : std::string(1, c);
  }
  return name;
}

}  // namespace

HostVg host_vg_on(const fs::path& persistent_mount) {
  return HostVg{persistent_mount / "host-vg.img", persistent_mount / "host-vg.uuid"};
}

void make_host_vg(const HostVg& vg) {
  load_storage_modules();
  { std::ofstream(vg.backing, std::ios::binary).close(); }
  fs::resize_file(vg.backing, std::uintmax_t{16} << 20U);
  const std::string loop = trimmed(run_ok({"/usr/sbin/losetup", "--find", "--show", vg.backing.string()}).output);
  run_ok({"/usr/sbin/pvcreate", "--yes", "--devices", loop, loop}, kLvmEnv);
  run_ok({"/usr/sbin/vgcreate", "--devices", loop, "-s", "1M", kHostVgName, loop}, kLvmEnv);
  run_ok({"/usr/sbin/lvcreate", "--devices", loop, "-an", "-Zn", "-L", "4M", "-n", kHostLv, kHostVgName}, kLvmEnv);
  const auto uuid = run_ok({"/usr/sbin/vgs", "--devices", loop, "--noheadings", "-o", "vg_uuid", kHostVgName}, kLvmEnv);
  std::ofstream(vg.uuid_file) << trimmed(uuid.output) << "\n";
}

void attach_host_vg(const HostVg& vg) {
  load_storage_modules();
  if (!trimmed(run_ok({"/usr/sbin/losetup", "--associated", vg.backing.string()}).output).empty()) return;
  run_ok({"/usr/sbin/losetup", "--find", vg.backing.string()});
}

std::vector<std::string> host_vg_problems(const HostVg& vg) {
  const auto listed = run_command(
      {"/usr/sbin/vgs", "--noheadings", "--nosuffix", "--separator", "|", "-o", "vg_name,vg_uuid,lv_count"}, kLvmEnv);
  std::vector<std::string> problems;
  if (listed.exit_code != 0) problems.push_back("vgs exited with " + std::to_string(listed.exit_code));
  std::vector<std::string> named;
  for (const auto& line : lines_of(listed.output)) {
    if (line.find('|') != std::string::npos && trimmed(line).rfind(std::string(kHostVgName) + "|", 0) == 0) {
      named.push_back(trimmed(line));
    }
  }
  const std::string expected = std::string(kHostVgName) + "|" + host_vg_uuid(vg) + "|1";
  if (named != std::vector<std::string>{expected}) {
    std::string seen;
    for (const auto& line : named) seen += " [" + line + "]";
    problems.push_back("vgs lists " + std::to_string(named.size()) + " VGs named " + kHostVgName + ":" + seen +
                       "; the host's is [" + expected + "]");
  }
  return problems;
}

std::string host_vg_activation_problem() {
  const auto on = run_command({"/usr/sbin/vgchange", "-ay", kHostVgName}, kLvmEnv);
  if (on.exit_code != 0) return "vgchange -ay " + std::string(kHostVgName) + ": " + on.output;
  const bool node = fs::exists("/dev/mapper/" + mapper_name(kHostVgName, kHostLv));
  const auto off = run_command({"/usr/sbin/vgchange", "-an", kHostVgName}, kLvmEnv);
  if (!node) return "no /dev/mapper node for the host's LV after vgchange -ay: " + on.output;
  if (off.exit_code != 0) return "vgchange -an " + std::string(kHostVgName) + ": " + off.output;
  return "";
}

void plant_tenant_storage(const PciAddress& controller) {
  load_storage_modules();
  const std::string disk = namespace_device(controller);
  write_gpt(disk);
  run_ok({"/usr/sbin/mkfs.ext4", "-q", "-F", "-L", emulated_host::kTenantFsLabel, "-U", kFsUuid, disk + "p1"});
  // The tenant's VG sees only its own PV (--devices), so LVM lets it take the host VG's name.
  const std::string pv = disk + "p2";
  run_ok({"/usr/sbin/pvcreate", "--yes", "--devices", pv, "--uuid", kPvUuid, "--norestorefile", pv}, kLvmEnv);
  run_ok({"/usr/sbin/vgcreate", "--devices", pv, "-s", "1M", kHostVgName, pv}, kLvmEnv);
  run_ok({"/usr/sbin/lvcreate", "--devices", pv, "-an", "-Zn", "-L", "4M", "-n", kTenantLv, kHostVgName}, kLvmEnv);
  // One-member RAID 1 (--force allows one), with metadata 1.2: the superblock 4 KiB into the member.
  run_ok({"/sbin/mdadm", "--create", std::string("/dev/md/") + kMdName, "--run", "--force", "--level=1",
          "--raid-devices=1", "--metadata=1.2", "--bitmap=none", std::string("--uuid=") + kMdUuid,
          std::string("--name=") + kMdName, disk + "p3"});
  run_ok({"/sbin/mdadm", "--stop", "--scan"});
  ::sync();
}

std::vector<std::string> host_traces_of_tenant_storage(const HostVg& own) {
  std::vector<std::string> traces = host_views_of_tenant();
  const auto look = [&traces](const std::string& tool, const std::vector<std::string>& argv,
                              const std::vector<std::string>& env = {}) {
    for (const auto& line : lines_of(run_command(argv, env).output)) {
      const std::string plain = folded(line);
      if (std::any_of(marks().begin(), marks().end(),
                      [&](const std::string& mark) { return plain.find(mark) != std::string::npos; })) {
        traces.push_back(tool + ": " + line);
      }
    }
  };
  // blkid with no device probes every one in /proc/partitions, its cache left out.
  look("blkid", {"/usr/sbin/blkid", "-c", "/dev/null"});
  // lsblk takes labels and UUIDs from udev's database, which a host's udev fills by probing each
  // device with libblkid (its blkid builtin): blkid's probe above stands for that here, where no
  // udev runs. What lsblk lists from sysfs alone is each block device: the tenant's disks, or a
  // partition of one, are a trace.
  const auto disks = tenant_disks();
  for (const auto& line : lines_of(run_command({"/usr/bin/lsblk", "-P", "-o", "NAME,TYPE,SIZE"}).output)) {
    if (std::any_of(disks.begin(), disks.end(),
                    [&](const std::string& disk) { return line.find("NAME=\"" + disk) != std::string::npos; })) {
      traces.push_back("lsblk: " + line);
    }
  }
  look("pvs", {"/usr/sbin/pvs", "--noheadings", "-o", "pv_name,pv_uuid,vg_name"}, kLvmEnv);
  // A tenant's VG shows by its name (the host's) and a UUID that is not the host VG's: any VG but
  // the host's own is one.
  const std::string own_uuid = host_vg_uuid(own);
  const auto vgs = run_command({"/usr/sbin/vgs", "--noheadings", "--separator", "|", "-o", "vg_name,vg_uuid"}, kLvmEnv);
  for (const auto& line : lines_of(vgs.output)) {
    const auto bar = line.find('|');
    if (bar != std::string::npos && trimmed(line.substr(bar + 1)) != own_uuid) {
      traces.push_back("vgs: " + trimmed(line) + " (not the host's VG)");
    }
  }
  look("mdadm --examine --scan", {"/sbin/mdadm", "--examine", "--scan"});
  for (const auto& line : lines_of(file_text("/proc/mdstat"))) {
    if (line.rfind("md", 0) == 0) traces.push_back("/proc/mdstat: " + line);
  }
  std::string host_lv_uuid_prefix = "LVM-" + own_uuid;
  host_lv_uuid_prefix.erase(std::remove(host_lv_uuid_prefix.begin() + 4, host_lv_uuid_prefix.end(), '-'),
                            host_lv_uuid_prefix.end());
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator("/sys/block", ec)) {
    const std::string name = entry.path().filename().string();
    if (name.rfind("md", 0) == 0) traces.push_back("/sys/block/" + name);
    // An LV's dm UUID is "LVM-" then its VG's and its own UUID without dashes
    // (lib/activate/dev_manager.c build_dm_uuid): the host's LVs are the only dm devices it has,
    // and a tenant's LV has the same name as one of them, but not its VG's UUID.
    if (name.rfind("dm-", 0) == 0) {
      const std::string uuid = trimmed(file_text(entry.path() / "dm" / "uuid"));
      if (uuid.rfind(host_lv_uuid_prefix, 0) != 0) {
        traces.push_back("/sys/block/" + name + ": " + trimmed(file_text(entry.path() / "dm" / "name")) + " " + uuid);
      }
    }
  }
  return traces;
}

}  // namespace hostagent::testing::e2e
