// A fake Fabric Manager SDK: libnvfm.so.1 with the SDK's entry points (fabric/src/fm_abi.hpp's
// declarations, NVIDIA's names and layout), behaving as nv_fm_agent.h documents each call, over an
// FM that the tests start, stop, restart and break through the fakefm_* functions below. It plays
// FM in shared NVSwitch mode on one 8-GPU baseboard, with its 15 partitions keyed by module ID
// (one of 8, two of 4, four of 2, eight of 1) and module IDs that the tests give in any PCI order.
//
// What FM documents and the fake does: every struct's version word checked (FM_ST_VERSION_MISMATCH);
// calls before fmLibInit refused (FM_ST_UNINITIALIZED); a connection to an FM that is not there, or
// at another address, refused (FM_ST_CONNECTION_NOT_VALID), and one made before FM restarted no
// longer valid; an active partition activated again, or one sharing a GPU with an active one,
// refused (FM_ST_IN_USE); an unknown or unsupported partition refused (FM_ST_BADPARAM); deactivating
// an inactive one answered FM_ST_UNINITIALIZED; after a restart in FM's resiliency mode the active
// set forgotten and nothing served (FM_ST_NOT_CONFIGURED) until fmSetActivatedFabricPartitions,
// and fmGetNvlinkFailedDevices not served at all (FM_ST_NOT_SUPPORTED); GPUs with failed access
// NVLinks excluded, their partitions listed as unsupported (FM's default GPU access NVLink failure
// mode). What it assumes where FM documents nothing is in docs/devices.md.
#include <algorithm>
#include <cctype>
#include <cstring>
#include <map>
#include <mutex>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "fm_abi.hpp"
#include "hgx_partitions.hpp"

namespace {

using namespace hostagent::fabric::fm;  // NOLINT(google-build-using-namespace): the SDK's names, as in C

struct Partition {
  unsigned id = 0;
  std::vector<unsigned> modules;
  bool active = false;
};

struct Connection {
  unsigned generation = 0;
};

struct FakeFm {
  std::mutex mutex;
  bool initialised = false;  // fmLibInit called, fmLibShutdown not
  bool running = false;
  bool shared_mode = true;
  bool awaiting_declaration = false;  // restarted in resiliency mode, not yet told its active set
  bool restarted = false;             // since fakefm_start: fmGetNvlinkFailedDevices is not served
  unsigned generation = 0;            // bumped when FM starts or restarts: older connections go invalid
  std::string address;
  bool unix_socket = false;
  std::map<unsigned, std::string> gpus;  // module ID -> PCI bus ID
  std::vector<Partition> partitions;
  std::set<std::string> failed_gpus, failed_nvswitches;
  std::set<Connection*> connections;
  std::map<std::string, unsigned> calls;
};

FakeFm& fm() {
  static FakeFm instance;
  return instance;
}

// The HGX 8-GPU baseboard's partitions, by module ID.
std::vector<Partition> baseboard_partitions() {
  std::vector<Partition> partitions;
  const auto& sets = hostagent::testing::hgx_8gpu_partitions();
  for (unsigned id = 0; id < sets.size(); ++id) partitions.push_back({id, {sets[id].begin(), sets[id].end()}, false});
  return partitions;
}

bool excluded(const FakeFm& f, const Partition& p) {
  return std::any_of(p.modules.begin(), p.modules.end(),
                     [&](unsigned module) { return f.failed_gpus.count(f.gpus.at(module)) > 0; });
}

bool overlaps(const Partition& a, const Partition& b) {
  return std::any_of(a.modules.begin(), a.modules.end(), [&](unsigned module) {
    return std::find(b.modules.begin(), b.modules.end(), module) != b.modules.end();
  });
}

Partition* find_partition(FakeFm& f, unsigned id) {
  for (Partition& p : f.partitions) {
    if (p.id == id) return &p;
  }
  return nullptr;
}

// What every call on a handle answers before its own work, FM_ST_SUCCESS when it may go on.
fmReturn_t check_handle(FakeFm& f, fmHandle_t handle, const char* call) {
  ++f.calls[call];
  if (!f.initialised) return FM_ST_UNINITIALIZED;
  auto* connection = static_cast<Connection*>(handle);
  if (f.connections.count(connection) == 0) return FM_ST_BADPARAM;
  if (!f.running || connection->generation != f.generation) return FM_ST_CONNECTION_NOT_VALID;
  if (!f.shared_mode) return FM_ST_NOT_SUPPORTED;
  return FM_ST_SUCCESS;
}

// check_handle, then the struct the call fills or reads: present, and of the version it expects.
template <typename Param>
fmReturn_t check_call(FakeFm& f, fmHandle_t handle, const char* call, const Param* param, unsigned int version) {
  if (const fmReturn_t rc = check_handle(f, handle, call); rc != FM_ST_SUCCESS) return rc;
  if (param == nullptr) return FM_ST_BADPARAM;
  return param->version == version ? FM_ST_SUCCESS : FM_ST_VERSION_MISMATCH;
}

// NVML's form of a bus ID, which FM's SDK reports: an 8-digit domain, upper-case hex.
std::string nvml_bus_id(const std::string& kernel_form) {
  const size_t domain_digits = kernel_form.find(':');
  std::string out = std::string(domain_digits < 8 ? 8 - domain_digits : 0, '0') + kernel_form;
  std::transform(out.begin(), out.end(), out.begin(),
                 [](unsigned char c) { return static_cast<char>(std::toupper(c)); });
  return out;
}

void copy_text(char* to, size_t size, const std::string& from) {
  std::strncpy(to, from.c_str(), size - 1);
  to[size - 1] = '\0';
}

// A device FM found with failed NVLinks: port 0 of it, named by NVML's form of its bus ID.
void failed_device(fmNvlinkFailedDeviceInfo_t& info, const std::string& bus_id) {
  copy_text(info.pciBusId, sizeof(info.pciBusId), nvml_bus_id(bus_id));
  info.numPorts = 1;
  info.portNum[0] = 0;
}

}  // namespace

extern "C" {

__attribute__((visibility("default"))) fmReturn_t fmLibInit() {
  FakeFm& f = fm();
  std::lock_guard lock(f.mutex);
  ++f.calls["fmLibInit"];
  if (f.initialised) return FM_ST_IN_USE;
  f.initialised = true;
  return FM_ST_SUCCESS;
}

__attribute__((visibility("default"))) fmReturn_t fmLibShutdown() {
  FakeFm& f = fm();
  std::lock_guard lock(f.mutex);
  ++f.calls["fmLibShutdown"];
  if (!f.initialised) return FM_ST_UNINITIALIZED;
  for (Connection* connection : f.connections) delete connection;
  f.connections.clear();
  f.initialised = false;
  return FM_ST_SUCCESS;
}

__attribute__((visibility("default"))) fmReturn_t fmConnect(fmConnectParams_v1* params, fmHandle_t* handle) {
  FakeFm& f = fm();
  std::lock_guard lock(f.mutex);
  ++f.calls["fmConnect"];
  if (!f.initialised) return FM_ST_UNINITIALIZED;
  if (params == nullptr || handle == nullptr) return FM_ST_BADPARAM;
  if (params->version != fmConnectParams_version) return FM_ST_VERSION_MISMATCH;
  std::string address(params->addressInfo, strnlen(params->addressInfo, sizeof(params->addressInfo)));
  // "a.b.c.d" is FM's default port (FM_CMD_PORT_NUMBER).
  if (!params->addressIsUnixSocket && address.find(':') == std::string::npos) {
    address += ":" + std::to_string(FM_CMD_PORT_NUMBER);
  }
  std::string listening = f.address;
  if (!f.unix_socket && listening.find(':') == std::string::npos) {
    listening += ":" + std::to_string(FM_CMD_PORT_NUMBER);
  }
  if (!f.running || (params->addressIsUnixSocket != 0) != f.unix_socket || address != listening) {
    return FM_ST_CONNECTION_NOT_VALID;
  }
  auto* connection = new Connection{f.generation};
  f.connections.insert(connection);
  *handle = connection;
  return FM_ST_SUCCESS;
}

__attribute__((visibility("default"))) fmReturn_t fmDisconnect(fmHandle_t handle) {
  FakeFm& f = fm();
  std::lock_guard lock(f.mutex);
  ++f.calls["fmDisconnect"];
  if (!f.initialised) return FM_ST_UNINITIALIZED;
  auto* connection = static_cast<Connection*>(handle);
  if (f.connections.erase(connection) == 0) return FM_ST_BADPARAM;
  delete connection;
  return FM_ST_SUCCESS;
}

__attribute__((visibility("default"))) fmReturn_t fmGetSupportedFabricPartitions(fmHandle_t handle,
                                                                                 fmFabricPartitionList_t* list) {
  FakeFm& f = fm();
  std::lock_guard lock(f.mutex);
  if (const fmReturn_t rc =
          check_call(f, handle, "fmGetSupportedFabricPartitions", list, fmFabricPartitionList_version);
      rc != FM_ST_SUCCESS)
    return rc;
  if (f.awaiting_declaration) return FM_ST_NOT_CONFIGURED;
  list->numPartitions = 0;
  list->maxNumPartitions = static_cast<unsigned>(FM_MAX_FABRIC_PARTITIONS);
  for (const Partition& p : f.partitions) {
    fmFabricPartitionInfo_t& info = list->partitionInfo[list->numPartitions++];
    info.partitionId = p.id;
    info.isActive = p.active ? 1 : 0;
    info.numGpus = static_cast<unsigned>(p.modules.size());
    for (size_t g = 0; g < p.modules.size(); ++g) {
      fmFabricPartitionGpuInfo_t& gpu = info.gpuInfo[g];
      gpu.physicalId = p.modules[g];
      copy_text(gpu.uuid, sizeof(gpu.uuid), "GPU-fake-" + std::to_string(p.modules[g]));
      copy_text(gpu.pciBusId, sizeof(gpu.pciBusId), nvml_bus_id(f.gpus.at(p.modules[g])));
      gpu.maxNumNvLinks = 18;
      gpu.numNvLinksAvailable = f.failed_gpus.count(f.gpus.at(p.modules[g])) > 0 ? 0 : 18;
      gpu.nvlinkLineRateMBps = 50000;
    }
  }
  return FM_ST_SUCCESS;
}

__attribute__((visibility("default"))) fmReturn_t fmActivateFabricPartition(fmHandle_t handle,
                                                                            fmFabricPartitionId_t id) {
  FakeFm& f = fm();
  std::lock_guard lock(f.mutex);
  if (const fmReturn_t rc = check_handle(f, handle, "fmActivateFabricPartition"); rc != FM_ST_SUCCESS) return rc;
  if (f.awaiting_declaration) return FM_ST_NOT_CONFIGURED;
  Partition* partition = find_partition(f, id);
  if (partition == nullptr || excluded(f, *partition)) return FM_ST_BADPARAM;
  for (const Partition& other : f.partitions) {
    if (other.active && (other.id == id || overlaps(other, *partition))) return FM_ST_IN_USE;
  }
  partition->active = true;
  return FM_ST_SUCCESS;
}

__attribute__((visibility("default"))) fmReturn_t fmDeactivateFabricPartition(fmHandle_t handle,
                                                                              fmFabricPartitionId_t id) {
  FakeFm& f = fm();
  std::lock_guard lock(f.mutex);
  if (const fmReturn_t rc = check_handle(f, handle, "fmDeactivateFabricPartition"); rc != FM_ST_SUCCESS) return rc;
  if (f.awaiting_declaration) return FM_ST_NOT_CONFIGURED;
  Partition* partition = find_partition(f, id);
  if (partition == nullptr) return FM_ST_BADPARAM;
  if (!partition->active) return FM_ST_UNINITIALIZED;  // "specified partition is not activated"
  partition->active = false;
  return FM_ST_SUCCESS;
}

__attribute__((visibility("default"))) fmReturn_t fmSetActivatedFabricPartitions(
    fmHandle_t handle, fmActivatedFabricPartitionList_t* list) {
  FakeFm& f = fm();
  std::lock_guard lock(f.mutex);
  const fmReturn_t rc =
      check_call(f, handle, "fmSetActivatedFabricPartitions", list, fmActivatedFabricPartitionList_version);
  if (rc != FM_ST_SUCCESS) return rc;
  if (list->numPartitions > FM_MAX_FABRIC_PARTITIONS) return FM_ST_BADPARAM;
  // Documented for "after its restart" only; the fake refuses it at any other time.
  if (!f.awaiting_declaration) return FM_ST_NOT_SUPPORTED;
  std::vector<Partition*> declared;
  for (unsigned i = 0; i < list->numPartitions; ++i) {
    Partition* partition = find_partition(f, list->partitionIds[i]);
    if (partition == nullptr) return FM_ST_BADPARAM;
    for (const Partition* other : declared) {
      if (overlaps(*other, *partition)) return FM_ST_BADPARAM;
    }
    declared.push_back(partition);
  }
  for (Partition* partition : declared) partition->active = true;
  f.awaiting_declaration = false;
  return FM_ST_SUCCESS;
}

__attribute__((visibility("default"))) fmReturn_t fmGetNvlinkFailedDevices(fmHandle_t handle,
                                                                           fmNvlinkFailedDevices_t* failed) {
  FakeFm& f = fm();
  std::lock_guard lock(f.mutex);
  if (const fmReturn_t rc = check_call(f, handle, "fmGetNvlinkFailedDevices", failed, fmNvlinkFailedDevices_version);
      rc != FM_ST_SUCCESS)
    return rc;
  if (f.restarted) return FM_ST_NOT_SUPPORTED;  // "not supported ... in resiliency restart (--restart) mode"
  failed->numGpus = 0;
  failed->numSwitches = 0;
  for (const std::string& gpu : f.failed_gpus) failed_device(failed->gpuInfo[failed->numGpus++], gpu);
  for (const std::string& nvswitch : f.failed_nvswitches) {
    failed_device(failed->switchInfo[failed->numSwitches++], nvswitch);
  }
  return FM_ST_SUCCESS;
}

__attribute__((visibility("default"))) fmReturn_t fmGetUnsupportedFabricPartitions(
    fmHandle_t handle, fmUnsupportedFabricPartitionList_t* list) {
  FakeFm& f = fm();
  std::lock_guard lock(f.mutex);
  if (const fmReturn_t rc =
          check_call(f, handle, "fmGetUnsupportedFabricPartitions", list, fmUnsupportedFabricPartitionList_version);
      rc != FM_ST_SUCCESS)
    return rc;
  if (f.awaiting_declaration) return FM_ST_NOT_CONFIGURED;
  list->numPartitions = 0;
  for (const Partition& p : f.partitions) {
    if (!excluded(f, p)) continue;
    fmUnsupportedFabricPartitionInfo_t& info = list->partitionInfo[list->numPartitions++];
    info.partitionId = p.id;
    info.numGpus = static_cast<unsigned>(p.modules.size());
    std::copy(p.modules.begin(), p.modules.end(), info.gpuPhysicalIds);
  }
  return FM_ST_SUCCESS;
}

// The tests' hand on FM.

// FM starts afresh in shared NVSwitch mode at `address` with the baseboard `gpus`, "MODULE=BUS_ID"
// joined by ';' (eight of them): no partition active, no NVLink failed. -1 when `gpus` is not that.
__attribute__((visibility("default"))) int fakefm_start(const char* address, int unix_socket, const char* gpus) {
  FakeFm& f = fm();
  std::lock_guard lock(f.mutex);
  std::map<unsigned, std::string> board;
  std::istringstream in(gpus);
  std::string item;
  while (std::getline(in, item, ';')) {
    const size_t eq = item.find('=');
    if (eq == std::string::npos) return -1;
    board[static_cast<unsigned>(std::stoul(item.substr(0, eq)))] = item.substr(eq + 1);
  }
  if (board.size() != 8 || board.begin()->first != 1 || board.rbegin()->first != 8) return -1;
  f.gpus = board;
  f.partitions = baseboard_partitions();
  f.address = address;
  f.unix_socket = unix_socket != 0;
  f.running = true;
  f.shared_mode = true;
  f.awaiting_declaration = false;
  f.restarted = false;
  f.failed_gpus.clear();
  f.failed_nvswitches.clear();
  f.calls.clear();
  ++f.generation;
  return 0;
}

// FM stops (its service stopped, or it crashed): connections and new connects fail.
__attribute__((visibility("default"))) void fakefm_stop() {
  FakeFm& f = fm();
  std::lock_guard lock(f.mutex);
  f.running = false;
}

// FM restarts in its resiliency mode: the running VMs keep their NVLinks, FM forgets which
// partitions are active, and serves nothing until told.
__attribute__((visibility("default"))) void fakefm_restart() {
  FakeFm& f = fm();
  std::lock_guard lock(f.mutex);
  f.running = true;
  ++f.generation;
  for (Partition& p : f.partitions) p.active = false;
  f.awaiting_declaration = true;
  f.restarted = true;
}

// FM runs in another mode than shared NVSwitch (bare metal, FABRIC_MODE=0): the partition calls
// answer FM_ST_NOT_SUPPORTED.
__attribute__((visibility("default"))) void fakefm_set_shared_mode(int shared) {
  FakeFm& f = fm();
  std::lock_guard lock(f.mutex);
  f.shared_mode = shared != 0;
}

// FM found the NVLinks of the device at `bus_id` failed when it started (a GPU's access links, or an
// NVSwitch's): a GPU is excluded and its partitions become unsupported.
__attribute__((visibility("default"))) void fakefm_fail_nvlinks(const char* bus_id, int nvswitch) {
  FakeFm& f = fm();
  std::lock_guard lock(f.mutex);
  (nvswitch != 0 ? f.failed_nvswitches : f.failed_gpus).insert(bus_id);
}

// The active partitions' IDs, at most `max` of them into `ids`; returns how many are active.
__attribute__((visibility("default"))) unsigned fakefm_active(unsigned* ids, unsigned max) {
  FakeFm& f = fm();
  std::lock_guard lock(f.mutex);
  unsigned count = 0;
  for (const Partition& p : f.partitions) {
    if (!p.active) continue;
    if (count < max) ids[count] = p.id;
    ++count;
  }
  return count;
}

// How many times the SDK entry point `name` was called since FM started.
__attribute__((visibility("default"))) unsigned fakefm_calls(const char* name) {
  FakeFm& f = fm();
  std::lock_guard lock(f.mutex);
  const auto it = f.calls.find(name);
  return it == f.calls.end() ? 0 : it->second;
}

// Whether fmLibInit was called and fmLibShutdown not since.
__attribute__((visibility("default"))) int fakefm_initialised() {
  FakeFm& f = fm();
  std::lock_guard lock(f.mutex);
  return f.initialised ? 1 : 0;
}

}  // extern "C"
