// nvme/nvme_controller_libnvme: the Controller interface over libnvme's admin and I/O passthrough
// ioctls on the kernel's nvme driver. libnvme returns 0, -1 with errno (the ioctl failed), or the
// NVMe status the controller completed the command with (> 0): both become hostagent's errors here.
#include <endian.h>
#include <fcntl.h>
#include <libnvme.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <map>
#include <set>
#include <thread>

#include "hostagent/common/posix_file.hpp"
#include "hostagent/nvme/nvme_controller.hpp"

namespace hostagent::nvme {
namespace {

// The one translation of libnvme's results.
Status checked(int ret, const std::string& what, const std::string& device) {
  if (ret == 0) return ok_status();
  if (ret < 0) return errno_error(errno, what, device);
  return Error{ErrorCode::io_error, what + " " + device + ": the controller answered \"" +
                                        nvme_status_to_string(ret, false) + "\" (NVMe status " + std::to_string(ret) +
                                        ")"};
}

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

// Identify and I/O buffers: page aligned, as passthrough maps them for DMA.
struct AlignedBuffer {
  explicit AlignedBuffer(size_t size) : data(std::aligned_alloc(4096, (size + 4095) / 4096 * 4096)), bytes(size) {}
  ~AlignedBuffer() { std::free(data); }
  AlignedBuffer(const AlignedBuffer&) = delete;
  AlignedBuffer& operator=(const AlignedBuffer&) = delete;
  void* data;
  size_t bytes;
};

class LibnvmeController final : public Controller {
 public:
  LibnvmeController(std::string device, int fd, NamespaceDevices namespace_devices)
      : device_(std::move(device)), fd_(fd), namespace_devices_(std::move(namespace_devices)) {}

  Result<ControllerInfo> identify() override {
    nvme_id_ctrl id{};
    HA_TRY_STATUS(checked(nvme_identify_ctrl(fd_.get(), &id), "identify controller", device_));
    return ControllerInfo{trimmed(id.mn, sizeof id.mn), le16toh(id.oacs), id.fna, le32toh(id.sanicap), id.cmic};
  }

  Result<std::vector<NamespaceInfo>> namespaces() override {
    nvme_ns_list list{};
    HA_TRY_STATUS(checked(nvme_identify_active_ns_list(fd_.get(), 0, &list), "list the namespaces of", device_));
    std::vector<NamespaceInfo> out;
    for (const auto raw : list.ns) {
      const uint32_t nsid = le32toh(raw);
      if (nsid == 0) break;  // the list ends at the first zero
      nvme_id_ns ns{};
      HA_TRY_STATUS(checked(nvme_identify_ns(fd_.get(), nsid, &ns),
                            "identify namespace " + std::to_string(nsid) + " of", device_));
      block_sizes_[nsid] = block_size(ns);
      out.push_back({nsid, le64toh(ns.nsze), block_sizes_[nsid], ns.dlfeat});
    }
    return out;
  }

  Status format(uint32_t nsid, SecureErase erase, std::chrono::milliseconds timeout) override {
    // The LBA format it has: an erase, not a change of block size.
    uint8_t lbaf = 0;
    if (nsid != kAllNamespaces) {
      nvme_id_ns ns{};
      HA_TRY_STATUS(checked(nvme_identify_ns(fd_.get(), nsid, &ns),
                            "identify namespace " + std::to_string(nsid) + " of", device_));
      lbaf = current_format(ns);
    }
    nvme_format_nvm_args args{};
    args.args_size = sizeof args;
    args.fd = fd_.get();
    args.timeout = static_cast<uint32_t>(timeout.count());
    args.nsid = nsid;
    args.lbaf = lbaf;
    args.ses = static_cast<nvme_cmd_format_ses>(erase);
    return checked(nvme_format_nvm(&args), "format", device_);
  }

  Status sanitize(SanitizeAction action) override {
    nvme_sanitize_nvm_args args{};
    args.args_size = sizeof args;
    args.fd = fd_.get();
    args.sanact = static_cast<nvme_sanitize_sanact>(action);
    return checked(nvme_sanitize_nvm(&args), "sanitize", device_);
  }

  Result<SanitizeProgress> sanitize_progress() override {
    nvme_sanitize_log_page log{};
    HA_TRY_STATUS(checked(nvme_get_log_sanitize(fd_.get(), false, &log), "read the sanitize status log of", device_));
    const auto state = le16toh(log.sstat) & 0x7;
    if (state > 4) {
      return Error{ErrorCode::parse_error, device_ + "'s sanitize status log has state " + std::to_string(state) +
                                               ", which NVMe does not define"};
    }
    return SanitizeProgress{static_cast<SanitizeProgress::State>(state), le16toh(log.sprog)};
  }

  Result<std::vector<uint8_t>> read_block(uint32_t nsid, uint64_t lba) override {
    HA_TRY(const int fd, namespace_fd(nsid));
    HA_TRY(const uint32_t size, block_size_of(nsid));
    AlignedBuffer buffer(size);
    nvme_io_args args{};
    args.args_size = sizeof args;
    args.fd = fd;
    args.nsid = nsid;
    args.slba = lba;
    args.nlb = 0;  // 0's based: one block
    args.data = buffer.data;
    args.data_len = size;
    HA_TRY_STATUS(checked(nvme_read(&args),
                          "read block " + std::to_string(lba) + " of namespace " + std::to_string(nsid) + " of",
                          device_));
    const auto* bytes = static_cast<const uint8_t*>(buffer.data);
    return std::vector<uint8_t>(bytes, bytes + size);
  }

  Result<std::optional<uint16_t>> secondary_controller(uint16_t vf_number) override {
    nvme_secondary_ctrl_list list{};
    HA_TRY_STATUS(checked(nvme_identify_secondary_ctrl_list(fd_.get(), 0, 0, &list),
                          "list the secondary controllers of", device_));
    for (int i = 0; i < list.num && i < static_cast<int>(NVME_ID_SECONDARY_CTRL_MAX); ++i) {
      if (le16toh(list.sc_entry[i].vfn) == vf_number) return std::optional<uint16_t>(le16toh(list.sc_entry[i].scid));
    }
    return std::optional<uint16_t>();
  }

  Result<int> subsystem_controllers() override {
    nvme_ctrl_list controllers{};
    HA_TRY_STATUS(checked(nvme_identify_ctrl_list(fd_.get(), 0, &controllers),
                          "list the controllers of the subsystem of", device_));
    return static_cast<int>(le16toh(controllers.num));
  }

  Result<std::vector<uint32_t>> allocated_namespaces() override {
    nvme_ns_list list{};
    HA_TRY_STATUS(
        checked(nvme_identify_allocated_ns_list(fd_.get(), 0, &list), "list the allocated namespaces of", device_));
    std::vector<uint32_t> out;
    for (const auto raw : list.ns) {
      if (le32toh(raw) == 0) break;
      out.push_back(le32toh(raw));
    }
    return out;
  }

  Result<std::vector<uint32_t>> namespaces_attached_to(uint16_t cntlid) override {
    HA_TRY(const auto allocated, allocated_namespaces());
    std::vector<uint32_t> out;
    for (const auto nsid : allocated) {
      nvme_ctrl_list controllers{};
      HA_TRY_STATUS(checked(nvme_identify_nsid_ctrl_list(fd_.get(), nsid, 0, &controllers),
                            "list the controllers of namespace " + std::to_string(nsid) + " of", device_));
      const int count = std::min<int>(le16toh(controllers.num), static_cast<int>(NVME_ID_CTRL_LIST_MAX));
      for (int i = 0; i < count; ++i) {
        if (le16toh(controllers.identifier[i]) == cntlid) out.push_back(nsid);
      }
    }
    return out;
  }

 private:
  // The generic device of `nsid`, opened on first use: the kernel names it by its own instance
  // numbers, so each one is asked its NSID (NVME_IOCTL_ID). The driver's namespace scan runs in
  // the background after a bind or a format (nvme_queue_scan): a namespace without its device yet
  // is looked for again, for up to 10 s.
  Result<int> namespace_fd(uint32_t nsid) {
    constexpr int kLooks = 100;
    for (int look = 1; look <= kLooks; ++look) {
      HA_TRY_STATUS(open_new_devices());
      const auto found = opened_.find(nsid);
      if (found != opened_.end()) return found->second->get();
      if (look < kLooks) std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    return Error{ErrorCode::not_found, "namespace " + std::to_string(nsid) + " of " + device_ +
                                           " has no generic device (/dev/ng*) to read it through"};
  }

  Status open_new_devices() {
    for (const auto& path : namespace_devices_()) {
      if (seen_.count(path) != 0) continue;
      const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
      if (fd < 0) return errno_error(errno, "open", path);
      auto owned = std::make_unique<posix::FileDescriptor>(fd);
      uint32_t id = 0;
      HA_TRY_STATUS(checked(nvme_get_nsid(fd, &id), "ask the namespace ID of", path));
      seen_.insert(path);
      opened_[id] = std::move(owned);
    }
    return ok_status();
  }

  // The block size namespaces() read, or Identify's now for a namespace it did not list.
  Result<uint32_t> block_size_of(uint32_t nsid) {
    const auto known = block_sizes_.find(nsid);
    if (known != block_sizes_.end()) return known->second;
    nvme_id_ns ns{};
    HA_TRY_STATUS(
        checked(nvme_identify_ns(fd_.get(), nsid, &ns), "identify namespace " + std::to_string(nsid) + " of", device_));
    return block_sizes_[nsid] = block_size(ns);
  }

  std::string device_;
  posix::FileDescriptor fd_;
  NamespaceDevices namespace_devices_;
  std::set<std::string> seen_;
  std::map<uint32_t, std::unique_ptr<posix::FileDescriptor>> opened_;
  std::map<uint32_t, uint32_t> block_sizes_;  // by NSID; a format here keeps each namespace's LBA format
};

class LibnvmeOpener final : public ControllerOpener {
 public:
  Result<std::unique_ptr<Controller>> open(const std::string& controller_device,
                                           NamespaceDevices namespace_devices) override {
    const int fd = ::open(controller_device.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) return errno_error(errno, "open", controller_device);
    return std::unique_ptr<Controller>(
        std::make_unique<LibnvmeController>(controller_device, fd, std::move(namespace_devices)));
  }
};

}  // namespace

std::unique_ptr<ControllerOpener> libnvme_opener() {
  return std::make_unique<LibnvmeOpener>();
}

}  // namespace hostagent::nvme
