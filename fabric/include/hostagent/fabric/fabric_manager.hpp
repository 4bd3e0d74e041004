// fabric: NVIDIA Fabric Manager in shared NVSwitch mode (FABRIC_MODE=1), reached through its SDK,
// libnvfm.so.1, opened at run time: FM keeps the NVSwitches on the host and activates one GPU
// partition for each VM. It reports what FM said and does what it is told; which partition a VM
// takes, and when, is placement's and the daemon's.
#pragma once

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "hostagent/common/result.hpp"
#include "hostagent/numa/fabric_partitions.hpp"

namespace hostagent::fabric {

// Where FM's SDK interface listens and the library that speaks to it (configuration: fabric.*).
struct FmEndpoint {
  std::string library = "libnvfm.so.1";  // a name dlopen searches for, or an absolute path
  // FM's FM_CMD_BIND_INTERFACE and FM_CMD_PORT_NUMBER ("127.0.0.1", "127.0.0.1:6666"), or with
  // unix_socket its FM_CMD_UNIX_SOCKET_PATH.
  std::string address = "127.0.0.1";
  bool unix_socket = false;
  std::chrono::milliseconds timeout{5000};  // fmConnect's timeoutMs
};

class FabricManager {
 public:
  virtual ~FabricManager() = default;

  // The partitions FM supports with their state, the unsupported ones, and the devices with failed
  // NVLinks (FM cannot say after a restart in its resiliency mode: failures_read is then false).
  // FM_ST_NOT_CONFIGURED, FM initialising or restarted and waiting for declare_active, is a report
  // with ready = false and nothing else.
  virtual Result<numa::FabricReport> report() = 0;
  // ErrorCode::conflict when the partition is active or shares a GPU with an active one;
  // io_error when its NVLinks failed to train.
  virtual Status activate(numa::PartitionId partition) = 0;
  // A partition that is not active is already what is asked: an undo run twice (a kill between the
  // call and its record) succeeds.
  virtual Status deactivate(numa::PartitionId partition) = 0;
  // Tells an FM restarted in its resiliency mode which partitions are active (their VMs ran on
  // through the restart). Until told, even that none is, FM serves nothing else: report() says
  // ready = false.
  virtual Status declare_active(const std::vector<numa::PartitionId>& partitions) = 0;
};

// Opens the SDK library, resolves its entry points and initialises it; connects on first use.
// ErrorCode::not_found names the library when dlopen cannot find it, unsupported a symbol it lacks.
Result<std::unique_ptr<FabricManager>> open_fabric_manager(const FmEndpoint& endpoint);

}  // namespace hostagent::fabric
