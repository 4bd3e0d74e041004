// hostagent/config/config_reader (private): one reader per section, each leaving the default in
// place when its value is wrong or absent, then the checks that span keys. A key whose own value
// was wrong is left out of the cross-key checks: its problem is already reported.
#include "config_reader.hpp"

#include <algorithm>
#include <cctype>
#include <optional>
#include <string_view>

#include "hostagent/common/pci_address.hpp"
#include "hostagent/simhost/sim_host.hpp"
#include "hostagent/vmtemplates/yaml_checker.hpp"
#include "value_readers.hpp"

namespace hostagent::config::detail {
namespace {

using vmtemplates::yaml::describe;
using vmtemplates::yaml::Entry;
using vmtemplates::yaml::join_choices;
using vmtemplates::yaml::Problem;

constexpr int kMaxWorkers = 256;
constexpr int kMaxVfs = 2048;         // PCIe SR-IOV TotalVFs is 16 bits; no device has more than this
constexpr int kMaxVlan = 4094;        // IEEE 802.1Q: 4095 is reserved
constexpr int kMaxQos = 7;            // 802.1p priority
constexpr int kMaxRateMbps = 400000;  // above any NIC's line rate today

const std::vector<std::string_view> kTopKeys = {
    "libvirt",    "host",    "templates", "images", "storage",  "state_directory", "console_log_directory",
    "operations", "devices", "hygiene",   "api",    "placement"};
const std::vector<std::string_view> kLibvirtKeys = {"uri", "domain_type", "emulator", "connect_timeout",
                                                    "reconnect_interval"};
const std::vector<std::string_view> kHostKeys = {"sysfs_root", "simulated", "housekeeping_cpus",
                                                 "confine_host_processes", "hugepages"};
constexpr int kMaxNode = 1023;              // the kernel's largest MAX_NUMNODES is 1024
constexpr int kMaxPoolPages = 999'999'999;  // the most whole() reads; 2 PB of 2 MiB pages
const std::vector<std::string_view> kApiKeys = {"listen",    "tls",   "token_file", "reader_token_file",
                                                "audit_log", "limits"};
const std::vector<std::string_view> kApiLimitsKeys = {"header_timeout",   "request_timeout", "idle_timeout",
                                                      "max_connections",  "health_reserve",  "max_connections_per_peer",
                                                      "max_event_streams"};
constexpr int kMaxConnections = 65536;
const std::vector<std::string_view> kTlsKeys = {"certificate", "key", "client_ca"};  // the files
const std::vector<std::string_view> kTlsSectionKeys = {"certificate", "key", "client_ca", "operator_common_names"};
const std::vector<std::string_view> kDevicesKeys = {"preparation", "bind_at_start",      "gpu_ids",  "sriov",
                                                    "vf",          "releasable_drivers", "reserved", "health"};
const std::vector<std::string_view> kHealthKeys = {"aer_fatal_rise", "aer_nonfatal_rise", "aer_correctable_rise",
                                                   "link_degraded"};
constexpr int kMaxAerRise = 1'000'000'000;
const std::vector<std::string_view> kHygieneKeys = {"firmware", "gpu_scrub", "nvme_erase_timeout", "parallel",
                                                    "deadlines"};
constexpr int kMaxParallelCleanings = 4096;  // above any host's count of devices a VM takes
// The cleaning steps each role's device goes through (devices/device_cleaning).
const std::vector<std::pair<std::string_view, std::vector<std::string_view>>> kCleaningSteps = {
    {"gpu", {"reset", "firmware", "scrub"}},
    {"nvswitch", {"reset", "firmware"}},
    {"nic", {"reset", "firmware", "vf-neutral"}},
    {"nvme", {"reset", "firmware", "erase"}}};
const std::vector<std::string_view> kGpuScrubKeys = {"argv", "timeout"};
const std::vector<std::string_view> kPlacementKeys = {"url",       "token_file", "ca_file",
                                                      "host_name", "interval",   "claim_grace"};
const std::vector<std::string_view> kVfKeys = {
    "vlan", "qos", "trust", "spoofchk", "link_state", "min_tx_rate_mbps", "max_tx_rate_mbps"};
const std::vector<std::string_view> kPreparations = {"hostagent", "libvirt"};
const std::vector<std::string_view> kOnHostBoot = {"restore", "start", "stay_off"};
const std::vector<std::string_view> kLinkStates = {"auto", "enable", "disable"};
// The domain types hostagent renders: QEMU with or without KVM, and libvirt's test driver.
const std::vector<std::string_view> kDomainTypes = {"kvm", "qemu", "test"};
// The libvirt drivers those types run on; a transport may follow ("qemu+ssh://host/system").
const std::vector<std::string_view> kDrivers = {"qemu", "test"};

const Value& field(const Value& mapping, std::string_view key) {
  static const Value kAbsent;
  const Entry* entry = mapping.find(key);
  return entry == nullptr ? kAbsent : entry->value;
}

// A key as written: nullptr when absent (the default applies); valid is false when the value was
// wrong and already reported.
struct Written {
  const Value* value = nullptr;
  bool valid = true;

  static Written of(const Value& v, bool read) { return {v.is_null() ? nullptr : &v, read || v.is_null()}; }
};

// "a, b and c"
std::string join_all(const std::vector<std::string_view>& names) {
  std::string out;
  for (std::size_t i = 0; i < names.size(); ++i) {
    if (i > 0) out += i + 1 == names.size() ? " and " : ", ";
    out += names[i];
  }
  return out;
}

bool is_test_uri(const std::string& uri) {
  return uri.starts_with("test:///");
}

// libvirt URIs are driver[+transport]://[host]/path (https://libvirt.org/uri.html).
bool known_driver_uri(const std::string& uri) {
  const auto scheme_end = uri.find("://");
  if (scheme_end == std::string::npos || uri.find('/', scheme_end + 3) == std::string::npos) return false;
  const std::string_view scheme = std::string_view(uri).substr(0, scheme_end);
  const std::string_view driver = scheme.substr(0, scheme.find('+'));
  return std::find(kDrivers.begin(), kDrivers.end(), driver) != kDrivers.end();
}

class ConfigReader {
 public:
  explicit ConfigReader(std::vector<Problem>& problems) : check_(problems) {}

  DaemonConfig read(const Value& root) {
    DaemonConfig config;
    if (root.is_null() || !check_.mapping(root, "", kTopKeys)) return config;  // an empty file is every default
    read_libvirt(field(root, "libvirt"), config);
    read_host(field(root, "host"), config);
    read_templates(field(root, "templates"), config);
    read_images(field(root, "images"), config);
    read_storage(field(root, "storage"), config);
    read_directories(root, config);
    read_operations(field(root, "operations"), config);
    read_devices(field(root, "devices"), config.devices);
    read_hygiene(field(root, "hygiene"), config.hygiene);
    read_api(field(root, "api"), config.api);
    read_placement(field(root, "placement"), config.placement);
    check_libvirt_pair(config);
    settle_preparation(config);
    check_hygiene_applied(config);
    check_host_pair(config);
    check_confinement(config);
    check_api_auth(config.api);
    return config;
  }

 private:
  // True when the section is a mapping to read; absent sections keep their defaults.
  bool section(const Value& value, const std::string& path, const std::vector<std::string_view>& keys) {
    return !value.is_null() && check_.mapping(value, path, keys);
  }

  void read_libvirt(const Value& libvirt, DaemonConfig& config) {
    if (!section(libvirt, "libvirt", kLibvirtKeys)) return;
    const Value& uri = field(libvirt, "uri");
    const bool uri_read = read_uri(uri, config.libvirt_uri);
    uri_ = Written::of(uri, uri_read);
    const Value& type = field(libvirt, "domain_type");
    const auto type_text = check_.choice(type, "libvirt.domain_type", kDomainTypes);
    config.domain_type = type_text.value_or(config.domain_type);
    domain_type_ = Written::of(type, type_text.has_value());
    config.emulator = read_absolute_path(check_, field(libvirt, "emulator"), "libvirt.emulator", EmptyPath::none)
                          .value_or(config.emulator)
                          .string();
    config.libvirt_connect_timeout = read_duration(check_, field(libvirt, "connect_timeout"), "libvirt.connect_timeout")
                                         .value_or(config.libvirt_connect_timeout);
    config.libvirt_reconnect_interval =
        read_duration(check_, field(libvirt, "reconnect_interval"), "libvirt.reconnect_interval")
            .value_or(config.libvirt_reconnect_interval);
  }

  bool read_uri(const Value& uri, std::string& out) {
    const auto text = check_.text(uri, "libvirt.uri");
    if (!text) return false;
    if (!known_driver_uri(*text)) {
      check_.report(uri.at, "libvirt.uri", describe(uri),
                    "a libvirt URI of the qemu or test driver, like qemu:///system or test:///default");
      return false;
    }
    out = *text;
    return true;
  }

  void read_host(const Value& host, DaemonConfig& config) {
    if (!section(host, "host", kHostKeys)) return;
    const Value& root = field(host, "sysfs_root");
    const auto root_path = read_absolute_path(check_, root, "host.sysfs_root", EmptyPath::refused);
    config.sysfs_root = root_path.value_or(config.sysfs_root);
    sysfs_root_ = Written::of(root, root_path.has_value());
    const Value& simulated = field(host, "simulated");
    const auto name = read_simulated(simulated);
    config.simulated_host = name.value_or(config.simulated_host);
    simulated_ = Written::of(simulated, name.has_value());
    const Value& housekeeping = field(host, "housekeeping_cpus");
    const auto cpus = read_cpu_list(check_, housekeeping, "host.housekeeping_cpus");
    config.housekeeping_cpus = cpus.value_or(config.housekeeping_cpus);
    housekeeping_cpus_ = Written::of(housekeeping, cpus.has_value());
    const Value& confine = field(host, "confine_host_processes");
    const auto confined = check_.boolean(confine, "host.confine_host_processes");
    config.confine_host_processes = confined.value_or(config.confine_host_processes);
    confine_host_processes_ = Written::of(confine, confined.has_value());
    read_hugepages(field(host, "hugepages"), config);
  }

  void read_hugepages(const Value& pools, DaemonConfig& config) {
    auto read = read_list<HugepagePoolConfig>(
        pools, "host.hugepages", "a list of {node: 0, size: 1G, pages: 800}",
        [this](const Value& item, const std::string& path) { return read_hugepage_pool(item, path); });
    if (!read) return;
    for (std::size_t i = 0; i < read->size(); ++i) {
      for (std::size_t j = 0; j < i; ++j) {
        if ((*read)[i].node != (*read)[j].node || (*read)[i].page_size_bytes != (*read)[j].page_size_bytes) continue;
        check_.report(pools.items[i].at, "host.hugepages[" + std::to_string(i) + "]",
                      "a second pool of node " + std::to_string((*read)[i].node) + " in that page size",
                      "one entry per node and page size (the first is host.hugepages[" + std::to_string(j) + "])");
        return;
      }
    }
    config.host_hugepages = std::move(*read);
  }

  std::optional<HugepagePoolConfig> read_hugepage_pool(const Value& item, const std::string& path) {
    if (!check_.mapping(item, path, {"node", "size", "pages"})) return std::nullopt;
    const auto node = check_.whole(field(item, "node"), path + ".node", 0, kMaxNode);
    const auto pages = check_.whole(field(item, "pages"), path + ".pages", 0, kMaxPoolPages);
    const Value& size = field(item, "size");
    auto bytes = check_.byte_size(size, path + ".size");
    if (bytes && *bytes != (2ULL << 20) && *bytes != (1ULL << 30)) {
      check_.report(size.at, path + ".size", describe(size), "2M or 1G, the x86 hugepage sizes");
      bytes.reset();
    }
    if (!node || !pages || !bytes) {
      if (field(item, "node").is_null() || size.is_null() || field(item, "pages").is_null()) {
        check_.report(item.at, path, describe(item), "node, size and pages, like {node: 0, size: 1G, pages: 800}");
      }
      return std::nullopt;
    }
    return HugepagePoolConfig{*node, *bytes, static_cast<uint64_t>(*pages)};
  }

  std::optional<std::string> read_simulated(const Value& simulated) {
    if (simulated.kind == Value::Kind::scalar && simulated.scalar.empty()) return "";
    const auto names = simhost::builtin_host_names();
    std::vector<std::string_view> choices(names.begin(), names.end());
    if (simulated.kind == Value::Kind::scalar &&
        std::find(choices.begin(), choices.end(), simulated.scalar) == choices.end()) {
      const auto near = vmtemplates::yaml::closest(simulated.scalar, choices);
      check_.report(
          simulated.at, "host.simulated", describe(simulated),
          join_choices(choices) + ", or \"\" for this machine" + (near ? " (did you mean \"" + *near + "\"?)" : ""));
      return std::nullopt;
    }
    return check_.choice(simulated, "host.simulated", choices);
  }

  void read_templates(const Value& templates, DaemonConfig& config) {
    if (!section(templates, "templates", {"directories"})) return;
    read_directory_list(field(templates, "directories"), "templates.directories", config.template_directories);
  }

  void read_images(const Value& images, DaemonConfig& config) {
    if (!section(images, "images", {"directories"})) return;
    read_directory_list(field(images, "directories"), "images.directories", config.image_directories);
  }

  // A list of absolute paths; `out` is replaced only when every item is one.
  void read_directory_list(const Value& directories, const std::string& key, std::vector<std::filesystem::path>& out) {
    if (directories.is_null()) return;
    if (directories.kind != Value::Kind::list) {
      check_.report(directories.at, key, describe(directories), "a list of absolute paths");
      return;
    }
    std::vector<std::filesystem::path> paths;
    for (std::size_t i = 0; i < directories.items.size(); ++i) {
      const std::string path = key + "[" + std::to_string(i) + "]";
      const Value& item = directories.items[i];
      if (item.is_null()) check_.report(item.at, path, "nothing", "an absolute path without '..'");
      if (auto dir = read_absolute_path(check_, item, path, EmptyPath::refused)) paths.push_back(*dir);
    }
    if (paths.size() == directories.items.size()) out = std::move(paths);
  }

  void read_storage(const Value& storage, DaemonConfig& config) {
    if (!section(storage, "storage", {"pool"})) return;
    // libvirt allows more in a pool name, but this one also appears in paths and messages.
    config.storage_pool = check_.name(field(storage, "pool"), "storage.pool").value_or(config.storage_pool);
  }

  void read_directories(const Value& root, DaemonConfig& config) {
    config.state_directory =
        read_absolute_path(check_, field(root, "state_directory"), "state_directory", EmptyPath::refused)
            .value_or(config.state_directory);
    config.console_log_directory =
        read_absolute_path(check_, field(root, "console_log_directory"), "console_log_directory", EmptyPath::refused)
            .value_or(config.console_log_directory);
  }

  void read_operations(const Value& operations, DaemonConfig& config) {
    if (!section(operations, "operations", {"workers", "stop_timeout", "on_host_boot"})) return;
    config.operation_workers = check_.whole(field(operations, "workers"), "operations.workers", 1, kMaxWorkers)
                                   .value_or(config.operation_workers);
    config.stop_timeout = read_duration(check_, field(operations, "stop_timeout"), "operations.stop_timeout")
                              .value_or(config.stop_timeout);
    config.on_host_boot = check_.choice(field(operations, "on_host_boot"), "operations.on_host_boot", kOnHostBoot)
                              .value_or(config.on_host_boot);
  }

  void read_devices(const Value& devices, DevicesConfig& config) {
    if (!section(devices, "devices", kDevicesKeys)) return;
    const Value& preparation = field(devices, "preparation");
    const auto how = check_.choice(preparation, "devices.preparation", kPreparations);
    config.preparation = how.value_or(config.preparation);
    preparation_ = Written::of(preparation, how.has_value());
    config.bind_at_start =
        check_.boolean(field(devices, "bind_at_start"), "devices.bind_at_start").value_or(config.bind_at_start);
    read_gpu_ids(field(devices, "gpu_ids"), config);
    read_sriov(field(devices, "sriov"), config);
    read_vf(field(devices, "vf"), config.vf);
    read_drivers(field(devices, "releasable_drivers"), config);
    read_reserved(field(devices, "reserved"), config);
    read_health(field(devices, "health"), config.health);
  }

  void read_health(const Value& health, numa::HealthThresholds& config) {
    if (!section(health, "devices.health", kHealthKeys)) return;
    const auto rise = [&](const char* key, uint64_t& into) {
      const auto read = check_.whole(field(health, key), std::string("devices.health.") + key, 0, kMaxAerRise);
      if (read) into = static_cast<uint64_t>(*read);
    };
    rise("aer_fatal_rise", config.aer_fatal_rise);
    rise("aer_nonfatal_rise", config.aer_nonfatal_rise);
    rise("aer_correctable_rise", config.aer_correctable_rise);
    config.link_degraded =
        check_.boolean(field(health, "link_degraded"), "devices.health.link_degraded").value_or(config.link_degraded);
  }

  // A list whose items each read with `item`; the whole list is kept only when every item read.
  template <typename T, typename ReadItem>
  std::optional<std::vector<T>> read_list(const Value& list, const std::string& path, const std::string& expected,
                                          ReadItem item) {
    if (list.is_null()) return std::nullopt;
    if (list.kind != Value::Kind::list) {
      check_.report(list.at, path, describe(list), expected);
      return std::nullopt;
    }
    std::vector<T> out;
    for (std::size_t i = 0; i < list.items.size(); ++i) {
      if (auto value = item(list.items[i], path + "[" + std::to_string(i) + "]")) out.push_back(std::move(*value));
    }
    if (out.size() != list.items.size()) return std::nullopt;
    return out;
  }

  void read_gpu_ids(const Value& ids, DevicesConfig& config) {
    auto read = read_list<PciDeviceIdConfig>(
        ids, "devices.gpu_ids", "a list of {vendor: 0x1234, device: 0x11e8}",
        [this](const Value& item, const std::string& path) -> std::optional<PciDeviceIdConfig> {
          if (!check_.mapping(item, path, {"vendor", "device"})) return std::nullopt;
          const auto vendor = check_.pci_id(field(item, "vendor"), path + ".vendor");
          const auto device = check_.pci_id(field(item, "device"), path + ".device");
          if (!vendor || !device) {
            if (field(item, "vendor").is_null() || field(item, "device").is_null()) {
              check_.report(item.at, path, describe(item),
                            "both vendor and device, like {vendor: 0x1234, device: 0x11e8}");
            }
            return std::nullopt;
          }
          return PciDeviceIdConfig{*vendor, *device};
        });
    if (read) config.gpu_ids = std::move(*read);
  }

  void read_sriov(const Value& sriov, DevicesConfig& config) {
    auto read = read_list<SriovPfConfig>(
        sriov, "devices.sriov", "a list of {pf: \"0000:3b:00.0\", vfs: 8}",
        [this](const Value& item, const std::string& path) -> std::optional<SriovPfConfig> {
          if (!check_.mapping(item, path, {"pf", "vfs"})) return std::nullopt;
          const Value& pf = field(item, "pf");
          const auto address = check_.text(pf, path + ".pf");
          if (address && !PciAddress::parse(*address).ok()) {
            check_.report(pf.at, path + ".pf", describe(pf), "a PCI address like 0000:3b:00.0");
            return std::nullopt;
          }
          const auto vfs = check_.whole(field(item, "vfs"), path + ".vfs", 0, kMaxVfs);
          if (!address || !vfs) {
            if (pf.is_null() || field(item, "vfs").is_null()) {
              check_.report(item.at, path, describe(item), "both pf and vfs, like {pf: \"0000:3b:00.0\", vfs: 8}");
            }
            return std::nullopt;
          }
          return SriovPfConfig{*address, *vfs};
        });
    if (read) config.sriov = std::move(*read);
  }

  void read_vf(const Value& vf, VfConfigDefaults& config) {
    if (!section(vf, "devices.vf", kVfKeys)) return;
    config.vlan = check_.whole(field(vf, "vlan"), "devices.vf.vlan", 0, kMaxVlan).value_or(config.vlan);
    config.qos = check_.whole(field(vf, "qos"), "devices.vf.qos", 0, kMaxQos).value_or(config.qos);
    config.trust = check_.boolean(field(vf, "trust"), "devices.vf.trust").value_or(config.trust);
    config.spoofchk = check_.boolean(field(vf, "spoofchk"), "devices.vf.spoofchk").value_or(config.spoofchk);
    config.link_state =
        check_.choice(field(vf, "link_state"), "devices.vf.link_state", kLinkStates).value_or(config.link_state);
    config.min_tx_rate_mbps = static_cast<uint32_t>(
        check_.whole(field(vf, "min_tx_rate_mbps"), "devices.vf.min_tx_rate_mbps", 0, kMaxRateMbps)
            .value_or(static_cast<int>(config.min_tx_rate_mbps)));
    config.max_tx_rate_mbps = static_cast<uint32_t>(
        check_.whole(field(vf, "max_tx_rate_mbps"), "devices.vf.max_tx_rate_mbps", 0, kMaxRateMbps)
            .value_or(static_cast<int>(config.max_tx_rate_mbps)));
  }

  void read_drivers(const Value& drivers, DevicesConfig& config) {
    auto read = read_list<std::string>(
        drivers, "devices.releasable_drivers", "a list of kernel driver names",
        [this](const Value& item, const std::string& path) { return check_.identifier(item, path); });
    if (read) config.releasable_drivers = std::move(*read);
  }

  void read_reserved(const Value& reserved, DevicesConfig& config) {
    auto read = read_list<ReservedDeviceConfig>(
        reserved, "devices.reserved", "a list of {address: \"0000:02:00.0\", reason: \"boot disk\"}",
        [this](const Value& item, const std::string& path) -> std::optional<ReservedDeviceConfig> {
          if (!check_.mapping(item, path, {"address", "reason"})) return std::nullopt;
          const Value& address = field(item, "address");
          const auto text = check_.text(address, path + ".address");
          if (text && !PciAddress::parse(*text).ok()) {
            check_.report(address.at, path + ".address", describe(address), "a PCI address like 0000:02:00.0");
            return std::nullopt;
          }
          auto reason = check_.text(field(item, "reason"), path + ".reason");
          if (reason && reason->empty()) {
            check_.report(field(item, "reason").at, path + ".reason", "an empty text",
                          "why the host keeps it, as an operator should read it: \"boot disk\"");
            reason.reset();
          }
          if (!text || !reason) {
            if (address.is_null() || field(item, "reason").is_null()) {
              check_.report(item.at, path, describe(item),
                            "both address and reason, like {address: \"0000:02:00.0\", reason: \"boot disk\"}");
            }
            return std::nullopt;
          }
          return ReservedDeviceConfig{PciAddress::parse(*text)->to_string(), *reason};
        });
    if (read) config.reserved = std::move(*read);
  }

  void read_hygiene(const Value& hygiene, HygieneConfig& config) {
    if (!section(hygiene, "hygiene", kHygieneKeys)) return;
    firmware_ = &field(hygiene, "firmware");
    auto read = read_list<FirmwareConfig>(
        *firmware_, "hygiene.firmware", "a list of {vendor: 0x10de, device: 0x2330, sha256: [\"<64 hex digits>\"]}",
        [this](const Value& item, const std::string& path) { return read_firmware(item, path); });
    read_gpu_scrub(field(hygiene, "gpu_scrub"), config);
    const Value& erase_timeout = field(hygiene, "nvme_erase_timeout");
    const auto erase_read = read_duration(check_, erase_timeout, "hygiene.nvme_erase_timeout");
    config.nvme_erase_timeout = erase_read.value_or(config.nvme_erase_timeout);
    nvme_erase_timeout_ = Written::of(erase_timeout, erase_read.has_value());
    const Value& parallel = field(hygiene, "parallel");
    const auto parallel_read = check_.whole(parallel, "hygiene.parallel", 0, kMaxParallelCleanings);
    config.parallel = parallel_read.value_or(config.parallel);
    parallel_ = Written::of(parallel, parallel_read.has_value());
    deadlines_ = &field(hygiene, "deadlines");
    read_deadlines(*deadlines_, config);
    if (!read) return;
    for (std::size_t i = 0; i < read->size(); ++i) {
      for (std::size_t j = 0; j < i; ++j) {
        if ((*read)[i].vendor != (*read)[j].vendor || (*read)[i].device != (*read)[j].device) continue;
        const std::string path = "hygiene.firmware[" + std::to_string(i) + "]";
        check_.report(firmware_->items[i].at, path, "the device of hygiene.firmware[" + std::to_string(j) + "] again",
                      "one entry per vendor and device, listing every good image in its sha256");
        return;
      }
    }
    config.firmware = std::move(*read);
  }

  // hygiene.deadlines: a mapping of roles, each a mapping of its steps to durations.
  void read_deadlines(const Value& deadlines, HygieneConfig& config) {
    std::vector<std::string_view> roles;
    roles.reserve(kCleaningSteps.size());
    for (const auto& [role, steps] : kCleaningSteps) roles.push_back(role);
    if (!section(deadlines, "hygiene.deadlines", roles)) return;
    for (const auto& [role, steps] : kCleaningSteps) {
      const std::string path = "hygiene.deadlines." + std::string(role);
      const Value& of_role = field(deadlines, role);
      if (!section(of_role, path, steps)) continue;
      for (const auto step : steps) {
        const Value& value = field(of_role, step);
        if (value.is_null()) continue;
        if (auto read = read_duration(check_, value, path + "." + std::string(step))) {
          config.deadlines[std::string(role)][std::string(step)] = *read;
        }
      }
    }
  }

  void read_gpu_scrub(const Value& scrub, HygieneConfig& config) {
    gpu_scrub_ = &scrub;
    if (!section(scrub, "hygiene.gpu_scrub", kGpuScrubKeys)) return;
    const Value& argv = field(scrub, "argv");
    auto read = read_list<std::string>(
        argv, "hygiene.gpu_scrub.argv", "a list: the program's absolute path, then its arguments",
        [this](const Value& item, const std::string& at) { return check_.text(item, at); });
    if (read && !read->empty() && !read->front().starts_with("/")) {
      check_.report(argv.items.front().at, "hygiene.gpu_scrub.argv[0]", describe(argv.items.front()),
                    "the scrubber's absolute path: it is run as it is, with no shell and no PATH search");
      read.reset();
    }
    if (read) config.gpu_scrub_argv = std::move(*read);
    config.gpu_scrub_timeout =
        read_duration(check_, field(scrub, "timeout"), "hygiene.gpu_scrub.timeout").value_or(config.gpu_scrub_timeout);
  }

  std::optional<FirmwareConfig> read_firmware(const Value& item, const std::string& path) {
    if (!check_.mapping(item, path, {"vendor", "device", "sha256"})) return std::nullopt;
    const auto vendor = check_.pci_id(field(item, "vendor"), path + ".vendor");
    const auto device = check_.pci_id(field(item, "device"), path + ".device");
    auto digests = read_list<std::string>(
        field(item, "sha256"), path + ".sha256", "a list of SHA-256 digests, 64 hex digits each",
        [this](const Value& digest, const std::string& at) -> std::optional<std::string> {
          auto text = check_.text(digest, at);
          if (!text) return std::nullopt;
          std::transform(text->begin(), text->end(), text->begin(), [](unsigned char c) { return std::tolower(c); });
          if (text->size() != 64 || text->find_first_not_of("0123456789abcdef") != std::string::npos) {
            check_.report(digest.at, at, describe(digest), "64 hex digits, as sha256sum prints a ROM's digest");
            return std::nullopt;
          }
          return text;
        });
    if (!vendor || !device || !digests || digests->empty()) {
      if (field(item, "vendor").is_null() || field(item, "device").is_null() || field(item, "sha256").is_null() ||
          (digests && digests->empty())) {
        check_.report(item.at, path, describe(item),
                      "vendor, device and at least one sha256, like {vendor: 0x10de, device: 0x2330, sha256: [...]}");
      }
      return std::nullopt;
    }
    return FirmwareConfig{*vendor, *device, std::move(*digests)};
  }

  // A setting accepted is a setting applied: libvirt's managed hostdevs leave hostagent no ROM to
  // read, and give a GPU back to its host driver, not to vfio-pci where the scrubber runs.
  void check_hygiene_applied(const DaemonConfig& config) {
    if (config.devices.preparation == "hostagent") return;
    if (firmware_ != nullptr && !config.hygiene.firmware.empty()) {
      check_.report(firmware_->at, "hygiene.firmware", "a known-good list with devices.preparation \"libvirt\"",
                    "devices.preparation: hostagent (with libvirt's managed hostdevs hostagent reads no device's ROM), "
                    "or no hygiene.firmware");
    }
    if (gpu_scrub_ != nullptr && !config.hygiene.gpu_scrub_argv.empty()) {
      check_.report(gpu_scrub_->at, "hygiene.gpu_scrub", "a scrubber with devices.preparation \"libvirt\"",
                    "devices.preparation: hostagent (libvirt's managed hostdevs give a GPU back to its host driver, "
                    "where the scrubber does not run), or no hygiene.gpu_scrub");
    }
    if (nvme_erase_timeout_.value != nullptr) {
      check_.report(nvme_erase_timeout_.value->at, "hygiene.nvme_erase_timeout",
                    "an erase bound with devices.preparation \"libvirt\"",
                    "devices.preparation: hostagent (with libvirt's managed hostdevs hostagent erases no NVMe), or "
                    "no hygiene.nvme_erase_timeout");
    }
    // libvirt's managed hostdevs leave every step to libvirt: there is nothing to run at a time
    // or to bound.
    if (parallel_.value != nullptr) {
      check_.report(parallel_.value->at, "hygiene.parallel", "a cleaning bound with devices.preparation \"libvirt\"",
                    "devices.preparation: hostagent (with libvirt's managed hostdevs hostagent runs no cleaning "
                    "step), or no hygiene.parallel");
    }
    if (deadlines_ != nullptr && !deadlines_->is_null()) {
      check_.report(deadlines_->at, "hygiene.deadlines", "step deadlines with devices.preparation \"libvirt\"",
                    "devices.preparation: hostagent (with libvirt's managed hostdevs hostagent runs no cleaning "
                    "step), or no hygiene.deadlines");
    }
  }

  void read_api(const Value& api, ApiConfig& config) {
    if (!section(api, "api", kApiKeys)) return;
    read_listen(field(api, "listen"), config);
    read_tls(field(api, "tls"), config.tls);
    const Value& token = field(api, "token_file");
    const auto token_path = read_absolute_path(check_, token, "api.token_file", EmptyPath::none);
    config.token_file = token_path.value_or(config.token_file);
    token_file_ = Written::of(token, token_path.has_value());
    const Value& reader = field(api, "reader_token_file");
    const auto reader_path = read_absolute_path(check_, reader, "api.reader_token_file", EmptyPath::none);
    config.reader_token_file = reader_path.value_or(config.reader_token_file);
    reader_token_file_ = Written::of(reader, reader_path.has_value());
    config.audit_log = read_absolute_path(check_, field(api, "audit_log"), "api.audit_log", EmptyPath::none)
                           .value_or(config.audit_log);
    read_api_limits(field(api, "limits"), config.limits);
  }

  void read_placement(const Value& placement, PlacementConfig& config) {
    if (!section(placement, "placement", kPlacementKeys)) return;
    const Value& url = field(placement, "url");
    if (const auto text = check_.text(url, "placement.url")) {
      const bool web = text->rfind("http://", 0) == 0 || text->rfind("https://", 0) == 0;
      if (web || text->empty()) {
        config.url = *text;
      } else {
        check_.report(url.at, "placement.url", describe(url),
                      "Placement's endpoint, http://HOST:PORT or https://HOST:PORT");
      }
    }
    config.token_file =
        read_absolute_path(check_, field(placement, "token_file"), "placement.token_file", EmptyPath::none)
            .value_or(config.token_file);
    config.ca_file = read_absolute_path(check_, field(placement, "ca_file"), "placement.ca_file", EmptyPath::none)
                         .value_or(config.ca_file);
    // "" is the machine's host name (hostagentd settles it at start); anything else is a name.
    const Value& host_name = field(placement, "host_name");
    if (!check_.text(host_name, "placement.host_name").value_or("").empty()) {
      config.host_name = check_.name(host_name, "placement.host_name").value_or(config.host_name);
    }
    config.interval =
        read_duration(check_, field(placement, "interval"), "placement.interval").value_or(config.interval);
    config.claim_grace =
        read_duration(check_, field(placement, "claim_grace"), "placement.claim_grace").value_or(config.claim_grace);
  }

  void read_api_limits(const Value& limits, ApiLimitsConfig& config) {
    if (!section(limits, "api.limits", kApiLimitsKeys)) return;
    const auto duration = [&](std::string_view key, std::chrono::milliseconds fallback) {
      return read_duration(check_, field(limits, key), "api.limits." + std::string(key)).value_or(fallback);
    };
    const auto count = [&](std::string_view key, int least, int fallback) {
      return check_.whole(field(limits, key), "api.limits." + std::string(key), least, kMaxConnections)
          .value_or(fallback);
    };
    config.header_timeout = duration("header_timeout", config.header_timeout);
    config.request_timeout = duration("request_timeout", config.request_timeout);
    config.idle_timeout = duration("idle_timeout", config.idle_timeout);
    config.max_connections = count("max_connections", 2, config.max_connections);
    config.health_reserve = count("health_reserve", 1, config.health_reserve);
    config.max_connections_per_peer = count("max_connections_per_peer", 1, config.max_connections_per_peer);
    config.max_event_streams = count("max_event_streams", 1, config.max_event_streams);
    // The reserve is the last slots of max_connections: some must be left for everyone else.
    if (config.health_reserve >= config.max_connections) {
      const Value& reserve = field(limits, "health_reserve");
      const Value& written = reserve.is_null() ? field(limits, "max_connections") : reserve;
      check_.report(written.at, reserve.is_null() ? "api.limits.max_connections" : "api.limits.health_reserve",
                    describe(written) + " with " + std::to_string(config.health_reserve) + " of them the reserve and " +
                        std::to_string(config.max_connections) + " connections",
                    "api.limits.health_reserve below api.limits.max_connections");
    }
  }

  void read_common_names(const Value& names, TlsConfig& config) {
    if (names.is_null()) return;
    if (names.kind != Value::Kind::list) {
      check_.report(names.at, "api.tls.operator_common_names", describe(names), "a list of certificate common names");
      return;
    }
    std::vector<std::string> read;
    for (std::size_t i = 0; i < names.items.size(); ++i) {
      const Value& item = names.items[i];
      if (item.kind != Value::Kind::scalar || item.scalar.empty()) {
        check_.report(item.at, "api.tls.operator_common_names[" + std::to_string(i) + "]", describe(item),
                      "a certificate's subject common name (CN), like control-plane.example.net");
        continue;
      }
      read.push_back(item.scalar);
    }
    if (read.size() == names.items.size()) config.operator_common_names = std::move(read);
  }

  void read_listen(const Value& listen, ApiConfig& config) {
    if (listen.is_null()) return;
    if (listen.kind != Value::Kind::list || listen.items.empty()) {
      check_.report(listen.at, "api.listen", describe(listen) + (listen.kind == Value::Kind::list ? " (empty)" : ""),
                    "a list of one or more addresses, each " + std::string(kListenForms));
      return;
    }
    std::vector<std::string> addresses;
    for (std::size_t i = 0; i < listen.items.size(); ++i) {
      const Value& item = listen.items[i];
      const std::string path = "api.listen[" + std::to_string(i) + "]";
      const auto address = read_listen_address(check_, item, path);
      if (!address) continue;
      if (std::find(addresses.begin(), addresses.end(), item.scalar) != addresses.end()) {
        check_.report(item.at, path, describe(item) + " a second time", "each address once");
        continue;
      }
      addresses.push_back(item.scalar);
      if (address->kind == ListenAddress::Kind::tcp) tcp_listeners_.emplace_back(i, &item);
    }
    if (addresses.size() == listen.items.size()) config.listen = std::move(addresses);
  }

  void read_tls(const Value& tls, TlsConfig& config) {
    tls_ = Written::of(tls, true);
    if (!section(tls, "api.tls", kTlsSectionKeys)) {
      tls_.valid = tls.is_null();
      return;
    }
    std::vector<std::filesystem::path*> targets = {&config.certificate, &config.key, &config.client_ca};
    for (std::size_t i = 0; i < kTlsKeys.size(); ++i) {
      const std::string path = "api.tls." + std::string(kTlsKeys[i]);
      const auto file = read_absolute_path(check_, field(tls, kTlsKeys[i]), path, EmptyPath::none);
      if (file) *targets[i] = *file;
      if (!file && !field(tls, kTlsKeys[i]).is_null()) tls_.valid = false;
    }
    read_common_names(field(tls, "operator_common_names"), config);
    if (tls_.valid) check_tls_complete(tls, config);
  }

  // Half a TLS setup would either refuse every client or, without client_ca, accept any of them.
  void check_tls_complete(const Value& tls, const TlsConfig& config) {
    const std::vector<const std::filesystem::path*> files = {&config.certificate, &config.key, &config.client_ca};
    std::vector<std::string_view> set;
    std::vector<std::string_view> missing;
    for (std::size_t i = 0; i < files.size(); ++i) (files[i]->empty() ? missing : set).push_back(kTlsKeys[i]);
    if (set.empty() || missing.empty()) return;
    check_.report(tls.at, "api.tls", join_all(set) + " without " + join_all(missing),
                  "all of certificate, key and client_ca, or none of them");
    tls_.valid = false;
  }

  void check_libvirt_pair(const DaemonConfig& config) {
    const bool test_uri = is_test_uri(config.libvirt_uri);
    if (test_uri == (config.domain_type == "test") || !uri_.valid || !domain_type_.valid) return;
    const std::string uri = "libvirt.uri \"" + config.libvirt_uri + "\"";
    if (domain_type_.value != nullptr) {
      check_.report(domain_type_.value->at, "libvirt.domain_type", describe(*domain_type_.value) + " with " + uri,
                    test_uri ? "test, the only type libvirt's test driver runs (or a qemu:/// libvirt.uri)"
                             : "kvm or qemu (test needs libvirt.uri: test:///default)");
      return;
    }
    HA_ASSERT(uri_.value != nullptr);  // the defaults agree, so one of the two was written
    check_.report(uri_.value->at, "libvirt.uri", describe(*uri_.value) + " with libvirt.domain_type kvm (the default)",
                  "a qemu:/// URI, or libvirt.domain_type: test beside a test:/// URI");
  }

  // A simulated host is written to its own sysfs tree; a second root would silently be ignored.
  void check_host_pair(const DaemonConfig& config) {
    if (config.simulated_host.empty() || config.sysfs_root == "/" || !simulated_.valid || !sysfs_root_.valid) return;
    HA_ASSERT(simulated_.value != nullptr);
    check_.report(simulated_.value->at, "host.simulated",
                  describe(*simulated_.value) + " with host.sysfs_root \"" + config.sysfs_root.string() + "\"",
                  "only one of them: a simulated host brings its own sysfs tree (remove host.sysfs_root, or set "
                  "host.simulated: \"\")");
  }

  // Confining the host's processes to no CPU at all would leave them nowhere to run.
  void check_confinement(const DaemonConfig& config) {
    if (!config.confine_host_processes || !config.housekeeping_cpus.empty() || !housekeeping_cpus_.valid) return;
    HA_ASSERT(confine_host_processes_.value != nullptr);  // the default is false
    check_.report(confine_host_processes_.value->at, "host.confine_host_processes",
                  describe(*confine_host_processes_.value) + " with host.housekeeping_cpus empty",
                  "host.housekeeping_cpus listing the CPUs the host's own processes may use (like 0-7,96-103), "
                  "or host.confine_host_processes: false");
  }

  // A simulated host's tree is files that do not act on writes, so binding there would fail its own
  // checks: a simulated host gets libvirt's preparation unless the file asks for hostagent's.
  void settle_preparation(DaemonConfig& config) {
    if (config.simulated_host.empty() || !simulated_.valid || !preparation_.valid) return;
    if (preparation_.value == nullptr) {
      config.devices.preparation = "libvirt";
      return;
    }
    if (config.devices.preparation != "hostagent") return;
    check_.report(preparation_.value->at, "devices.preparation",
                  describe(*preparation_.value) + " with host.simulated \"" + config.simulated_host + "\"",
                  "libvirt on a simulated host (its sysfs tree does not act on writes)");
  }

  // Nothing reachable over the network is unauthenticated: a tcp listener needs client
  // certificates or a bearer token.
  void check_api_auth(const ApiConfig& config) {
    if (!tls_.valid || !token_file_.valid || !reader_token_file_.valid) return;
    const bool tls = !config.tls.certificate.empty();  // complete, or check_tls_complete said otherwise
    if (tls || !config.token_file.empty() || !config.reader_token_file.empty()) return;
    for (const auto& [index, item] : tcp_listeners_) {
      check_.report(item->at, "api.listen[" + std::to_string(index) + "]", describe(*item) + " with no authentication",
                    "api.tls (certificate, key and client_ca) or api.token_file set beside a tcp:// address");
    }
  }

  Checker check_;
  Written uri_, domain_type_, sysfs_root_, simulated_, preparation_, tls_, token_file_, reader_token_file_,
      housekeeping_cpus_, confine_host_processes_;
  std::vector<std::pair<std::size_t, const Value*>> tcp_listeners_;  // index in api.listen
  const Value* firmware_ = nullptr;                                  // hygiene.firmware as written
  const Value* gpu_scrub_ = nullptr;                                 // hygiene.gpu_scrub as written
  Written nvme_erase_timeout_;
  Written parallel_;                  // hygiene.parallel as written, where it was read
  const Value* deadlines_ = nullptr;  // hygiene.deadlines as written
};

}  // namespace

DaemonConfig read_config(const Value& root, std::vector<Problem>& problems) {
  return ConfigReader(problems).read(root);
}

}  // namespace hostagent::config::detail
