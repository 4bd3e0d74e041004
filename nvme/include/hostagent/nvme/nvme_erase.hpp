// hostagent/nvme/nvme_erase: erasing a tenant's NVMe controller before the next tenant gets it, with
// the strongest method the controller offers, and reading it back. The choice, strongest first:
// Sanitize crypto erase, Sanitize block erase (both reach every block, spares included, and the
// controller finishes them across a power loss), Format NVM with cryptographic erase, Format NVM
// with user data erase. Overwrite is never chosen: it takes hours and proves no more. A controller
// offering none of them cannot be erased, which is a failure, not a skip. The read back samples
// blocks of every namespace and judges them against what the controller says an erased block reads
// as (DLFEAT); where it says nothing, the blocks are read and the content is not judged, and the
// report says so.
#pragma once

#include <chrono>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "hostagent/nvme/nvme_controller.hpp"

namespace hostagent::nvme {

enum class EraseMethod { sanitize_crypto, sanitize_block, format_crypto, format_user_data };
const char* to_string(EraseMethod method) noexcept;

// The strongest method `controller` offers; unsupported (naming what it lacks) when none.
Result<EraseMethod> choose_method(const ControllerInfo& controller);

struct EraseOptions {
  // How long a sanitize or format may take before the erase is failed (a Vela-2 drive's block
  // erase takes minutes; the default leaves room for it).
  std::chrono::milliseconds timeout{std::chrono::minutes(30)};
  std::chrono::milliseconds poll_interval{std::chrono::seconds(1)};
  int samples_per_namespace = 16;  // blocks read back: the first, the last, and evenly between
  // How to wait between polls: time injected (tests pass one that does not sleep).
  std::function<void(std::chrono::milliseconds)> sleep;
};

struct NamespaceReadBack {
  uint32_t nsid = 0;
  int blocks_read = 0;
  std::optional<uint8_t> expected;  // the byte every block read as; nullopt: not said, not judged
};

struct EraseReport {
  EraseMethod method = EraseMethod::format_user_data;
  std::string model;
  std::vector<NamespaceReadBack> read_back;
  int polls = 0;  // sanitize log reads until it completed; 0 for a format
};

// Erases every namespace of `controller` and reads each back. io_error when the controller refuses
// or fails the erase, does not finish it in time, or a block reads back other than erased blocks
// read: the message names the block.
Result<EraseReport> erase_controller(Controller& controller, const EraseOptions& options);

// "format (user data erase) of QEMU NVMe Ctrl; read back 16 blocks of namespace 1, all 0x00".
std::string describe(const EraseReport& report);

}  // namespace hostagent::nvme
