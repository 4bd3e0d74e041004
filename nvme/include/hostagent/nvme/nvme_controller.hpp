// hostagent/nvme/nvme_controller: one NVMe controller's admin queue, through the kernel's nvme
// driver (/dev/nvmeN, and /dev/ngNnM for each namespace's I/O) or, for a controller on vfio-pci, its
// own queues driven through VFIO: what the controller says it can
// do, its namespaces, Format NVM, Sanitize and its progress, one block read, and, on a PF, which
// namespaces each VF's controller holds. An interface so the erase is tested against a fake that
// keeps data the way a controller does; host_opener gives the real ones.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "hostagent/common/result.hpp"

namespace hostagent::nvme {

// Format NVM's NSID for every namespace of the controller (NVMe Base 2.0, 5.23).
inline constexpr uint32_t kAllNamespaces = 0xffffffff;

// Identify Controller's fields the erase decides by (NVMe Base 2.0, Figure 275).
struct ControllerInfo {
  std::string model;
  uint16_t oacs = 0;     // bit 1 Format NVM, bit 3 Namespace Management, bit 7 Virtualization Management
  uint8_t fna = 0;       // bit 0 a format applies to all namespaces, bit 2 cryptographic erase by format
  uint32_t sanicap = 0;  // bit 0 crypto erase, bit 1 block erase, bit 2 overwrite
  uint8_t cmic = 0;      // bit 1: the NVM subsystem may hold two or more controllers
};

inline constexpr uint16_t kOacsFormat = 1U << 1;
inline constexpr uint16_t kOacsNamespaceManagement = 1U << 3;
inline constexpr uint16_t kOacsVirtualizationManagement = 1U << 7;
inline constexpr uint8_t kFnaFormatAll = 1U << 0;
inline constexpr uint8_t kFnaCryptoErase = 1U << 2;
inline constexpr uint32_t kSanicapCryptoErase = 1U << 0;
inline constexpr uint32_t kSanicapBlockErase = 1U << 1;
inline constexpr uint8_t kCmicMultipleControllers = 1U << 1;

struct NamespaceInfo {
  uint32_t nsid = 0;
  uint64_t blocks = 0;      // NSZE
  uint32_t block_size = 0;  // of the LBA format it is formatted with
  // DLFEAT bits 2:0: what a deallocated block reads as: 1 all 0x00, 2 all 0xff, 0 not said.
  uint8_t dlfeat = 0;
};

// Format NVM's Secure Erase Settings (SES).
enum class SecureErase : uint8_t { none = 0, user_data = 1, cryptographic = 2 };
// Sanitize's action (SANACT).
enum class SanitizeAction : uint8_t { block_erase = 2, crypto_erase = 4 };

// The Sanitize Status log page (NVMe Base 2.0, 5.16.1.25): SSTAT bits 2:0, SPROG.
struct SanitizeProgress {
  enum class State : uint8_t { never = 0, completed = 1, in_progress = 2, failed = 3, completed_no_deallocate = 4 };
  State state = State::never;
  uint16_t progress = 0;  // of 65536, while in progress
};

class Controller {
 public:
  virtual ~Controller() = default;
  virtual Result<ControllerInfo> identify() = 0;
  // The active namespaces, with their size and what their deallocated blocks read as.
  virtual Result<std::vector<NamespaceInfo>> namespaces() = 0;
  // Format NVM of `nsid` (or kAllNamespaces) in its current LBA format; returns when the
  // controller completes it, or fails after `timeout`.
  virtual Status format(uint32_t nsid, SecureErase erase, std::chrono::milliseconds timeout) = 0;
  // Starts a sanitize of the whole NVM subsystem; it completes in the background (sanitize_progress).
  virtual Status sanitize(SanitizeAction action) = 0;
  virtual Result<SanitizeProgress> sanitize_progress() = 0;
  // One block of `nsid` at `lba`, read from the media (no page cache).
  virtual Result<std::vector<uint8_t>> read_block(uint32_t nsid, uint64_t lba) = 0;
  // On a PF with virtualization management: the controller ID of VF `vf_number` (1-based, as
  // VFN counts), nullopt when the PF lists none for it.
  virtual Result<std::optional<uint16_t>> secondary_controller(uint16_t vf_number) = 0;
  // How many controllers the NVM subsystem holds (Identify, controller list from ID 0): this one
  // and any other port or function a sanitize or an all-namespace format would reach through it.
  virtual Result<int> subsystem_controllers() = 0;
  // With Namespace Management: every namespace of the subsystem, attached here or not (Identify,
  // allocated namespace list), so a namespace a tenant detached is not missed.
  virtual Result<std::vector<uint32_t>> allocated_namespaces() = 0;
  // The namespaces of the subsystem attached to controller `cntlid` (each allocated namespace's
  // attached controller list).
  virtual Result<std::vector<uint32_t>> namespaces_attached_to(uint16_t cntlid) = 0;
};

// Opens a controller, on whichever side of the host it is:
//  - open: through the kernel's nvme driver, by its character device (/dev/nvme0) and its
//    namespaces' generic character devices (/dev/ng0n1), which I/O passthrough reads without the
//    page cache. `namespace_devices` is asked when a block is first read, and again while a
//    namespace has none yet: the driver scans namespaces in the background after a bind or a format.
//  - open_vfio: a function on vfio-pci, by its PCI address and IOMMU group, driven from user space
//    through VFIO. No host driver binds it, so the host never has a block device of it: this is how
//    a tenant's controller is erased (docs/devices.md, the exposure model). The group must be
//    viable and not open elsewhere (a VM's QEMU holds it while the VM runs).
using NamespaceDevices = std::function<std::vector<std::string>()>;
class ControllerOpener {
 public:
  virtual ~ControllerOpener() = default;
  virtual Result<std::unique_ptr<Controller>> open(const std::string& controller_device,
                                                   NamespaceDevices namespace_devices) = 0;
  virtual Result<std::unique_ptr<Controller>> open_vfio(const std::string& address, int group) = 0;
};

// The real ones: libnvme's passthrough (never nvme-cli), and the controller's queues through VFIO.
std::unique_ptr<ControllerOpener> host_opener();

}  // namespace hostagent::nvme
