// vmtemplates/vm_template: a VM shape as infra engineers write it in YAML, after loading and
// validation. Every field here is checked; a template that loads is one placement can act on.
// The YAML schema and its defaults are documented in docs/templates.md.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "hostagent/common/result.hpp"

namespace hostagent::vmtemplates {

struct PciId {
  uint16_t vendor_id = 0;
  uint16_t device_id = 0;
  auto operator<=>(const PciId&) const = default;  // NOLINT(modernize-use-nullptr): clang-tidy 14 misreads <=>
};

struct GpuSpec {
  int count = 0;
  std::string model;       // "A100", "H100", ... as written; "" when selected by ids or any
  std::vector<PciId> ids;  // accepted vendor/device pairs; empty: any NVIDIA GPU
};

enum class MacPolicy { automatic, request };  // YAML: auto | request
enum class NicPlacement { strict, prefer };   // YAML: strict | prefer
enum class NicMode { vf, pf };                // YAML: vf | pf

struct VfSettings {
  MacPolicy mac = MacPolicy::automatic;
  std::optional<int> vlan;       // 1..4094
  std::optional<bool> trust;     // nullopt: the host's (devices.vf.trust)
  std::optional<bool> spoofchk;  // nullopt: the host's (devices.vf.spoofchk)
  std::optional<int> mtu;        // 68..9216; the VFs' PFs must carry it
};

struct NicSpec {
  // vf: SR-IOV VFs. pf: `count` NIC PFs given whole, for HCAs without VFs; each is taken nearest the
  // VM's GPUs (a GPU under its own switch first, PIX, then under a switch further up, PXB).
  NicMode mode = NicMode::vf;
  int vfs_per_gpu = 0;                            // VFs of the NIC under each GPU's switch
  int count = 0;                                  // vf: VFs not tied to a GPU (a front-end network);
                                                  // pf: the whole NICs
  NicPlacement placement = NicPlacement::strict;  // strict: fail without a NIC under the GPU's switch
                                                  // (pf: a NIC sharing no switch with a GPU)
  VfSettings vf;
};

struct GuestNuma {
  bool mirror = true;  // one guest cell per host NUMA node the VM's devices use
  int cells = 0;       // when !mirror: this many cells
};

enum class Firmware { efi, bios };

// Firmware boots the image; with a kernel, QEMU loads kernel and initrd itself (direct kernel boot)
// and boots them first, the image (if any) then being just a disk.
// How the daemon tells the guest's own phases after it resumes (daemon/guest_watch): `kernel` when
// the serial console shows kernel_marker, `up` when the guest agent answers or the console shows
// up_marker, whichever comes first; each watched for at most `seconds` after the resume.
struct BootWatch {
  // start_kernel prints "Linux version ..." first (pr_notice: shown on the serial console with
  // console=ttyS0 and a loglevel above quiet's).
  std::string kernel_marker = "Linux version";
  bool agent = true;      // the guest runs the QEMU guest agent
  std::string up_marker;  // "" none: up is the agent's alone
  int seconds = 600;
};

// A marker: one line of printable text, matched as it is.
inline constexpr std::size_t kMaxMarker = 128;
inline constexpr int kMaxWatchSeconds = 3600;

struct BootSpec {
  std::string image;       // a disk image path on the host; "" for none
  std::string cloud_init;  // cloud-init user data; "" for none
  std::string kernel;      // direct kernel boot: the kernel's absolute path on the host; "" for none
  std::string initrd;      // the initramfs loaded with the kernel; "" for none (needs a kernel)
  std::string cmdline;     // the kernel command line, one line; "" for none (needs a kernel)
  // The VM's NVMe are boot devices too, after the image: SeaBIOS sets up only the disks it may boot
  // from, so without this a BIOS guest's boot loader cannot read its NVMe (needs nvme > 0).
  bool from_nvme = false;
  BootWatch watch;
};

// QEMU 7.2 runs at most 16 preallocation threads per memory backend (MAX_MEM_PREALLOC_THREAD_COUNT,
// util/oslib-posix.c) and silently uses 16 for more: a template asking more is refused, and render's
// automatic count stops there.
inline constexpr int kMaxAllocationThreads = 16;

struct VmTemplate {
  std::string name;
  std::string description;
  std::string source;     // the file it came from, for messages
  bool abstract = false;  // a base for `extends` only: load_template_dirs never offers it as a shape
  int vcpus = 0;
  uint64_t memory_bytes = 0;
  uint64_t hugepage_size_bytes = 1ULL << 30;
  // QEMU's threads that zero each guest cell's memory up front, on the cell's host node; 0: auto
  // (render: the VM's pinned CPUs in its smallest cell, at most 16).
  int allocation_threads = 0;
  GuestNuma guest_numa;
  GpuSpec gpus;
  NicSpec nics;
  int nvme = 0;
  bool peer_to_peer = false;
  std::string machine = "q35";
  Firmware firmware = Firmware::efi;
  BootSpec boot;
  std::map<std::string, std::string> metadata;  // extra key/values written into the domain's metadata
};

// Parses one template from YAML text. `source` names it in errors ("gx3d.yaml"). A template with
// `extends: NAME` takes NAME's fields first; `find_parent` returns the YAML text and source of NAME.
using ParentLookup = std::function<Result<std::pair<std::string, std::string>>(const std::string& name)>;
Result<VmTemplate> parse_template(const std::string& yaml, const std::string& source, const ParentLookup& find_parent);

// The one lookup of `extends: NAME`: NAME.yaml in the first of `places` that has it. A NAME that is
// not a name (common/names.hpp) is refused before any path is made of it. The source it gives
// (errors name it) is the file's path, or its file name alone for readers who are not to see the
// host's directories (the API's validate).
enum class ParentSource { path, file_name };
ParentLookup directory_lookup(std::vector<std::filesystem::path> places, ParentSource source = ParentSource::path);

// Loads FILE; parents named by `extends` are looked up as NAME.yaml beside FILE, then in `search_dirs`.
Result<VmTemplate> load_template_file(const std::filesystem::path& file,
                                      const std::vector<std::filesystem::path>& search_dirs);

// Every *.yaml in the directories, by template name; a later directory overrides an earlier one
// (shipped templates first, the operator's after). Fails on the first invalid template.
Result<std::map<std::string, VmTemplate>> load_template_dirs(const std::vector<std::filesystem::path>& dirs);

}  // namespace hostagent::vmtemplates
