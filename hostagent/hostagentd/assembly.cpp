// cli/assembly: from a configuration to the parts of a running service (see assembly.hpp).
#include "assembly.hpp"

#include <fstream>
#include <string_view>
#include <system_error>

#include "hostagent/cloudinit/nocloud_seed.hpp"
#include "hostagent/common/sysfs_writer.hpp"
#include "hostagent/common/text_file.hpp"
#include "hostagent/devices/device_preparer.hpp"
#include "hostagent/discovery/device_health_reader.hpp"
#include "hostagent/discovery/discovery.hpp"
#include "hostagent/discovery/hugepage_reader.hpp"
#include "hostagent/hugepages/hugepage_pools.hpp"
#include "hostagent/numa/host_use.hpp"
#include "hostagent/nvme/nvme_controller.hpp"
#include "hostagent/simhost/sim_host.hpp"
#include "hostagent/sriov/rdma_devices.hpp"
#include "hostagent/sriov/vf_netlink.hpp"
#include "hostagent/state/vm_record.hpp"
#include "hostagent/systemd/log.hpp"
#include "hostagent/vfio/config_space_access.hpp"
#include "hostagent/vfio/p2p_settings.hpp"

namespace hostagent::cli {
namespace {

using namespace hostagent::daemon;
using systemd::log;
using systemd::LogLevel;

namespace fs = std::filesystem;

// The simulated host's sysfs tree, written under the state directory.
fs::path simulated_root(const config::DaemonConfig& config) {
  return config.state_directory / "simulated-host";
}

std::vector<std::pair<uint16_t, uint16_t>> gpu_ids(const config::DaemonConfig& config) {
  std::vector<std::pair<uint16_t, uint16_t>> ids;
  for (const auto& id : config.devices.gpu_ids) ids.emplace_back(id.vendor, id.device);
  return ids;
}

// The id on the first line of `path` when it has `length` characters of `alphabet`; else "", and
// `without` is logged (what the daemon does without it).
std::string id_in_file(const fs::path& path, std::size_t length, std::string_view alphabet,
                       const std::string& without) {
  std::ifstream in(path);
  std::string id;
  if (in && std::getline(in, id) && id.size() == length && id.find_first_not_of(alphabet) == std::string::npos) {
    return id;
  }
  log(LogLevel::warning, path.string() + " holds no " + without);
  return "";
}

// The host's identity, for VF MACs unique across a fabric: systemd's machine ID (machine-id(5)),
// 32 lower-case hex digits, made at first boot and kept across reboots. Without one (a container
// image), the MACs come from each VM's UUID alone.
std::string machine_id() {
  return id_in_file("/etc/machine-id", 32, "0123456789abcdef",
                    "machine ID (machine-id(5)): VF MACs come from each VM's UUID alone, not from this host's "
                    "identity; run systemd-machine-id-setup");
}

// Which boot of the host this is (random(4): a UUID the kernel makes at each boot). The daemon
// compares it with the one it recorded to tell a host reboot from a restart of its own.
std::string boot_id() {
  return id_in_file("/proc/sys/kernel/random/boot_id", 36, "0123456789abcdef-",
                    "boot id: a host reboot cannot be told from a restart of hostagentd, and "
                    "operations.on_host_boot is not applied");
}

// The operator's reservations, worded as the model shows them.
std::vector<numa::HostUse> reservations(const config::DaemonConfig& config) {
  std::vector<numa::HostUse> out;
  for (const auto& reserved : config.devices.reserved) {
    // The reader checked each address; one that does not parse is left out, never guessed.
    if (auto address = PciAddress::parse(reserved.address); address.ok()) {
      out.push_back({*address, "reserved: " + reserved.reason});
    }
  }
  return out;
}

// What discovery found, with the operator's own: the GPUs named by id, the devices reserved.
numa::HostModel finish_discovery(numa::HostModel model, const config::DaemonConfig& config) {
  discovery::treat_as_gpus(model, gpu_ids(config));
  for (const auto& missing : numa::mark_host_use(model, reservations(config))) {
    log(LogLevel::warning,
        config.source + ": devices.reserved names " + missing.address.to_string() +
            ", which this host does not have: check the address (lspci -D)",
        {.device = missing.address.to_string()});
  }
  return model;
}

Result<numa::HostModel> discover_live(const config::DaemonConfig& config) {
  HA_TRY(auto model, discovery::discover_from_sysfs(config.sysfs_root));
  return finish_discovery(std::move(model), config);
}

Result<numa::HostModel> discover_host(const config::DaemonConfig& config) {
  if (config.simulated_host.empty()) return discover_live(config);
  HA_TRY(const auto spec, simhost::builtin_host(config.simulated_host));
  // Kept across restarts, as a real host's sysfs is (a pool the daemon raised stays raised), and
  // written again when missing, cut short, or made by other writers or for another host.
  const fs::path root = simulated_root(config);
  HA_TRY(const bool written, simhost::ensure_sysfs_tree(spec, root));
  log(LogLevel::info, "simulated host " + config.simulated_host + ": " + root.string() +
                          (written ? " written" : " kept from the last start"));
  HA_TRY(auto model, discovery::discover_from_sysfs(root));
  return finish_discovery(std::move(model), config);
}

// host.hugepages: each pool raised before anything is placed (never lowered), what the kernel gave
// logged, and the model read again when a pool changed. At every start: the pools are the kernel's
// and outlive the daemon, so a restart finds them held and writes nothing.
Status reserve_hugepages(const config::DaemonConfig& config, const fs::path& sysfs_root, ServiceParts& parts) {
  if (config.host_hugepages.empty()) return ok_status();
  std::vector<hugepages::PoolRequest> requests;
  for (const auto& pool : config.host_hugepages) requests.push_back({pool.node, pool.page_size_bytes, pool.pages});
  HA_TRY(const auto sysfs, SysfsRoot::open(sysfs_root));
  const auto writer = make_sysfs_writer(sysfs_root);
  HA_TRY(const auto reserved, hugepages::reserve_pools(sysfs, *writer, requests));
  bool changed = false;
  for (const auto& pool : reserved) {
    log(pool.short_of_request() ? LogLevel::warning : LogLevel::info, "hugepages: " + hugepages::describe(pool));
    changed = changed || pool.written;
  }
  if (!changed) return ok_status();
  HA_TRY(auto model, discovery::discover_from_sysfs(sysfs_root));
  parts.host = finish_discovery(std::move(model), config);
  return ok_status();
}

Result<std::map<std::string, vmtemplates::VmTemplate>> load_templates(const config::DaemonConfig& config) {
  // The operator's directory is optional (nothing to override yet); at least one must exist.
  std::vector<fs::path> existing;
  std::error_code ec;
  for (const auto& dir : config.template_directories) {
    if (fs::is_directory(dir, ec)) existing.push_back(dir);
  }
  if (existing.empty()) {
    std::string listed;
    for (const auto& dir : config.template_directories) listed += (listed.empty() ? "" : ", ") + dir.string();
    return Error{ErrorCode::not_found, config.source + ": templates.directories: none of " + listed +
                                           " exists: install the shipped templates there, or list a directory "
                                           "that holds templates"};
  }
  HA_TRY(auto all, vmtemplates::load_template_dirs(existing));
  std::map<std::string, vmtemplates::VmTemplate> shapes;
  for (auto& [name, shape] : all) {
    if (!shape.abstract) shapes.emplace(name, std::move(shape));
  }
  return shapes;
}

sriov::LinkState link_state_of(const std::string& text) {
  if (text == "enable") return sriov::LinkState::enable;
  if (text == "disable") return sriov::LinkState::disable;
  return sriov::LinkState::automatic;
}

// The operator's devices section as the devices module's options. The reader checked every field:
// a PF here that is not an address is a broken invariant, but it still reads as an error.
Result<devices::PreparationOptions> preparation_options(const config::DaemonConfig& config) {
  const config::DevicesConfig& configured = config.devices;
  devices::PreparationOptions options;
  options.bind_at_start = configured.bind_at_start;
  for (const auto& pf : configured.sriov) {
    HA_TRY(const auto address, PciAddress::parse(pf.pf));
    options.vf_counts.push_back({address, pf.vfs});
  }
  const auto& vf = configured.vf;
  options.vf_defaults = sriov::VfSettings{.mac = std::nullopt,
                                          .vlan = vf.vlan,
                                          .qos = vf.qos,
                                          .trust = vf.trust,
                                          .spoofchk = vf.spoofchk,
                                          .link_state = link_state_of(vf.link_state),
                                          .min_tx_rate_mbps = vf.min_tx_rate_mbps,
                                          .max_tx_rate_mbps = vf.max_tx_rate_mbps};
  options.releasable_drivers = configured.releasable_drivers;
  options.reserved = reservations(config);
  for (const auto& firmware : config.hygiene.firmware) {
    options.hygiene.firmware[{firmware.vendor, firmware.device}] = firmware.sha256;
  }
  options.hygiene.gpu_scrub = config.hygiene.gpu_scrub_argv;
  options.hygiene.gpu_scrub_timeout = config.hygiene.gpu_scrub_timeout;
  options.hygiene.nvme_erase.timeout = config.hygiene.nvme_erase_timeout;
  return options;
}

Result<devices::HostDeviceParts> host_device_parts(const config::DaemonConfig& config) {
  devices::HostDeviceParts parts;
  parts.sysfs_root = config.sysfs_root;
  parts.writer = make_sysfs_writer(config.sysfs_root);
  HA_TRY(parts.config_space, vfio::make_libpci_config_space(config.sysfs_root));
  parts.netlink = sriov::make_libnl_vf_netlink();
  parts.nvme = nvme::host_opener();
  HA_TRY(parts.options, preparation_options(config));
  parts.records_directory = config.state_directory / "devices";
  parts.held_at_boot = config.state_directory / "held-at-boot";
  return parts;
}

// hostagent's own preparation: the host readied once (VFs made, GPU groups bound), the model
// discovered again when that changed it, then the preparer for each VM.
Status prepare_devices(const config::DaemonConfig& config, ServiceParts& parts) {
  if (config.devices.preparation != "hostagent") {
    parts.devices = devices::make_libvirt_managed_preparer(
        config.simulated_host.empty() ? devices::ManagedHost::real : devices::ManagedHost::simulated);
    return ok_status();
  }
  HA_TRY(auto host_parts, host_device_parts(config));
  HA_TRY(const bool changed, devices::prepare_host_devices(parts.host, host_parts));
  if (changed) {
    HA_TRY(parts.host, discover_live(config));
  }
  HA_TRY(parts.devices, devices::make_host_device_preparer(parts.host, std::move(host_parts)));
  return ok_status();
}

}  // namespace

Result<daemon::ServiceParts> assemble_parts(const config::DaemonConfig& config, const StartupProgress& progress) {
  const auto report = [&progress](const std::string& stage) {
    if (progress) progress(stage);
  };
  ServiceParts parts;
  parts.config = config;
  HA_TRY(parts.host, discover_host(config));
  report("host discovered: " + std::to_string(parts.host.numa_nodes.size()) + " NUMA nodes, " +
         std::to_string(parts.host.pci_devices.size()) + " PCI functions");
  const fs::path sysfs_root = config.simulated_host.empty() ? config.sysfs_root : simulated_root(config);
  HA_TRY(parts.readers, sysfs_readers(sysfs_root));
  HA_TRY_STATUS(reserve_hugepages(config, sysfs_root, parts));
  HA_TRY(parts.templates, load_templates(config));
  parts.host_id = machine_id();
  parts.boot_id = boot_id();
  virt::LibvirtOptions options;
  options.uri = config.libvirt_uri;
  options.metadata_namespace = std::string(state::kMetadataNamespace);
  options.connect_timeout = config.libvirt_connect_timeout;
  options.reconnect_interval = config.libvirt_reconnect_interval;
  // Said before the wait, so `systemctl status` shows what start-up waits for while libvirtd starts.
  report("connecting to libvirt " + config.libvirt_uri + " (waiting up to " +
         std::to_string(config.libvirt_connect_timeout.count()) + " ms)");
  HA_TRY(parts.hypervisor, virt::connect_libvirt(options));
  report("libvirt connected: " + config.libvirt_uri);
  HA_TRY_STATUS(prepare_devices(config, parts));
  report("devices prepared (" + config.devices.preparation + ")");
  parts.clock = make_system_clock();
  log(LogLevel::info, "host: " + std::to_string(parts.host.numa_nodes.size()) + " NUMA nodes; " +
                          std::to_string(parts.templates.size()) + " templates; libvirt " + config.libvirt_uri);
  return parts;
}

Result<daemon::HostReaders> sysfs_readers(const fs::path& sysfs_root) {
  daemon::HostReaders readers;
  readers.write_seed = cloudinit::write_nocloud_seed;
  HA_TRY(const auto sysfs, SysfsRoot::open(sysfs_root));
  readers.free_hugepages = [sysfs](const numa::HostModel& host) { return discovery::read_free_hugepages(sysfs, host); };
  readers.on_bus = [sysfs](const PciAddress& address) {
    return sysfs.exists("/sys/bus/pci/devices/" + address.to_string());
  };
  readers.device_health = [sysfs](const numa::HostModel& host) { return discovery::read_device_health(sysfs, host); };
  // libpci is opened at each read: a reading is rare (GET /v1/host, at most once a second), and
  // libpci caches what it read of a device's config space.
  readers.p2p_state = [sysfs](const numa::HostModel& host) -> Result<std::vector<vfio::P2pState>> {
    HA_TRY(const auto config, vfio::make_libpci_config_space(sysfs.root()));
    return vfio::current_state(host, *config);
  };
  readers.rdma_devices_of = [sysfs](const PciAddress& function) {
    return sriov::read_rdma_devices_of(sysfs, function);
  };
  return readers;
}

Result<std::unique_ptr<fleet::PlacementClient>> placement_client(const config::PlacementConfig& config) {
  HA_TRY(const auto token, read_token_file(config.token_file, "placement.token_file"));
  return fleet::PlacementClient::make({config.url, token, config.ca_file});
}

}  // namespace hostagent::cli
