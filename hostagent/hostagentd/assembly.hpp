// hostagent/cli/assembly: the composition root. From a configuration to the parts a service runs
// with: the host model (real sysfs, or a built-in simulated host written out as a sysfs tree), the
// devices readied at start, the templates, libvirt. Only the programs (and the tests and benches
// that start a daemon as hostagentd does) assemble; the daemon's core knows no adapter's make.
#pragma once

#include <filesystem>
#include <functional>
#include <memory>
#include <string>

#include "hostagent/common/result.hpp"
#include "hostagent/config/daemon_config.hpp"
#include "hostagent/daemon/host_readers.hpp"
#include "hostagent/daemon/service_parts.hpp"
#include "hostagent/fleet/placement_client.hpp"

namespace hostagent::cli {

// Told each stage of start-up as it is reached ("host discovered: ..."): systemd's STATUS= line.
using StartupProgress = std::function<void(const std::string&)>;

// Discovers the host (or writes the simulated one), loads the templates, connects to libvirt,
// prepares the host's devices. Call before starting any thread of your own: hwloc discovery sets
// the environment.
Result<daemon::ServiceParts> assemble_parts(const config::DaemonConfig& config,
                                            const StartupProgress& progress = nullptr);

// What the daemon reads from the running host under sysfs_root (a sysfs and procfs tree: "/" on a
// real host, the simulated host's tree otherwise): free hugepages, the bus, device health, ACS and
// ATS through libpci, the VFs' RDMA devices; and the cloud-init seed writer. invalid_argument when
// the root is not a directory.
Result<daemon::HostReaders> sysfs_readers(const std::filesystem::path& sysfs_root);

// The Placement client the sync runs with (daemon::PlacementSync::start): placement.url, the token
// read from placement.token_file, placement.ca_file. invalid_argument for a URL or token file that
// cannot be used.
Result<std::unique_ptr<fleet::PlacementClient>> placement_client(const config::PlacementConfig& config);

}  // namespace hostagent::cli
