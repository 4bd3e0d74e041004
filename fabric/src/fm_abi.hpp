// fabric/fm_abi: the part of Fabric Manager's SDK (libnvfm.so.1, NVIDIA's nv_fm_agent.h and
// nv_fm_types.h) that hostagent calls, declared here to the same binary layout: NVIDIA's licence
// does not let the headers be copied, and a host without FM must still build and run hostagent, so
// the library is opened at run time (fm_sdk.cpp) and nothing links against it. The names are the
// SDK's, so that each line can be checked against NVIDIA's documentation; the sizes are asserted
// below, computed by hand from the documented fields. The tests' fake library
// (tests/fabric/fake_nvfm.cpp) implements these same declarations.
#pragma once

#include <cstddef>

namespace hostagent::fabric::fm {

// fmReturn_t: FM's result codes (nv_fm_types.h), as plain ints across the C ABI.
using fmReturn_t = int;
inline constexpr fmReturn_t FM_ST_SUCCESS = 0;
inline constexpr fmReturn_t FM_ST_BADPARAM = -1;
inline constexpr fmReturn_t FM_ST_GENERIC_ERROR = -2;
inline constexpr fmReturn_t FM_ST_NOT_SUPPORTED = -3;
inline constexpr fmReturn_t FM_ST_UNINITIALIZED = -4;
inline constexpr fmReturn_t FM_ST_TIMEOUT = -5;
inline constexpr fmReturn_t FM_ST_VERSION_MISMATCH = -6;
inline constexpr fmReturn_t FM_ST_IN_USE = -7;
inline constexpr fmReturn_t FM_ST_NOT_CONFIGURED = -8;
inline constexpr fmReturn_t FM_ST_CONNECTION_NOT_VALID = -9;
inline constexpr fmReturn_t FM_ST_NVLINK_ERROR = -10;

using fmHandle_t = void*;
using fmFabricPartitionId_t = unsigned int;

inline constexpr size_t FM_MAX_STR_LENGTH = 256;
inline constexpr size_t FM_UUID_BUFFER_SIZE = 80;
inline constexpr size_t FM_DEVICE_PCI_BUS_ID_BUFFER_SIZE = 32;
inline constexpr size_t FM_MAX_NUM_GPUS = 16;
inline constexpr size_t FM_MAX_NUM_NVSWITCHES = 12;
inline constexpr size_t FM_MAX_FABRIC_PARTITIONS = 64;
inline constexpr size_t FM_MAX_NUM_NVLINK_PORTS = 64;
// FM listens for its SDK on this TCP port unless configured otherwise (FM_CMD_PORT_NUMBER).
inline constexpr unsigned FM_CMD_PORT_NUMBER = 6666;

// MAKE_FM_PARAM_VERSION: each versioned struct carries its size in the low 24 bits and its
// version above; FM answers FM_ST_VERSION_MISMATCH to any other value.
constexpr unsigned int make_version(size_t size, unsigned int version) {
  return static_cast<unsigned int>(size) | (version << 24);
}

// fmConnectParams_v1. FM's later SDKs add a v2 (an address type, for vsock) and still take v1.
struct fmConnectParams_v1 {
  unsigned int version;
  char addressInfo[FM_MAX_STR_LENGTH];  // "a.b.c.d" or "a.b.c.d:port", or a unix socket's path
  unsigned int timeoutMs;
  unsigned int addressIsUnixSocket;
};

struct fmFabricPartitionGpuInfo_t {
  unsigned int physicalId;  // the GPU's module ID
  char uuid[FM_UUID_BUFFER_SIZE];
  char pciBusId[FM_DEVICE_PCI_BUS_ID_BUFFER_SIZE];
  unsigned int numNvLinksAvailable;
  unsigned int maxNumNvLinks;
  unsigned int nvlinkLineRateMBps;
};

struct fmFabricPartitionInfo_t {
  fmFabricPartitionId_t partitionId;
  unsigned int isActive;
  unsigned int numGpus;
  fmFabricPartitionGpuInfo_t gpuInfo[FM_MAX_NUM_GPUS];
};

// fmFabricPartitionList_v2, whose version word says 1 (fmFabricPartitionList_version2).
struct fmFabricPartitionList_t {
  unsigned int version;
  unsigned int numPartitions;
  unsigned int maxNumPartitions;
  fmFabricPartitionInfo_t partitionInfo[FM_MAX_FABRIC_PARTITIONS];
};

struct fmActivatedFabricPartitionList_t {
  unsigned int version;
  unsigned int numPartitions;
  fmFabricPartitionId_t partitionIds[FM_MAX_FABRIC_PARTITIONS];
};

struct fmNvlinkFailedDeviceInfo_t {
  char uuid[FM_UUID_BUFFER_SIZE];
  char pciBusId[FM_DEVICE_PCI_BUS_ID_BUFFER_SIZE];
  unsigned int numPorts;
  unsigned int portNum[FM_MAX_NUM_NVLINK_PORTS];
};

struct fmNvlinkFailedDevices_t {
  unsigned int version;
  unsigned int numGpus;
  unsigned int numSwitches;
  fmNvlinkFailedDeviceInfo_t gpuInfo[FM_MAX_NUM_GPUS];
  fmNvlinkFailedDeviceInfo_t switchInfo[FM_MAX_NUM_NVSWITCHES];
};

struct fmUnsupportedFabricPartitionInfo_t {
  fmFabricPartitionId_t partitionId;
  unsigned int numGpus;
  unsigned int gpuPhysicalIds[FM_MAX_NUM_GPUS];
};

struct fmUnsupportedFabricPartitionList_t {
  unsigned int version;
  unsigned int numPartitions;
  fmUnsupportedFabricPartitionInfo_t partitionInfo[FM_MAX_FABRIC_PARTITIONS];
};

// The layout, field by field from the documentation (4-byte unsigned ints, char arrays, no padding).
static_assert(sizeof(fmConnectParams_v1) == 4 + 256 + 4 + 4);
static_assert(sizeof(fmFabricPartitionGpuInfo_t) == 4 + 80 + 32 + 3 * 4);
static_assert(sizeof(fmFabricPartitionInfo_t) == 3 * 4 + 16 * 128);
static_assert(sizeof(fmFabricPartitionList_t) == 3 * 4 + 64 * 2060);
static_assert(sizeof(fmActivatedFabricPartitionList_t) == 2 * 4 + 64 * 4);
static_assert(sizeof(fmNvlinkFailedDeviceInfo_t) == 80 + 32 + 4 + 64 * 4);
static_assert(sizeof(fmNvlinkFailedDevices_t) == 3 * 4 + (16 + 12) * 372);
static_assert(sizeof(fmUnsupportedFabricPartitionInfo_t) == 2 * 4 + 16 * 4);
static_assert(sizeof(fmUnsupportedFabricPartitionList_t) == 2 * 4 + 64 * 72);

inline constexpr unsigned int fmConnectParams_version = make_version(sizeof(fmConnectParams_v1), 1);
inline constexpr unsigned int fmFabricPartitionList_version = make_version(sizeof(fmFabricPartitionList_t), 1);
inline constexpr unsigned int fmActivatedFabricPartitionList_version =
    make_version(sizeof(fmActivatedFabricPartitionList_t), 1);
inline constexpr unsigned int fmNvlinkFailedDevices_version = make_version(sizeof(fmNvlinkFailedDevices_t), 1);
inline constexpr unsigned int fmUnsupportedFabricPartitionList_version =
    make_version(sizeof(fmUnsupportedFabricPartitionList_t), 1);

// The entry points hostagent resolves with dlsym, as function types.
using fmLibInit_fn = fmReturn_t();
using fmLibShutdown_fn = fmReturn_t();
using fmConnect_fn = fmReturn_t(fmConnectParams_v1*, fmHandle_t*);
using fmDisconnect_fn = fmReturn_t(fmHandle_t);
using fmGetSupportedFabricPartitions_fn = fmReturn_t(fmHandle_t, fmFabricPartitionList_t*);
using fmActivateFabricPartition_fn = fmReturn_t(fmHandle_t, fmFabricPartitionId_t);
using fmDeactivateFabricPartition_fn = fmReturn_t(fmHandle_t, fmFabricPartitionId_t);
using fmSetActivatedFabricPartitions_fn = fmReturn_t(fmHandle_t, fmActivatedFabricPartitionList_t*);
using fmGetNvlinkFailedDevices_fn = fmReturn_t(fmHandle_t, fmNvlinkFailedDevices_t*);
using fmGetUnsupportedFabricPartitions_fn = fmReturn_t(fmHandle_t, fmUnsupportedFabricPartitionList_t*);

}  // namespace hostagent::fabric::fm
