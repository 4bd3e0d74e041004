// hostagent/config: the daemon's configuration file (/etc/hostagent/hostagent.yaml), read and
// validated. Every key is documented in docs/configuration.md; every error names file:line:column,
// the key, what was found and what is expected, and all of a file's errors are reported at once.
#pragma once

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "hostagent/common/result.hpp"
#include "hostagent/numa/device_health.hpp"

namespace hostagent::config {

struct TlsConfig {
  std::filesystem::path certificate;  // PEM; required for a tcp listener unless a token file is set
  std::filesystem::path key;
  std::filesystem::path client_ca;  // clients must present a certificate signed by this CA
  // Clients whose certificate's subject CN is listed are operators; any other the CA signed, readers.
  std::vector<std::string> operator_common_names;
};

// api.limits: what keeps one client from holding the API (docs/api.md, "Connections"). The same
// defaults as api::ServerLimits, which a test holds them to.
struct ApiLimitsConfig {
  std::chrono::milliseconds header_timeout{5000};
  std::chrono::milliseconds request_timeout{10000};
  std::chrono::milliseconds idle_timeout{60000};
  int max_connections = 256;
  int health_reserve = 16;  // below max_connections
  int max_connections_per_peer = 64;
  int max_event_streams = 32;
};

struct ApiConfig {
  // "unix:/run/hostagent/hostagent.sock" or "tcp://HOST:PORT". TCP needs tls (client certificates) or a
  // token file: nothing reachable over the network is unauthenticated.
  std::vector<std::string> listen = {"unix:/run/hostagent/hostagent.sock"};
  TlsConfig tls;
  std::filesystem::path token_file;         // the operators' bearer token, one line; "" for none
  std::filesystem::path reader_token_file;  // the readers' bearer token (GET only); "" for none
  std::filesystem::path audit_log = "/var/log/hostagent/audit.log";  // one JSON line per change; "" for none
  ApiLimitsConfig limits;
};

// One PF whose VFs the daemon creates at start (sriov_numvfs).
struct SriovPfConfig {
  std::string pf;  // PCI address, "0000:3b:00.0"
  int vfs = 0;
};

// What a VF is set to over netlink before a VM gets it (besides its MAC, which the VM's request or
// a generated one gives). When the VM lets it go, it returns to the neutral setting instead.
struct VfConfigDefaults {
  int vlan = 0;  // 0: untagged
  int qos = 0;
  bool trust = false;
  bool spoofchk = true;
  std::string link_state = "auto";  // auto | enable | disable
  uint32_t min_tx_rate_mbps = 0;
  uint32_t max_tx_rate_mbps = 0;  // 0: unlimited
};

struct PciDeviceIdConfig {
  uint16_t vendor = 0;
  uint16_t device = 0;
};

// A device the host keeps for itself whatever discovery finds: never placed, bound or reset.
struct ReservedDeviceConfig {
  std::string address;  // a PCI address, checked by the reader
  std::string reason;   // shown wherever the device is: "BMC uplink", "boot disk mirror"
};

struct DevicesConfig {
  // hostagent: vfio/ and sriov/ bind, configure and restore the devices, and the domain XML says
  // managed='no'. libvirt: libvirt's managed hostdevs bind at start and restore at stop.
  std::string preparation = "hostagent";
  bool bind_at_start = true;               // GPUs and NVSwitches to vfio-pci when the daemon starts
  std::vector<PciDeviceIdConfig> gpu_ids;  // more devices to treat as GPUs (stand-ins in test hosts)
  std::vector<SriovPfConfig> sriov;        // VFs to create at start
  VfConfigDefaults vf;
  // Drivers a GPU's or VF's IOMMU group member may be taken from; a member on any other driver
  // means the host uses it, and the group is refused. Empty: the built-in list (numa/host_use).
  std::vector<std::string> releasable_drivers;
  std::vector<ReservedDeviceConfig> reserved;
  // When a device's AER counters or link take it out of placement (devices.health).
  numa::HealthThresholds health;
};

// A device's known-good expansion ROM images (a GPU's VBIOS, a NIC's boot ROM), by SHA-256: what the
// cleaning between tenants compares the ROM it reads with (issue 19).
struct FirmwareConfig {
  uint16_t vendor = 0;
  uint16_t device = 0;
  std::vector<std::string> sha256;  // lower-case hex, 64 digits each
};

// What cleaning a device between tenants checks it against. Applied only where hostagent prepares
// the devices itself (devices.preparation: hostagent).
struct HygieneConfig {
  std::vector<FirmwareConfig> firmware;
  // The GPU memory scrubber: its argv ("{address}" in any argument is the GPU's PCI address), run
  // while the GPU is on vfio-pci; exit status 0 passes. Empty: none, and each GPU's cleaning says
  // "not scrubbed: no scrubber configured".
  std::vector<std::string> gpu_scrub_argv;
  std::chrono::milliseconds gpu_scrub_timeout{std::chrono::minutes(10)};
  // How long an NVMe controller's sanitize or format may take before its erase fails (and the
  // controller is quarantined).
  std::chrono::milliseconds nvme_erase_timeout{std::chrono::minutes(30)};
  // How many devices are cleaned at a time; 0: every device waiting, all at once.
  int parallel = 0;
  // Each cleaning step's deadline by role and step, as written ({"gpu": {"reset": 2m}}); a step
  // not named here has its default (daemon/device_lifecycle: cleaning_deadline). A step past its
  // deadline quarantines its device; whatever it waits on holds no other device's cleaning.
  std::map<std::string, std::map<std::string, std::chrono::milliseconds>> deadlines;
};

// host.hugepages: one per-node pool hostagentd raises at start (hugepages/hugepage_pools).
struct HugepagePoolConfig {
  int node = 0;
  uint64_t page_size_bytes = 0;  // 2 MiB or 1 GiB
  uint64_t pages = 0;
  bool operator==(const HugepagePoolConfig&) const = default;
};

// placement: the fleet's OpenStack Placement, where hostagentd publishes its host and its VMs'
// allocations (docs/placement.md). No url: the host is in no fleet.
struct PlacementConfig {
  std::string url;                            // http(s)://HOST:PORT[/PATH]; "" none
  std::filesystem::path token_file;           // its one line is the X-Auth-Token; "" none (noauth2 wants "admin")
  std::filesystem::path ca_file;              // https: the CA that signed Placement's certificate; "" the system's
  std::string host_name;                      // the root provider's name; "" the machine's host name
  std::chrono::milliseconds interval{60000};  // a full reconcile at least this often
  std::chrono::milliseconds claim_grace{std::chrono::minutes(10)};  // a claim no VM took is removed after
};

struct DaemonConfig {
  std::string source;  // the file it came from, for messages; "<embedded>" for the built-in default

  // libvirt
  std::string libvirt_uri = "qemu:///system";
  std::string domain_type = "kvm";  // kvm | qemu | test
  std::string emulator;             // "" leaves libvirt's default
  std::chrono::milliseconds libvirt_connect_timeout{60000};
  std::chrono::milliseconds libvirt_reconnect_interval{2000};

  // host
  std::filesystem::path sysfs_root = "/";
  std::string simulated_host;          // "" or a built-in simulated host (vela1, vela2, h200ib, workstation, quirks)
  std::vector<int> housekeeping_cpus;  // never pinned to vCPUs; emulator threads run there
  // At start, AllowedCPUs=housekeeping_cpus on system.slice, user.slice and init.scope (through
  // systemd's D-Bus API), so the host's own processes stay off the VMs' CPUs. Needs housekeeping_cpus.
  bool confine_host_processes = false;
  // Pools raised at each start (never lowered), so a create finds its pages reserved.
  std::vector<HugepagePoolConfig> host_hugepages;

  // templates: shipped first, the operator's after (a later directory overrides an earlier one)
  std::vector<std::filesystem::path> template_directories = {"/usr/share/hostagent/templates",
                                                             "/etc/hostagent/templates.d"};

  // images: where the boot_image a create request names may lie, every symlink followed (the
  // templates' own boot.image is the operator's choice and is not limited)
  std::vector<std::filesystem::path> image_directories = {"/var/lib/hostagent/images"};

  // storage: the libvirt storage pool where each VM's disk (a qcow2 overlay over its image) is made
  std::string storage_pool = "default";

  // state
  std::filesystem::path state_directory = "/var/lib/hostagent";  // the operation journal lives here
  std::filesystem::path console_log_directory = "/var/log/hostagent/console";

  // operations
  int operation_workers = 8;                      // threads running operations (each may block on libvirt)
  std::chrono::milliseconds stop_timeout{60000};  // graceful stop: ACPI, then forced after this long
  // After the host reboots (its boot id changed since the daemon last ran), which of hostagent's VMs
  // start again, devices prepared first: "restore" those that were running when it went down,
  // "start" all of them, "stay_off" none.
  std::string on_host_boot = "restore";

  DevicesConfig devices;
  HygieneConfig hygiene;

  ApiConfig api;
  PlacementConfig placement;
};

// Parses YAML text; `source` names it in messages. Keys left out keep the defaults above.
Result<DaemonConfig> parse_config(const std::string& yaml, const std::string& source);

// Reads and parses a file; ErrorCode::not_found when it does not exist.
Result<DaemonConfig> load_config(const std::filesystem::path& file);

// The embedded default: libvirt's in-process test:/// driver (domain type "test") on the simulated
// host `simulated_host`, state under `scratch_directory`, boot images from its images/. Runs on any
// machine, as root or not.
DaemonConfig embedded_default_config(const std::string& simulated_host, const std::filesystem::path& scratch_directory);

}  // namespace hostagent::config
