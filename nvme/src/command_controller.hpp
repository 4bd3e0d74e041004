// nvme/command_controller (private): the Controller interface as NVMe commands, whatever carries
// them. The one place that encodes each command (NVMe Base 2.0: Identify 5.17, Format NVM 5.23,
// Sanitize 5.24, Get Log Page 5.16; NVM Command Set 1.0: Read 3.2.4) and parses what comes back
// (libnvme's structures). Two carriers: the kernel's nvme driver through libnvme's passthrough
// ioctls (nvme_controller_libnvme), and the controller's own queues driven through VFIO while it
// stays on vfio-pci (nvme_controller_vfio).
#pragma once

#include <array>
#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <span>
#include <string>

#include "hostagent/nvme/nvme_controller.hpp"

namespace hostagent::nvme::detail {

// The fields of a submission queue entry the commands here set (NVMe Base 2.0, Figure 88). The
// data pointer is the carrier's: it knows where the data can be reached by the controller.
struct Command {
  uint8_t opcode = 0;
  uint32_t nsid = 0;
  std::array<uint32_t, 6> cdw{};  // command dwords 10 to 15
};

inline constexpr uint8_t kOpcodeGetLogPage = 0x02;
inline constexpr uint8_t kOpcodeIdentify = 0x06;
inline constexpr uint8_t kOpcodeFormat = 0x80;
inline constexpr uint8_t kOpcodeSanitize = 0x84;
inline constexpr uint8_t kOpcodeRead = 0x02;  // an I/O command of the NVM command set

// Identify's data, Get Log Page's, and one block: never more than two memory pages.
inline constexpr std::size_t kLargestTransfer = 8192;

// A command's completion status as the kernel passes it on (the CQE's status field without its
// phase bit: SC in bits 7:0, SCT in 10:8), in words: libnvme's, and the number.
std::string status_words(uint16_t status);

class CommandController : public Controller {
 public:
  explicit CommandController(std::string name) : name_(std::move(name)) {}

  Result<ControllerInfo> identify() override;
  Result<std::vector<NamespaceInfo>> namespaces() override;
  Status format(uint32_t nsid, SecureErase erase, std::chrono::milliseconds timeout) override;
  Status sanitize(SanitizeAction action) override;
  Result<SanitizeProgress> sanitize_progress() override;
  Result<std::vector<uint8_t>> read_block(uint32_t nsid, uint64_t lba) override;
  Result<std::optional<uint16_t>> secondary_controller(uint16_t vf_number) override;
  Result<int> subsystem_controllers() override;
  Result<std::vector<uint32_t>> allocated_namespaces() override;
  Result<std::vector<uint32_t>> namespaces_attached_to(uint16_t cntlid) override;

 protected:
  // How long an admin command may take where the command does not say: the kernel's default
  // (nvme_core.admin_timeout, 60 s).
  static constexpr std::chrono::milliseconds kAdminTimeout{std::chrono::seconds(60)};

  // Runs an admin command whose data, if any, comes from the controller into `data` (at most
  // kLargestTransfer bytes). An error names `what` and, for a status the controller completed it
  // with, the status in words.
  virtual Status admin(const Command& command, std::span<uint8_t> data, std::chrono::milliseconds timeout,
                       const std::string& what) = 0;
  // Runs a Read of `nsid` into `data` (one block).
  virtual Status io_read(const Command& command, std::span<uint8_t> data, const std::string& what) = 0;

  const std::string& name() const { return name_; }

 private:
  // Identify's data for `cns` (and `nsid`), as libnvme's structure T for it (defined and used in
  // command_controller.cpp alone).
  template <typename T>
  Result<T> identify_as(uint8_t cns, uint32_t nsid, const std::string& what);
  Result<uint32_t> block_size_of(uint32_t nsid);
  Result<std::vector<uint32_t>> namespace_list(uint8_t cns, const std::string& what);

  std::string name_;
  std::map<uint32_t, uint32_t> block_sizes_;  // by NSID; a format here keeps each namespace's LBA format
};

// The controller of `address`, on vfio-pci in IOMMU group `group`, driven through VFIO: reset,
// enabled with queues in pages this process maps for it, and reset again when it is let go.
Result<std::unique_ptr<Controller>> open_vfio_controller(const std::string& address, int group);

}  // namespace hostagent::nvme::detail
