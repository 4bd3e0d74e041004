// nvme/command_controller: each Controller call as the NVMe command it is, and its answer parsed.
#include "command_controller.hpp"

#include <endian.h>
#include <libnvme.h>

#include <algorithm>
#include <array>
#include <cstring>
#include <vector>

namespace hostagent::nvme::detail {
namespace {

// Identify's CNS values (NVMe Base 2.0, Figure 273).
constexpr uint8_t kCnsNamespace = 0x00;
constexpr uint8_t kCnsController = 0x01;
constexpr uint8_t kCnsActiveNamespaces = 0x02;
constexpr uint8_t kCnsAllocatedNamespaces = 0x10;
constexpr uint8_t kCnsNamespaceControllers = 0x12;
constexpr uint8_t kCnsSubsystemControllers = 0x13;
constexpr uint8_t kCnsSecondaryControllers = 0x15;
constexpr uint8_t kLogSanitize = 0x81;

std::string trimmed(const char* text, size_t size) {
  std::string out(text, strnlen(text, size));
  while (!out.empty() && out.back() == ' ') out.pop_back();
  return out;
}

// The LBA format a namespace is formatted with (FLBAS bits 3:0), and its block size.
uint8_t current_format(const nvme_id_ns& ns) {
  return ns.flbas & 0xf;
}
uint32_t block_size(const nvme_id_ns& ns) {
  return 1U << ns.lbaf[current_format(ns)].ds;
}

std::string namespace_words(uint32_t nsid) {
  return "identify namespace " + std::to_string(nsid) + " of";
}

}  // namespace

std::string status_words(uint16_t status) {
  return "the controller answered \"" + std::string(nvme_status_to_string(status, false)) + "\" (NVMe status " +
         std::to_string(status) + ")";
}

template <typename T>
Result<T> CommandController::identify_as(uint8_t cns, uint32_t nsid, const std::string& what) {
  static_assert(std::is_trivially_copyable_v<T> && sizeof(T) <= kLargestTransfer);
  std::array<uint8_t, sizeof(T)> data{};
  HA_TRY_STATUS(admin(Command{kOpcodeIdentify, nsid, {cns}}, data, kAdminTimeout, what));
  T out{};
  std::memcpy(&out, data.data(), sizeof out);
  return out;
}

Result<ControllerInfo> CommandController::identify() {
  HA_TRY(const auto id, identify_as<nvme_id_ctrl>(kCnsController, 0, "identify controller"));
  return ControllerInfo{trimmed(id.mn, sizeof id.mn), le16toh(id.oacs), id.fna, le32toh(id.sanicap), id.cmic};
}

Result<std::vector<uint32_t>> CommandController::namespace_list(uint8_t cns, const std::string& what) {
  HA_TRY(const auto list, identify_as<nvme_ns_list>(cns, 0, what));
  std::vector<uint32_t> out;
  for (const auto raw : list.ns) {
    if (le32toh(raw) == 0) break;  // the list ends at the first zero
    out.push_back(le32toh(raw));
  }
  return out;
}

Result<std::vector<NamespaceInfo>> CommandController::namespaces() {
  HA_TRY(const auto nsids, namespace_list(kCnsActiveNamespaces, "list the namespaces of"));
  std::vector<NamespaceInfo> out;
  for (const auto nsid : nsids) {
    HA_TRY(const auto ns, identify_as<nvme_id_ns>(kCnsNamespace, nsid, namespace_words(nsid)));
    block_sizes_[nsid] = block_size(ns);
    out.push_back({nsid, le64toh(ns.nsze), block_sizes_[nsid], ns.dlfeat});
  }
  return out;
}

Status CommandController::format(uint32_t nsid, SecureErase erase, std::chrono::milliseconds timeout) {
  // The LBA format it has: an erase, not a change of block size.
  uint32_t lbaf = 0;
  if (nsid != kAllNamespaces) {
    HA_TRY(const auto ns, identify_as<nvme_id_ns>(kCnsNamespace, nsid, namespace_words(nsid)));
    lbaf = current_format(ns);
  }
  // CDW10: LBAF in bits 3:0, SES in 11:9; no protection information, metadata as it is.
  const Command command{kOpcodeFormat, nsid, {lbaf | (static_cast<uint32_t>(erase) << 9U)}};
  return admin(command, {}, timeout, "format");
}

Status CommandController::sanitize(SanitizeAction action) {
  // CDW10: SANACT in bits 2:0; no unrestricted exit, deallocation as the controller does it.
  const Command command{kOpcodeSanitize, 0, {static_cast<uint32_t>(action)}};
  return admin(command, {}, kAdminTimeout, "sanitize");
}

Result<SanitizeProgress> CommandController::sanitize_progress() {
  std::vector<uint8_t> data(sizeof(nvme_sanitize_log_page));
  // CDW10: the log's ID, and its length in dwords less one in bits 31:16.
  const uint32_t dwords = static_cast<uint32_t>(data.size() / 4 - 1);
  const Command command{kOpcodeGetLogPage, NVME_NSID_ALL, {kLogSanitize | (dwords << 16U)}};
  HA_TRY_STATUS(admin(command, data, kAdminTimeout, "read the sanitize status log of"));
  nvme_sanitize_log_page log{};
  std::memcpy(&log, data.data(), sizeof log);
  const auto state = le16toh(log.sstat) & 0x7;
  if (state > 4) {
    return Error{ErrorCode::parse_error,
                 name_ + "'s sanitize status log has state " + std::to_string(state) + ", which NVMe does not define"};
  }
  return SanitizeProgress{static_cast<SanitizeProgress::State>(state), le16toh(log.sprog)};
}

Result<uint32_t> CommandController::block_size_of(uint32_t nsid) {
  const auto known = block_sizes_.find(nsid);
  if (known != block_sizes_.end()) return known->second;
  HA_TRY(const auto ns, identify_as<nvme_id_ns>(kCnsNamespace, nsid, namespace_words(nsid)));
  return block_sizes_[nsid] = block_size(ns);
}

Result<std::vector<uint8_t>> CommandController::read_block(uint32_t nsid, uint64_t lba) {
  HA_TRY(const uint32_t size, block_size_of(nsid));
  if (size > kLargestTransfer) {
    return Error{ErrorCode::unsupported, "namespace " + std::to_string(nsid) + " of " + name_ + " has blocks of " +
                                             std::to_string(size) + " bytes; hostagent reads back blocks of at most " +
                                             std::to_string(kLargestTransfer)};
  }
  std::vector<uint8_t> block(size);
  // CDW10 and 11: the starting LBA; CDW12: the number of blocks less one.
  const Command command{kOpcodeRead, nsid, {static_cast<uint32_t>(lba), static_cast<uint32_t>(lba >> 32U), 0}};
  HA_TRY_STATUS(
      io_read(command, block, "read block " + std::to_string(lba) + " of namespace " + std::to_string(nsid) + " of"));
  return block;
}

Result<std::optional<uint16_t>> CommandController::secondary_controller(uint16_t vf_number) {
  HA_TRY(const auto list,
         identify_as<nvme_secondary_ctrl_list>(kCnsSecondaryControllers, 0, "list the secondary controllers of"));
  for (int i = 0; i < list.num && i < static_cast<int>(NVME_ID_SECONDARY_CTRL_MAX); ++i) {
    if (le16toh(list.sc_entry[i].vfn) == vf_number) return std::optional<uint16_t>(le16toh(list.sc_entry[i].scid));
  }
  return std::optional<uint16_t>();
}

Result<int> CommandController::subsystem_controllers() {
  HA_TRY(const auto controllers,
         identify_as<nvme_ctrl_list>(kCnsSubsystemControllers, 0, "list the controllers of the subsystem of"));
  return static_cast<int>(le16toh(controllers.num));
}

Result<std::vector<uint32_t>> CommandController::allocated_namespaces() {
  return namespace_list(kCnsAllocatedNamespaces, "list the allocated namespaces of");
}

Result<std::vector<uint32_t>> CommandController::namespaces_attached_to(uint16_t cntlid) {
  HA_TRY(const auto allocated, allocated_namespaces());
  std::vector<uint32_t> out;
  for (const auto nsid : allocated) {
    HA_TRY(const auto controllers,
           identify_as<nvme_ctrl_list>(kCnsNamespaceControllers, nsid,
                                       "list the controllers of namespace " + std::to_string(nsid) + " of"));
    const int count = std::min<int>(le16toh(controllers.num), static_cast<int>(NVME_ID_CTRL_LIST_MAX));
    for (int i = 0; i < count; ++i) {
      if (le16toh(controllers.identifier[i]) == cntlid) out.push_back(nsid);
    }
  }
  return out;
}

}  // namespace hostagent::nvme::detail
