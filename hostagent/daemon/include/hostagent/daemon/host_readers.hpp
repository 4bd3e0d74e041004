// hostagent/daemon/host_readers: what the daemon reads from (and writes to) the running host beyond
// its model and its devices' preparer, each a function made by the composition root
// (hostagentd/assembly: sysfs, libpci, cloud-init's writer) or given by a test. The daemon makes
// none of them: an owner is handed the reader it uses, and a test varies one without writing a
// sysfs tree. A reader left empty is a host that has none of what it reads, as each says.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <utility>
#include <vector>

#include "hostagent/cloudinit/nocloud_seed.hpp"
#include "hostagent/common/pci_address.hpp"
#include "hostagent/common/result.hpp"
#include "hostagent/numa/device_health.hpp"
#include "hostagent/numa/host_model.hpp"
#include "hostagent/sriov/rdma_devices.hpp"
#include "hostagent/vfio/p2p_settings.hpp"

namespace hostagent::daemon {

struct HostReaders {
  // Free 1 GiB and 2 MiB pages now, by (NUMA node, page size in bytes). Empty: placement counts
  // pages by its own accounting alone (a host not read from sysfs).
  using FreePages = std::map<std::pair<int, uint64_t>, uint64_t>;
  using FreePagesReader = std::function<Result<FreePages>(const numa::HostModel&)>;
  FreePagesReader free_hugepages;
  // Whether a PCI function is on the bus now (a device cleaned is proven back before it is
  // offered again). Empty: every function is.
  std::function<bool(const PciAddress&)> on_bus;
  // The devices' health now (links, presence, errors), read by the health poller. Empty: the
  // host reports none (device_health answers unsupported).
  std::function<Result<std::vector<numa::DeviceHealth>>(const numa::HostModel&)> device_health;
  // ACS and ATS as each bridge and device has them now (GET /v1/host). Empty: as discovered.
  std::function<Result<std::vector<vfio::P2pState>>(const numa::HostModel&)> p2p_state;
  // The RDMA devices registered under a NIC function, read at create while the host's driver still
  // holds its VFs. Empty: none (a host without RDMA).
  using RdmaDevicesReader = std::function<Result<std::vector<sriov::RdmaDevice>>(const PciAddress&)>;
  RdmaDevicesReader rdma_devices_of;
  // Writes a VM's NoCloud seed image. Required: every create that has a seed writes it here.
  std::function<Status(const std::filesystem::path&, const cloudinit::NoCloudSeed&)> write_seed;
};

}  // namespace hostagent::daemon
