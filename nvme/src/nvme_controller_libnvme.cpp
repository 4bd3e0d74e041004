// nvme/nvme_controller_libnvme: the commands (command_controller) carried by libnvme's admin and
// I/O passthrough ioctls on the kernel's nvme driver. libnvme returns 0, -1 with errno (the ioctl
// failed), or the NVMe status the controller completed the command with (> 0): both become
// hostagent's errors here.
#include <fcntl.h>
#include <libnvme.h>

#include <cerrno>
#include <map>
#include <memory>
#include <set>
#include <thread>

#include "command_controller.hpp"
#include "hostagent/common/posix_file.hpp"

namespace hostagent::nvme {
namespace {

// The one translation of libnvme's results.
Status checked(int ret, const std::string& what, const std::string& device) {
  if (ret == 0) return ok_status();
  if (ret < 0) return errno_error(errno, what, device);
  return Error{ErrorCode::io_error, what + " " + device + ": " + detail::status_words(static_cast<uint16_t>(ret))};
}

// The kernel's passthrough command: ours, with the data where the kernel maps it for DMA.
nvme_passthru_cmd passthrough(const detail::Command& command, std::span<uint8_t> data,
                              std::chrono::milliseconds timeout) {
  nvme_passthru_cmd cmd{};
  cmd.opcode = command.opcode;
  cmd.nsid = command.nsid;
  cmd.addr = reinterpret_cast<uintptr_t>(data.data());
  cmd.data_len = static_cast<uint32_t>(data.size());
  cmd.cdw10 = command.cdw[0];
  cmd.cdw11 = command.cdw[1];
  cmd.cdw12 = command.cdw[2];
  cmd.cdw13 = command.cdw[3];
  cmd.cdw14 = command.cdw[4];
  cmd.cdw15 = command.cdw[5];
  cmd.timeout_ms = static_cast<uint32_t>(timeout.count());
  return cmd;
}

class LibnvmeController final : public detail::CommandController {
 public:
  LibnvmeController(std::string device, int fd, NamespaceDevices namespace_devices)
      : CommandController(device),
        device_(std::move(device)),
        fd_(fd),
        namespace_devices_(std::move(namespace_devices)) {}

 protected:
  Status admin(const detail::Command& command, std::span<uint8_t> data, std::chrono::milliseconds timeout,
               const std::string& what) override {
    auto cmd = passthrough(command, data, timeout);
    return checked(nvme_submit_admin_passthru(fd_.get(), &cmd, nullptr), what, device_);
  }

  Status io_read(const detail::Command& command, std::span<uint8_t> data, const std::string& what) override {
    HA_TRY(const int fd, namespace_fd(command.nsid));
    auto cmd = passthrough(command, data, std::chrono::milliseconds(0));  // 0: the kernel's I/O timeout
    return checked(nvme_submit_io_passthru(fd, &cmd, nullptr), what, device_);
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

  std::string device_;
  posix::FileDescriptor fd_;
  NamespaceDevices namespace_devices_;
  std::set<std::string> seen_;
  std::map<uint32_t, std::unique_ptr<posix::FileDescriptor>> opened_;
};

class HostOpener final : public ControllerOpener {
 public:
  Result<std::unique_ptr<Controller>> open_vfio(const std::string& address, int group) override {
    return detail::open_vfio_controller(address, group);
  }

  Result<std::unique_ptr<Controller>> open(const std::string& controller_device,
                                           NamespaceDevices namespace_devices) override {
    const int fd = ::open(controller_device.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) return errno_error(errno, "open", controller_device);
    return std::unique_ptr<Controller>(
        std::make_unique<LibnvmeController>(controller_device, fd, std::move(namespace_devices)));
  }
};

}  // namespace

std::unique_ptr<ControllerOpener> host_opener() {
  return std::make_unique<HostOpener>();
}

}  // namespace hostagent::nvme
