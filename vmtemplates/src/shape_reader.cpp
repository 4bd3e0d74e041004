// vmtemplates/shape_reader (private): one reader per part of the schema, each reporting into the
// shared problem list and leaving the default in place when its value is wrong or absent.
#include "shape_reader.hpp"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <regex>

#include "hostagent/vmtemplates/quantity.hpp"
#include "hostagent/vmtemplates/yaml_checker.hpp"

namespace hostagent::vmtemplates::detail {

using yaml::Checker;
using yaml::closest;
using yaml::describe;
using yaml::Entry;
using yaml::join_choices;

const std::vector<std::string_view> kOwnKeys = {"name", "description", "abstract", "extends"};

namespace {

constexpr int kMaxVcpus = 1024;
constexpr int kMaxGpus = 64;
constexpr int kMaxVfsPerGpu = 16;
constexpr int kMaxNicCount = 128;
constexpr int kMaxNvme = 64;
// Linux's COMMAND_LINE_SIZE is 2048 on x86 (4096 on some architectures): QEMU passes a longer line
// on and the kernel keeps its first 2047 bytes. 4096 refuses only what no kernel would read.
constexpr std::size_t kMaxCmdline = 4096;
constexpr int kMaxCells = 14;  // one pxb-pcie per cell, on pcie-root slots 0x10-0x1d (render)
constexpr uint16_t kNvidia = 0x10de;
constexpr uint64_t kHuge2M = 2ULL << 20;
constexpr uint64_t kHuge1G = 1ULL << 30;

const std::vector<std::string_view> kTopKeys = {"name",         "description", "abstract",      "extends",
                                                "vcpus",        "memory",      "hugepage_size", "allocation_threads",
                                                "guest_numa",   "gpus",        "nics",          "nvme",
                                                "peer_to_peer", "machine",     "firmware",      "boot",
                                                "metadata"};

struct GpuModel {
  std::string_view name;
  std::vector<uint16_t> device_ids;  // all NVIDIA (0x10de)
};

const std::vector<GpuModel>& gpu_models() {
  static const std::vector<GpuModel> models = {
      {"A100", {0x20b0, 0x20b2, 0x20b5, 0x20f1}},  // SXM4-40GB, SXM4-80GB, PCIe-80GB, PCIe-40GB
      {"A6000", {0x2230}},                         // RTX A6000
      {"H100", {0x2330, 0x2331, 0x2324}},          // SXM5-80GB, PCIe, H800 (H100 for export)
      {"H200", {0x2335}},                          // SXM 141GB
      {"V100", {0x1db1, 0x1db4, 0x1db5, 0x1db8}},  // SXM2-16GB, PCIe-16GB, SXM2-32GB, SXM3-32GB (DGX-2)
  };
  return models;
}

const Value& field(const Value& mapping, std::string_view key) {
  static const Value kAbsent;
  const Entry* entry = mapping.find(key);
  return entry == nullptr ? kAbsent : entry->value;
}

std::string page_name(uint64_t bytes) {
  return bytes == kHuge2M ? "2M" : "1G";
}

class ShapeReader {
 public:
  ShapeReader(const ReadOptions& options, std::vector<Problem>& problems) : options_(options), check_(problems) {}

  VmTemplate read(const Value& root) {
    VmTemplate shape;
    if (!check_.mapping(root, "", kTopKeys)) return shape;
    read_identity(root, shape);
    complete_ = options_.chain_resolved && !shape.abstract;
    read_compute(root, shape);
    read_guest_numa(field(root, "guest_numa"), shape);
    read_gpus(field(root, "gpus"), shape.gpus);
    read_nics(field(root, "nics"), shape.nics, shape.gpus.count);
    read_platform(root, shape);
    read_metadata(field(root, "metadata"), shape.metadata);
    return shape;
  }

 private:
  void read_identity(const Value& root, VmTemplate& shape) {
    const Value& name = field(root, "name");
    if (auto value = check_.name(name, "name")) {
      shape.name = *value;
      if (!options_.expected_name.empty() && *value != options_.expected_name) {
        check_.report(name.at, "name", describe(name),
                      "\"" + options_.expected_name +
                          "\", the file's name without .yaml: extends and overrides find templates by file name");
      }
    } else if (name.is_null()) {
      check_.report_missing(root, "name", "the template's name, like gx3d-160x1792x8h100");
    }
    shape.description = check_.text(field(root, "description"), "description").value_or("");
    shape.abstract = check_.boolean(field(root, "abstract"), "abstract").value_or(false);
  }

  void read_compute(const Value& root, VmTemplate& shape) {
    const Value& vcpus = field(root, "vcpus");
    if (auto value = check_.whole(vcpus, "vcpus", 1, kMaxVcpus)) shape.vcpus = *value;
    if (vcpus.is_null() && complete_) check_.report_missing(root, "vcpus", "a whole number 1..1024");
    vcpus_known_ = shape.vcpus > 0;

    bool pages_known = true;
    const Value& pages = field(root, "hugepage_size");
    if (auto size = check_.byte_size(pages, "hugepage_size")) {
      if (*size == kHuge2M || *size == kHuge1G) {
        shape.hugepage_size_bytes = *size;
      } else {
        check_.report(pages.at, "hugepage_size", describe(pages), "2M or 1G, the x86 hugepage sizes");
        pages_known = false;
      }
    } else {
      pages_known = pages.is_null();
    }
    read_memory(root, shape, pages_known);
    read_allocation_threads(root, shape);
  }

  void read_allocation_threads(const Value& root, VmTemplate& shape) {
    const Value& threads = field(root, "allocation_threads");
    if (threads.is_null() || (threads.kind == Value::Kind::scalar && threads.scalar == "auto")) return;
    const std::string& text = threads.scalar;
    // Read as whole numbers are elsewhere: no sign, no leading zero (0100 is octal in YAML 1.1).
    int count = 0;
    const bool decimal =
        threads.kind == Value::Kind::scalar && !text.empty() && text.size() <= 2 && (text == "0" || text[0] != '0') &&
        std::from_chars(text.data(), text.data() + text.size(), count).ptr == text.data() + text.size();
    if (decimal && count >= 1 && count <= kMaxAllocationThreads) {
      shape.allocation_threads = count;
      return;
    }
    check_.report(threads.at, "allocation_threads", decimal ? text : describe(threads),
                  "auto, or a whole number 1..16 (QEMU 7.2 runs at most 16 per guest cell)");
  }

  void read_memory(const Value& root, VmTemplate& shape, bool pages_known) {
    const Value& memory = field(root, "memory");
    if (memory.is_null() && complete_) check_.report_missing(root, "memory", "a size like 1792GiB");
    auto size = check_.byte_size(memory, "memory");
    if (!size) return;
    const std::string pages = page_name(shape.hugepage_size_bytes);
    if (*size == 0 || (pages_known && *size % shape.hugepage_size_bytes != 0)) {
      check_.report(memory.at, "memory", describe(memory),
                    "a whole number of " + pages + " hugepages, at least one" + binary_hint(memory.scalar, shape));
      return;
    }
    shape.memory_bytes = *size;
  }

  // "1280GB" is 10^9-based and rarely a whole number of hugepages; the author usually meant GiB.
  static std::string binary_hint(const std::string& text, const VmTemplate& shape) {
    if (text.size() < 3 || text.substr(text.size() - 2) != "GB") return "";
    const std::string binary = text.substr(0, text.size() - 2) + "GiB";
    const auto size = parse_byte_size(binary);
    if (!size.ok() || *size % shape.hugepage_size_bytes != 0) return "";
    return " (did you mean \"" + binary + "\"?)";
  }

  void read_guest_numa(const Value& numa, VmTemplate& shape) {
    const std::string expected = "mirror or a mapping {cells: N}";
    if (numa.is_null()) return;
    if (numa.kind == Value::Kind::scalar && numa.scalar == "mirror") return;
    if (numa.kind != Value::Kind::mapping) {
      check_.report(numa.at, "guest_numa", describe(numa), expected);
      return;
    }
    if (!check_.mapping(numa, "guest_numa", {"cells"})) return;
    const Value& cells = field(numa, "cells");
    if (cells.is_null()) check_.report_missing(numa, "guest_numa.cells", "a whole number 1..14");
    const auto count = check_.whole(cells, "guest_numa.cells", 1, kMaxCells);
    if (!count) return;
    if (vcpus_known_ && *count > shape.vcpus) {
      check_.report(cells.at, "guest_numa.cells", cells.scalar,
                    "at most vcpus (" + std::to_string(shape.vcpus) + "): every guest cell needs a vCPU");
      return;
    }
    shape.guest_numa = GuestNuma{false, *count};
  }

  void read_gpus(const Value& gpus, GpuSpec& spec) {
    gpu_count_known_ = complete_;  // absent GPUs mean none, once the template is whole
    if (gpus.is_null()) return;
    if (!check_.mapping(gpus, "gpus", {"count", "model", "vendor_id", "device_id", "ids"})) return;
    const Value& count = field(gpus, "count");
    if (count.is_null() && complete_) check_.report_missing(gpus, "gpus.count", "a whole number 0..64");
    const auto value = check_.whole(count, "gpus.count", 0, kMaxGpus);
    if (value) spec.count = *value;
    gpu_count_known_ = value.has_value() || (count.is_null() && complete_);
    check_single_selector(gpus);
    read_gpu_model(field(gpus, "model"), spec);
    read_gpu_device(gpus, spec);
    read_gpu_ids(field(gpus, "ids"), spec);
  }

  // model, vendor_id/device_id and ids each choose the GPUs; two of them would contradict.
  void check_single_selector(const Value& gpus) {
    const Entry* first = nullptr;
    static const std::vector<std::string_view> kSelectors = {"model", "vendor_id", "device_id", "ids"};
    for (const Entry& entry : gpus.entries) {
      if (entry.value.is_null() || std::find(kSelectors.begin(), kSelectors.end(), entry.key) == kSelectors.end()) {
        continue;
      }
      const bool same_group = first != nullptr && first->key.ends_with("_id") && entry.key.ends_with("_id");
      if (first == nullptr || same_group) {
        if (first == nullptr) first = &entry;
        continue;
      }
      check_.report(
          entry.key_at, "gpus." + entry.key, "a second GPU selector beside " + first->key,
          "one of model, device_id (with vendor_id) or ids; write " + first->key + ": ~ to drop an inherited one");
      return;
    }
  }

  void read_gpu_model(const Value& model, GpuSpec& spec) {
    if (model.is_null()) return;
    for (const auto& entry : gpu_models()) {
      if (model.kind != Value::Kind::scalar || entry.name != model.scalar) continue;
      spec.model = model.scalar;
      for (const uint16_t device : entry.device_ids) spec.ids.push_back(PciId{kNvidia, device});
      return;
    }
    const auto known = known_gpu_models();
    check_.report(
        model.at, "gpus.model", describe(model),
        "a known model (" + join_choices(known) + "), or device_id or ids for another GPU" + case_hint(model, known));
  }

  // Only a difference in case is a typo: B200 and H200 are one letter apart and different GPUs.
  static std::string case_hint(const Value& model, const std::vector<std::string_view>& known) {
    const auto near = model.kind == Value::Kind::scalar ? closest(model.scalar, known) : std::nullopt;
    if (!near || near->size() != model.scalar.size()) return "";
    const bool same_letters = std::equal(near->begin(), near->end(), model.scalar.begin(), [](char a, char b) {
      return std::tolower(static_cast<unsigned char>(a)) == std::tolower(static_cast<unsigned char>(b));
    });
    return same_letters ? " (did you mean \"" + *near + "\"?)" : "";
  }

  void read_gpu_device(const Value& gpus, GpuSpec& spec) {
    const Value& vendor = field(gpus, "vendor_id");
    const Value& device = field(gpus, "device_id");
    if (vendor.is_null() && device.is_null()) return;
    const auto vendor_id =
        vendor.is_null() ? std::optional<uint16_t>(kNvidia) : check_.pci_id(vendor, "gpus.vendor_id");
    const auto device_id = check_.pci_id(device, "gpus.device_id");
    if (device.is_null()) {
      check_.report_missing(gpus, "gpus.device_id", "a hex PCI id like 0x2330 beside vendor_id");
    }
    if (vendor_id && device_id) spec.ids.push_back(PciId{*vendor_id, *device_id});
  }

  void read_gpu_ids(const Value& ids, GpuSpec& spec) {
    const std::string expected = "a list of vendor:device ids in hex, like [10de:2330, 10de:2331]";
    if (ids.is_null()) return;
    if (ids.kind != Value::Kind::list || ids.items.empty()) {
      check_.report(ids.at, "gpus.ids", ids.kind == Value::Kind::list ? "an empty list" : describe(ids), expected);
      return;
    }
    static const std::regex kPair("([0-9a-fA-F]{4}):([0-9a-fA-F]{4})");
    for (std::size_t i = 0; i < ids.items.size(); ++i) {
      const Value& item = ids.items[i];
      std::smatch match;
      if (item.kind != Value::Kind::scalar || !std::regex_match(item.scalar, match, kPair)) {
        check_.report(item.at, "gpus.ids[" + std::to_string(i) + "]", describe(item),
                      "vendor:device in hex, like 10de:2330");
        continue;
      }
      spec.ids.push_back(PciId{static_cast<uint16_t>(std::stoul(match[1].str(), nullptr, 16)),
                               static_cast<uint16_t>(std::stoul(match[2].str(), nullptr, 16))});
    }
  }

  void read_nics(const Value& nics, NicSpec& spec, int gpu_count) {
    if (nics.is_null()) return;
    if (!check_.mapping(nics, "nics", {"mode", "vfs_per_gpu", "count", "placement", "vf"})) return;
    if (check_.choice(field(nics, "mode"), "nics.mode", {"vf", "pf"}).value_or("vf") == "pf") spec.mode = NicMode::pf;
    const Value& per_gpu = field(nics, "vfs_per_gpu");
    if (auto value = check_.whole(per_gpu, "nics.vfs_per_gpu", 0, kMaxVfsPerGpu)) {
      if (*value > 0 && gpu_count == 0 && gpu_count_known_) {
        check_.report(per_gpu.at, "nics.vfs_per_gpu", per_gpu.scalar + " with no GPUs",
                      "0 (or use nics.count): VFs per GPU need gpus.count above 0");
      } else {
        spec.vfs_per_gpu = *value;
      }
    }
    spec.count = check_.whole(field(nics, "count"), "nics.count", 0, kMaxNicCount).value_or(0);
    if (check_.choice(field(nics, "placement"), "nics.placement", {"strict", "prefer"}).value_or("strict") ==
        "prefer") {
      spec.placement = NicPlacement::prefer;
    }
    read_vf(field(nics, "vf"), spec.vf);
    if (spec.mode == NicMode::pf) check_whole_nics(nics, spec);
  }

  // Whole NICs have no VFs: what is set on a VF has nothing to apply to, and is refused rather than
  // ignored.
  void check_whole_nics(const Value& nics, const NicSpec& spec) {
    const Value& per_gpu = field(nics, "vfs_per_gpu");
    if (spec.vfs_per_gpu > 0) {
      check_.report(per_gpu.at, "nics.vfs_per_gpu", per_gpu.scalar + " with nics.mode pf",
                    "0, or no vfs_per_gpu: with nics.mode pf the NICs go whole, nics.count of them");
    }
    const Value& vf = field(nics, "vf");
    if (!vf.is_null()) {
      check_.report(vf.at, "nics.vf", "VF settings with nics.mode pf",
                    "no nics.vf: a whole NIC has no VF to set; set its port on the host or in the guest");
    }
    const Value& count = field(nics, "count");
    if (spec.count == 0 && (count.is_null() || count.scalar == "0")) {
      check_.report(count.is_null() ? nics.at : count.at, "nics.count", count.is_null() ? "none" : count.scalar,
                    "1 or more: with nics.mode pf, nics.count is how many whole NICs the VM gets");
    }
  }

  void read_vf(const Value& vf, VfSettings& settings) {
    if (vf.is_null()) return;
    if (!check_.mapping(vf, "nics.vf", {"mac", "vlan", "trust", "spoofchk", "mtu"})) return;
    if (check_.choice(field(vf, "mac"), "nics.vf.mac", {"auto", "request"}).value_or("auto") == "request") {
      settings.mac = MacPolicy::request;
    }
    settings.vlan = check_.whole(field(vf, "vlan"), "nics.vf.vlan", 1, 4094);
    if (auto trust = check_.boolean(field(vf, "trust"), "nics.vf.trust")) settings.trust = trust;
    if (auto spoofchk = check_.boolean(field(vf, "spoofchk"), "nics.vf.spoofchk")) settings.spoofchk = spoofchk;
    settings.mtu = check_.whole(field(vf, "mtu"), "nics.vf.mtu", 68, 9216);
  }

  void read_platform(const Value& root, VmTemplate& shape) {
    shape.nvme = check_.whole(field(root, "nvme"), "nvme", 0, kMaxNvme).value_or(0);
    shape.peer_to_peer = check_.boolean(field(root, "peer_to_peer"), "peer_to_peer").value_or(false);
    const Value& machine = field(root, "machine");
    // Versioned q35 types: upstream's pc-q35-7.2, Ubuntu's pc-q35-focal-hpb (Vela's sample).
    // Bounded: libstdc++'s regex recurses once per character, so an unbounded pattern on a long
    // value would overflow the stack.
    static const std::regex kQ35("q35|pc-q35-[a-z0-9][a-z0-9.-]{0,63}");
    if (auto text = check_.text(machine, "machine")) {
      if (std::regex_match(*text, kQ35)) {
        shape.machine = *text;
      } else {
        check_.report(machine.at, "machine", describe(machine),
                      "q35 or a pc-q35-* machine type: the guest's PCIe tree is built from pxb-pcie, which needs q35");
      }
    }
    if (check_.choice(field(root, "firmware"), "firmware", {"efi", "bios"}).value_or("efi") == "bios") {
      shape.firmware = Firmware::bios;
    }
    read_boot(field(root, "boot"), shape.boot);
    if (shape.boot.from_nvme && shape.nvme == 0) {
      const Value& from_nvme = field(field(root, "boot"), "from_nvme");
      check_.report(from_nvme.at, "boot.from_nvme", describe(from_nvme) + " with nvme 0",
                    "nvme of 1 or more (the VM's NVMe are what it would boot from), or no boot.from_nvme");
    }
  }

  void read_boot(const Value& boot, BootSpec& spec) {
    if (boot.is_null()) return;
    if (!check_.mapping(boot, "boot", {"image", "cloud_init", "kernel", "initrd", "cmdline", "from_nvme", "watch"}))
      return;
    spec.image = host_path(field(boot, "image"), "boot.image");
    spec.cloud_init = check_.text(field(boot, "cloud_init"), "boot.cloud_init").value_or("");
    spec.kernel = host_path(field(boot, "kernel"), "boot.kernel");
    spec.initrd = host_path(field(boot, "initrd"), "boot.initrd");
    spec.cmdline = read_cmdline(field(boot, "cmdline"));
    spec.from_nvme = check_.boolean(field(boot, "from_nvme"), "boot.from_nvme").value_or(false);
    read_watch(field(boot, "watch"), spec.watch);
    // An inherited kernel removed with `kernel: ~` must not leave its initrd and command line behind.
    const bool kernel_given = !field(boot, "kernel").is_null();
    for (const char* key : {"initrd", "cmdline"}) {
      const Value& value = field(boot, key);
      if (value.is_null() || kernel_given) continue;
      check_.report(value.at, std::string("boot.") + key, describe(value) + " with no boot.kernel",
                    "boot.kernel beside it: QEMU loads an initrd and a command line only with a kernel it boots "
                    "directly");
    }
  }

  void read_watch(const Value& watch, BootWatch& spec) {
    if (watch.is_null()) return;
    if (!check_.mapping(watch, "boot.watch", {"kernel_marker", "agent", "up_marker", "seconds"})) return;
    if (auto marker = read_marker(field(watch, "kernel_marker"), "boot.watch.kernel_marker"))
      spec.kernel_marker = *marker;
    spec.agent = check_.boolean(field(watch, "agent"), "boot.watch.agent").value_or(spec.agent);
    if (auto marker = read_marker(field(watch, "up_marker"), "boot.watch.up_marker")) spec.up_marker = *marker;
    spec.seconds =
        check_.whole(field(watch, "seconds"), "boot.watch.seconds", 1, kMaxWatchSeconds).value_or(spec.seconds);
  }

  // Console text to find as it is: one line of printable ASCII, so what the template says is what a
  // serial console shows (no line break can match across the console's own).
  std::optional<std::string> read_marker(const Value& value, const std::string& path) {
    auto text = check_.text(value, path);
    if (!text) return std::nullopt;
    const bool printable = std::all_of(text->begin(), text->end(), [](char c) { return c >= 0x20 && c < 0x7f; });
    if (!text->empty() && text->size() <= kMaxMarker && printable) return text;
    check_.report(value.at, path, describe(value), "one line of 1 to 128 printable ASCII characters");
    return std::nullopt;
  }

  // "" when absent or wrong (and then reported).
  std::string host_path(const Value& value, const std::string& path) {
    const auto text = check_.text(value, path);
    if (!text) return "";
    // ".." would let a template name a file outside where its author looked; the renderer refuses it too.
    const bool dotdot = text->find("/../") != std::string::npos || text->ends_with("/..");
    if (text->starts_with("/") && !dotdot) return *text;
    check_.report(value.at, path, describe(value), "an absolute path on the host without '..'");
    return "";
  }

  // The kernel takes the line as it is; control characters (a folded YAML scalar's trailing newline
  // among them) would reach the guest's argument parsing unnoticed, so they are refused.
  std::string read_cmdline(const Value& value) {
    const auto text = check_.text(value, "boot.cmdline");
    if (!text) return "";
    const bool control = std::any_of(text->begin(), text->end(),
                                     [](char c) { return std::iscntrl(static_cast<unsigned char>(c)) != 0; });
    if (text->size() <= kMaxCmdline && !control) return *text;
    check_.report(value.at, "boot.cmdline",
                  control ? describe(value) + " (a control character or line break)"
                          : "a command line of " + std::to_string(text->size()) + " bytes",
                  "one line of at most 4096 bytes");
    return "";
  }

  void read_metadata(const Value& metadata, std::map<std::string, std::string>& out) {
    if (metadata.is_null()) return;
    if (metadata.kind != Value::Kind::mapping) {
      check_.report(metadata.at, "metadata", describe(metadata), "a mapping of names to text");
      return;
    }
    for (const Entry& entry : metadata.entries) {
      const std::string path = "metadata." + entry.key;
      // Keys become XML element names in the domain's <metadata>.
      const auto key = check_.identifier(Value{Value::Kind::scalar, entry.key_at, entry.key, {}, {}}, path);
      // XML reserves names that start with "xml" in any case (XML 1.0, section 2.3).
      if (key && (key->size() >= 3 && (std::tolower((*key)[0]) == 'x' && std::tolower((*key)[1]) == 'm' &&
                                       std::tolower((*key)[2]) == 'l'))) {
        check_.report(entry.key_at, path, "\"" + *key + "\"",
                      "a name that does not start with \"xml\" (XML reserves those)");
        continue;
      }
      const auto text = check_.text(entry.value, path);
      if (key && text) out[*key] = *text;
    }
  }

  const ReadOptions& options_;
  Checker check_;
  bool complete_ = false;
  bool vcpus_known_ = false;
  bool gpu_count_known_ = false;
};

}  // namespace

std::vector<std::string_view> known_gpu_models() {
  std::vector<std::string_view> names;
  for (const auto& model : gpu_models()) names.push_back(model.name);
  return names;
}

VmTemplate read_shape(const Value& root, const ReadOptions& options, std::vector<Problem>& problems) {
  return ShapeReader(options, problems).read(root);
}

}  // namespace hostagent::vmtemplates::detail
