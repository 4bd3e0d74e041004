// nvme/nvme_erase: the method chosen, the erase waited for, the namespaces read back.
#include "hostagent/nvme/nvme_erase.hpp"

#include <algorithm>
#include <cstdio>
#include <thread>

namespace hostagent::nvme {
namespace {

std::string hex_byte(uint8_t value) {
  char text[8];
  std::snprintf(text, sizeof text, "0x%02x", value);
  return text;
}

void wait(const EraseOptions& options) {
  if (options.sleep) {
    options.sleep(options.poll_interval);
  } else {
    std::this_thread::sleep_for(options.poll_interval);
  }
}

// Until the sanitize status log says it is over: the polls it took, and whether the controller
// deallocated the blocks after it (only then do they read as DLFEAT says).
struct SanitizeDone {
  int polls = 0;
  bool deallocated = true;
};
Result<SanitizeDone> wait_for_sanitize(Controller& controller, const EraseOptions& options) {
  const auto interval = std::max<int64_t>(options.poll_interval.count(), 1);
  const int max_polls = static_cast<int>(std::max<int64_t>(options.timeout.count() / interval, 1));
  uint16_t progress = 0;
  for (int poll = 1; poll <= max_polls; ++poll) {
    HA_TRY(const auto status, controller.sanitize_progress());
    using State = SanitizeProgress::State;
    switch (status.state) {
      case State::completed:
        return SanitizeDone{poll, true};
      case State::completed_no_deallocate:
        return SanitizeDone{poll, false};
      case State::failed:
        return Error{ErrorCode::io_error, "the sanitize failed (its status log says so)"};
      case State::never:
        return Error{ErrorCode::io_error, "the controller accepted the sanitize, but its status log says it never ran"};
      case State::in_progress:
        progress = status.progress;
        break;
    }
    if (poll < max_polls) wait(options);
  }
  return Error{ErrorCode::io_error, "the sanitize did not finish within " +
                                        std::to_string(options.timeout.count() / 1000) + " s (at " +
                                        std::to_string(progress * 100 / 65536) + "%)"};
}

// A format reaches only the namespaces attached here: one a tenant detached would keep its data.
Status check_all_attached(Controller& controller, const ControllerInfo& info,
                          const std::vector<NamespaceInfo>& active) {
  if ((info.oacs & kOacsNamespaceManagement) == 0) return ok_status();
  HA_TRY(const auto allocated, controller.allocated_namespaces());
  for (const auto nsid : allocated) {
    const bool attached =
        std::any_of(active.begin(), active.end(), [&](const NamespaceInfo& ns) { return ns.nsid == nsid; });
    if (!attached) {
      return Error{ErrorCode::io_error, "namespace " + std::to_string(nsid) +
                                            " is not attached to the controller, so a format would not reach it"};
    }
  }
  return ok_status();
}

Status format_all(Controller& controller, const ControllerInfo& info, const std::vector<NamespaceInfo>& active,
                  SecureErase erase, const EraseOptions& options) {
  HA_TRY_STATUS(check_all_attached(controller, info, active));
  // FNA bit 0: a format of one namespace formats them all, and only NSID FFFFFFFFh is accepted.
  if ((info.fna & kFnaFormatAll) != 0) return controller.format(kAllNamespaces, erase, options.timeout);
  for (const auto& ns : active) HA_TRY_STATUS(controller.format(ns.nsid, erase, options.timeout));
  return ok_status();
}

std::optional<uint8_t> erased_byte(const NamespaceInfo& ns) {
  switch (ns.dlfeat & 0x7) {
    case 1:
      return uint8_t{0x00};
    case 2:
      return uint8_t{0xff};
    default:
      return std::nullopt;
  }
}

Result<NamespaceReadBack> read_back(Controller& controller, const NamespaceInfo& ns, int samples, bool deallocated) {
  NamespaceReadBack seen{ns.nsid, 0, deallocated ? erased_byte(ns) : std::nullopt};
  if (ns.blocks == 0) return seen;
  const uint64_t count = std::min<uint64_t>(std::max(samples, 1), ns.blocks);
  for (uint64_t i = 0; i < count; ++i) {
    const uint64_t lba = count == 1 ? 0 : i * (ns.blocks - 1) / (count - 1);
    HA_TRY(const auto block, controller.read_block(ns.nsid, lba));
    ++seen.blocks_read;
    if (!seen.expected) continue;
    const auto other = std::find_if(block.begin(), block.end(), [&](uint8_t b) { return b != *seen.expected; });
    if (other != block.end()) {
      return Error{ErrorCode::io_error,
                   "block " + std::to_string(lba) + " of namespace " + std::to_string(ns.nsid) +
                       " still holds data after the erase (byte " + std::to_string(other - block.begin()) + " is " +
                       hex_byte(*other) + "; the controller says erased blocks read " + hex_byte(*seen.expected) + ")"};
    }
  }
  return seen;
}

// A sanitize reaches the whole NVM subsystem, and so may a format (FNA bits 0 and 1): where the
// subsystem holds another controller (a second port, another function), its namespaces, which may
// be another tenant's or the host's, would be erased with this one's. Refused, not risked.
Status check_alone_in_subsystem(Controller& controller, const ControllerInfo& info) {
  if ((info.cmic & kCmicMultipleControllers) == 0) return ok_status();
  HA_TRY(const int controllers, controller.subsystem_controllers());
  if (controllers <= 1) return ok_status();
  return Error{ErrorCode::conflict, info.model + " shares its NVM subsystem with " + std::to_string(controllers - 1) +
                                        " other controller(s), whose namespaces an erase through it could reach"};
}

}  // namespace

const char* to_string(EraseMethod method) noexcept {
  switch (method) {
    case EraseMethod::sanitize_crypto:
      return "sanitize (crypto erase)";
    case EraseMethod::sanitize_block:
      return "sanitize (block erase)";
    case EraseMethod::format_crypto:
      return "format (cryptographic erase)";
    case EraseMethod::format_user_data:
      return "format (user data erase)";
  }
  return "format (user data erase)";
}

Result<EraseMethod> choose_method(const ControllerInfo& controller) {
  if ((controller.sanicap & kSanicapCryptoErase) != 0) return EraseMethod::sanitize_crypto;
  if ((controller.sanicap & kSanicapBlockErase) != 0) return EraseMethod::sanitize_block;
  if ((controller.oacs & kOacsFormat) != 0) {
    return (controller.fna & kFnaCryptoErase) != 0 ? EraseMethod::format_crypto : EraseMethod::format_user_data;
  }
  return Error{ErrorCode::unsupported, controller.model +
                                           " offers neither Sanitize (crypto or block erase) nor Format NVM, so it "
                                           "cannot be erased"};
}

Result<EraseReport> erase_controller(Controller& controller, const EraseOptions& options) {
  HA_TRY(const auto info, controller.identify());
  HA_TRY_STATUS(check_alone_in_subsystem(controller, info));
  HA_TRY(const auto method, choose_method(info));
  HA_TRY(const auto active, controller.namespaces());
  EraseReport report{method, info.model, {}, 0};
  bool deallocated = true;
  switch (method) {
    case EraseMethod::sanitize_crypto:
    case EraseMethod::sanitize_block: {
      HA_TRY_STATUS(controller.sanitize(method == EraseMethod::sanitize_crypto ? SanitizeAction::crypto_erase
                                                                               : SanitizeAction::block_erase));
      HA_TRY(const auto done, wait_for_sanitize(controller, options));
      report.polls = done.polls;
      deallocated = done.deallocated;
      break;
    }
    case EraseMethod::format_crypto:
    case EraseMethod::format_user_data:
      HA_TRY_STATUS(format_all(
          controller, info, active,
          method == EraseMethod::format_crypto ? SecureErase::cryptographic : SecureErase::user_data, options));
      break;
  }
  report.read_back.reserve(active.size());
  for (const auto& ns : active) {
    HA_TRY(auto seen, read_back(controller, ns, options.samples_per_namespace, deallocated));
    report.read_back.push_back(seen);
  }
  return report;
}

std::string describe(const EraseReport& report) {
  std::string text = std::string(to_string(report.method)) + " of " + report.model;
  if (report.polls > 0) text += ", done after " + std::to_string(report.polls) + " reads of its status log";
  if (report.read_back.empty()) return text + "; no active namespace to read back";
  for (const auto& ns : report.read_back) {
    text += "; namespace " + std::to_string(ns.nsid) + ": " + std::to_string(ns.blocks_read) + " blocks read back";
    text += ns.expected ? ", all " + hex_byte(*ns.expected)
                        : ", content not judged (the controller does not say what erased blocks read as)";
  }
  return text;
}

}  // namespace hostagent::nvme
