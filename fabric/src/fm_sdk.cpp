// The FabricManager over FM's SDK library. Every call FM's documentation lists (nv_fm_agent.h) is
// made as documented: fmLibInit once, fmConnect before the first call, each struct with its version
// word; every fmReturn_t becomes an Error here, worded for the operator who reads it. Calls are
// serialised: the SDK does not document its handle as safe to share between threads.
#include <dlfcn.h>

#include <algorithm>
#include <cstring>
#include <mutex>

#include "fm_abi.hpp"
#include "hostagent/fabric/fabric_manager.hpp"

namespace hostagent::fabric {
namespace {

const char* code_name(fm::fmReturn_t rc) {
  switch (rc) {
    case fm::FM_ST_SUCCESS:
      return "FM_ST_SUCCESS";
    case fm::FM_ST_BADPARAM:
      return "FM_ST_BADPARAM";
    case fm::FM_ST_GENERIC_ERROR:
      return "FM_ST_GENERIC_ERROR";
    case fm::FM_ST_NOT_SUPPORTED:
      return "FM_ST_NOT_SUPPORTED";
    case fm::FM_ST_UNINITIALIZED:
      return "FM_ST_UNINITIALIZED";
    case fm::FM_ST_TIMEOUT:
      return "FM_ST_TIMEOUT";
    case fm::FM_ST_VERSION_MISMATCH:
      return "FM_ST_VERSION_MISMATCH";
    case fm::FM_ST_IN_USE:
      return "FM_ST_IN_USE";
    case fm::FM_ST_NOT_CONFIGURED:
      return "FM_ST_NOT_CONFIGURED";
    case fm::FM_ST_CONNECTION_NOT_VALID:
      return "FM_ST_CONNECTION_NOT_VALID";
    case fm::FM_ST_NVLINK_ERROR:
      return "FM_ST_NVLINK_ERROR";
    default:
      return "an unknown code";
  }
}

// The one map from FM's codes to hostagent's: `what` is the call in words ("activating partition
// 3"). Codes a call gives meaning of its own (IN_USE, UNINITIALIZED) are read by that call first.
Error fm_error(fm::fmReturn_t rc, const std::string& what) {
  const std::string said = what + ": Fabric Manager answered " + code_name(rc) + " (" + std::to_string(rc) + ")";
  switch (rc) {
    case fm::FM_ST_CONNECTION_NOT_VALID:
    case fm::FM_ST_TIMEOUT:
      return {ErrorCode::unavailable, said + "; is nvidia-fabricmanager running, at the configured fabric.address?"};
    case fm::FM_ST_NOT_CONFIGURED:
      return {ErrorCode::unavailable,
              said + ": it is initialising, or restarted and waits to be told its active partitions"};
    case fm::FM_ST_NOT_SUPPORTED:
      return {ErrorCode::unsupported,
              said + ": it does not run in shared NVSwitch mode (FABRIC_MODE=1 in fabricmanager.cfg)"};
    case fm::FM_ST_VERSION_MISMATCH:
      return {ErrorCode::unsupported, said + ": its SDK does not take the version-1 structures hostagent passes"};
    case fm::FM_ST_IN_USE:
      return {ErrorCode::conflict, said};
    case fm::FM_ST_NVLINK_ERROR:
      return {ErrorCode::io_error, said + ": NVLink training failed"};
    case fm::FM_ST_BADPARAM:
      return {ErrorCode::not_found, said + ": no such partition, or an argument FM refuses"};
    default:
      return {ErrorCode::internal, said};
  }
}

// C strings FM filled, bounded by their buffers (a full buffer has no NUL).
std::string bounded(const char* text, size_t size) {
  return {text, strnlen(text, size)};
}

// FM names a device by its bus ID as NVML prints it, "%08X:%02X:%02X.%X": "00000000:1B:00.0", an
// 8-digit domain in upper case. PciAddress::parse reads the domain as a number of 4 or more hex
// digits of either case, so the kernel's form comes out of it.
Result<PciAddress> fm_pci_address(const char* text, size_t size, const std::string& what) {
  const std::string bus_id = bounded(text, size);
  auto address = PciAddress::parse(bus_id);
  if (address) return address;
  return Error{ErrorCode::parse_error, what + ": Fabric Manager named a device by '" + bus_id + "', not a PCI bus ID"};
}

struct Entry {
  fm::fmLibInit_fn* lib_init = nullptr;
  fm::fmLibShutdown_fn* lib_shutdown = nullptr;
  fm::fmConnect_fn* connect = nullptr;
  fm::fmDisconnect_fn* disconnect = nullptr;
  fm::fmGetSupportedFabricPartitions_fn* get_partitions = nullptr;
  fm::fmActivateFabricPartition_fn* activate = nullptr;
  fm::fmDeactivateFabricPartition_fn* deactivate = nullptr;
  fm::fmSetActivatedFabricPartitions_fn* set_activated = nullptr;
  fm::fmGetNvlinkFailedDevices_fn* get_failed = nullptr;
  fm::fmGetUnsupportedFabricPartitions_fn* get_unsupported = nullptr;
};

class FmSdk final : public FabricManager {
 public:
  FmSdk(FmEndpoint endpoint, void* library, Entry entry, bool initialised)
      : endpoint_(std::move(endpoint)), library_(library), entry_(entry), initialised_(initialised) {}
  FmSdk(const FmSdk&) = delete;
  FmSdk& operator=(const FmSdk&) = delete;
  ~FmSdk() override {
    if (handle_ != nullptr) entry_.disconnect(handle_);
    if (initialised_) entry_.lib_shutdown();
    dlclose(library_);
  }

  Result<numa::FabricReport> report() override {
    std::lock_guard lock(mutex_);
    // 132 KiB: on the heap, not on an operation thread's stack.
    auto list = std::make_unique<fm::fmFabricPartitionList_t>();
    list->version = fm::fmFabricPartitionList_version;
    const fm::fmReturn_t rc = call([&](fm::fmHandle_t h) { return entry_.get_partitions(h, list.get()); });
    numa::FabricReport report;
    if (rc == fm::FM_ST_NOT_CONFIGURED) {
      report.ready = false;
      return report;
    }
    if (rc != fm::FM_ST_SUCCESS) return fm_error(rc, kReadingPartitions);
    HA_TRY(report.partitions, read_partitions(*list));
    HA_TRY(report.unsupported, read_unsupported());
    HA_TRY_STATUS(read_failures(report));
    return report;
  }

  Status activate(numa::PartitionId partition) override {
    std::lock_guard lock(mutex_);
    const std::string what = "activating fabric partition " + std::to_string(partition);
    const fm::fmReturn_t rc = call([&](fm::fmHandle_t h) { return entry_.activate(h, partition); });
    if (rc == fm::FM_ST_SUCCESS) return ok_status();
    if (rc == fm::FM_ST_IN_USE) {
      return Error{ErrorCode::conflict, what +
                                            ": Fabric Manager answered FM_ST_IN_USE: the partition is active, or "
                                            "shares a GPU with one that is"};
    }
    return fm_error(rc, what);
  }

  Status deactivate(numa::PartitionId partition) override {
    std::lock_guard lock(mutex_);
    const fm::fmReturn_t rc = call([&](fm::fmHandle_t h) { return entry_.deactivate(h, partition); });
    // FM_ST_UNINITIALIZED from fmDeactivateFabricPartition: "specified partition is not activated"
    // (nv_fm_agent.h); the library itself is initialised for as long as this object lives.
    if (rc == fm::FM_ST_SUCCESS || rc == fm::FM_ST_UNINITIALIZED) return ok_status();
    return fm_error(rc, "deactivating fabric partition " + std::to_string(partition));
  }

  Status declare_active(const std::vector<numa::PartitionId>& partitions) override {
    std::lock_guard lock(mutex_);
    if (partitions.size() > fm::FM_MAX_FABRIC_PARTITIONS) {
      return Error{ErrorCode::internal, "declaring " + std::to_string(partitions.size()) +
                                            " active partitions: Fabric Manager takes at most 64"};
    }
    fm::fmActivatedFabricPartitionList_t list{};
    list.version = fm::fmActivatedFabricPartitionList_version;
    list.numPartitions = static_cast<unsigned>(partitions.size());
    std::copy(partitions.begin(), partitions.end(), list.partitionIds);
    const fm::fmReturn_t rc = call([&](fm::fmHandle_t h) { return entry_.set_activated(h, &list); });
    if (rc == fm::FM_ST_SUCCESS) return ok_status();
    return fm_error(rc, "declaring the active fabric partitions");
  }

 private:
  // Connects when there is no connection. FM_ST_CONNECTION_NOT_VALID from fmConnect is the SDK's
  // "the FM instance could not be reached".
  fm::fmReturn_t connect() {
    if (handle_ != nullptr) return fm::FM_ST_SUCCESS;
    fm::fmConnectParams_v1 params{};
    params.version = fm::fmConnectParams_version;
    // open_fabric_manager checked the address fits; params is zeroed, so it ends in a NUL.
    endpoint_.address.copy(params.addressInfo, sizeof(params.addressInfo) - 1);
    params.timeoutMs = static_cast<unsigned>(endpoint_.timeout.count());
    params.addressIsUnixSocket = endpoint_.unix_socket ? 1 : 0;
    const fm::fmReturn_t rc = entry_.connect(&params, &handle_);
    if (rc != fm::FM_ST_SUCCESS) handle_ = nullptr;
    return rc;
  }

  // Makes one SDK call on the connection. A connection FM no longer knows (it restarted, or went
  // and came back) is dropped and made again, once, and the call repeated.
  template <typename Call>
  fm::fmReturn_t call(Call&& sdk_call) {
    for (int attempt = 0; attempt < 2; ++attempt) {
      if (const fm::fmReturn_t rc = connect(); rc != fm::FM_ST_SUCCESS) return rc;
      const fm::fmReturn_t rc = sdk_call(handle_);
      if (rc != fm::FM_ST_CONNECTION_NOT_VALID) return rc;
      entry_.disconnect(handle_);
      handle_ = nullptr;
    }
    return fm::FM_ST_CONNECTION_NOT_VALID;
  }

  static constexpr const char* kReadingPartitions = "reading the fabric partitions";

  static Result<std::vector<numa::FabricPartition>> read_partitions(const fm::fmFabricPartitionList_t& list) {
    if (list.numPartitions > fm::FM_MAX_FABRIC_PARTITIONS) {
      return Error{ErrorCode::parse_error, std::string(kReadingPartitions) + ": Fabric Manager reported " +
                                               std::to_string(list.numPartitions) +
                                               " partitions, more than its own maximum of 64"};
    }
    std::vector<numa::FabricPartition> partitions;
    for (unsigned i = 0; i < list.numPartitions; ++i) {
      HA_TRY(auto partition, read_partition(list.partitionInfo[i]));
      partitions.push_back(std::move(partition));
    }
    return partitions;
  }

  static Result<numa::FabricPartition> read_partition(const fm::fmFabricPartitionInfo_t& info) {
    const std::string what = kReadingPartitions;
    if (info.numGpus == 0 || info.numGpus > fm::FM_MAX_NUM_GPUS) {
      return Error{ErrorCode::parse_error, what + ": partition " + std::to_string(info.partitionId) + " has " +
                                               std::to_string(info.numGpus) + " GPUs (1 to 16)"};
    }
    numa::FabricPartition partition{info.partitionId, info.isActive != 0, {}};
    for (unsigned g = 0; g < info.numGpus; ++g) {
      const fm::fmFabricPartitionGpuInfo_t& gpu = info.gpuInfo[g];
      HA_TRY(const PciAddress address, fm_pci_address(gpu.pciBusId, sizeof(gpu.pciBusId), what));
      partition.gpus.push_back({gpu.physicalId, address, gpu.numNvLinksAvailable, gpu.maxNumNvLinks});
    }
    return partition;
  }

  Result<std::vector<numa::PartitionId>> read_unsupported() {
    fm::fmUnsupportedFabricPartitionList_t list{};
    list.version = fm::fmUnsupportedFabricPartitionList_version;
    const fm::fmReturn_t rc = call([&](fm::fmHandle_t h) { return entry_.get_unsupported(h, &list); });
    if (rc != fm::FM_ST_SUCCESS) return fm_error(rc, "reading the unsupported fabric partitions");
    std::vector<numa::PartitionId> ids;
    for (unsigned i = 0; i < std::min<unsigned>(list.numPartitions, fm::FM_MAX_FABRIC_PARTITIONS); ++i) {
      ids.push_back(list.partitionInfo[i].partitionId);
    }
    return ids;
  }

  Status read_failures(numa::FabricReport& report) {
    auto failed = std::make_unique<fm::fmNvlinkFailedDevices_t>();
    failed->version = fm::fmNvlinkFailedDevices_version;
    const std::string what = "reading the devices with failed NVLinks";
    const fm::fmReturn_t rc = call([&](fm::fmHandle_t h) { return entry_.get_failed(h, failed.get()); });
    // Not served while FM runs in its resiliency (--restart) mode (nv_fm_agent.h).
    if (rc == fm::FM_ST_NOT_SUPPORTED) {
      report.failures_read = false;
      return ok_status();
    }
    if (rc != fm::FM_ST_SUCCESS) return fm_error(rc, what);
    for (unsigned i = 0; i < std::min<unsigned>(failed->numGpus, fm::FM_MAX_NUM_GPUS); ++i) {
      const auto& device = failed->gpuInfo[i];
      HA_TRY(const PciAddress address, fm_pci_address(device.pciBusId, sizeof(device.pciBusId), what));
      report.failed_gpus.push_back(address);
    }
    for (unsigned i = 0; i < std::min<unsigned>(failed->numSwitches, fm::FM_MAX_NUM_NVSWITCHES); ++i) {
      const auto& device = failed->switchInfo[i];
      HA_TRY(const PciAddress address, fm_pci_address(device.pciBusId, sizeof(device.pciBusId), what));
      report.failed_nvswitches.push_back(address);
    }
    return ok_status();
  }

  const FmEndpoint endpoint_;
  void* const library_;
  const Entry entry_;
  const bool initialised_;  // false: fmLibInit answered IN_USE, so another part of this process owns it
  mutable std::mutex mutex_;
  fm::fmHandle_t handle_ = nullptr;
};

template <typename Fn>
Status resolve(void* library, const char* name, Fn*& entry, const std::string& path) {
  void* symbol = dlsym(library, name);
  if (symbol == nullptr) {
    return Error{ErrorCode::unsupported, path + " has no " + name + ": not Fabric Manager's SDK, or one too old"};
  }
  entry = reinterpret_cast<Fn*>(symbol);  // NOLINT(cppcoreguidelines-pro-type-reinterpret-cast): dlsym's contract
  return ok_status();
}

Result<Entry> resolve_all(void* library, const std::string& path) {
  Entry e;
  HA_TRY_STATUS(resolve(library, "fmLibInit", e.lib_init, path));
  HA_TRY_STATUS(resolve(library, "fmLibShutdown", e.lib_shutdown, path));
  HA_TRY_STATUS(resolve(library, "fmConnect", e.connect, path));
  HA_TRY_STATUS(resolve(library, "fmDisconnect", e.disconnect, path));
  HA_TRY_STATUS(resolve(library, "fmGetSupportedFabricPartitions", e.get_partitions, path));
  HA_TRY_STATUS(resolve(library, "fmActivateFabricPartition", e.activate, path));
  HA_TRY_STATUS(resolve(library, "fmDeactivateFabricPartition", e.deactivate, path));
  HA_TRY_STATUS(resolve(library, "fmSetActivatedFabricPartitions", e.set_activated, path));
  HA_TRY_STATUS(resolve(library, "fmGetNvlinkFailedDevices", e.get_failed, path));
  HA_TRY_STATUS(resolve(library, "fmGetUnsupportedFabricPartitions", e.get_unsupported, path));
  return e;
}

}  // namespace

Result<std::unique_ptr<FabricManager>> open_fabric_manager(const FmEndpoint& endpoint) {
  if (endpoint.address.empty() || endpoint.address.size() >= fm::FM_MAX_STR_LENGTH) {
    return field_error("fabric.address", "give FM's address (1 to 255 characters), not '" + endpoint.address + "'");
  }
  void* library = dlopen(endpoint.library.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (library == nullptr) {
    const char* why = dlerror();
    return Error{ErrorCode::not_found, "Fabric Manager's SDK library " + endpoint.library + " cannot be opened (" +
                                           (why != nullptr ? why : "dlopen failed") +
                                           "): install the fabricmanager package of the host's driver branch, "
                                           "or name the library in fabric.library"};
  }
  auto entry = resolve_all(library, endpoint.library);
  if (!entry) {
    dlclose(library);
    return std::move(entry).error();
  }
  // FM_ST_IN_USE: the library is initialised already, by another user in this process.
  const fm::fmReturn_t rc = entry->lib_init();
  if (rc != fm::FM_ST_SUCCESS && rc != fm::FM_ST_IN_USE) {
    dlclose(library);
    return fm_error(rc, "initialising " + endpoint.library);
  }
  return std::unique_ptr<FabricManager>(std::make_unique<FmSdk>(endpoint, library, *entry, rc == fm::FM_ST_SUCCESS));
}

}  // namespace hostagent::fabric
