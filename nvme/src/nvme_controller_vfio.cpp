// nvme/nvme_controller_vfio: the commands (command_controller) carried by the controller's own
// admin and I/O queues, driven from user space through VFIO while the function stays on vfio-pci.
// No host driver binds the controller, so the host never has a block device of a tenant's
// namespace: nothing scans its partition table, probes it (blkid) or assembles what it holds (LVM,
// md). The queues live in pages this process maps for the controller through the group's IOMMU
// container; the controller is polled, never interrupting.
//
// What it relies on:
//  - VFIO (Documentation/driver-api/vfio.rst): a group opens only when viable (each member on a
//    VFIO driver or none); a type1 container maps our pages at IOVAs the device alone sees;
//    VFIO_GROUP_GET_DEVICE_FD takes the function's address; its regions are read and written
//    with pread/pwrite at the offsets VFIO_DEVICE_GET_REGION_INFO gives (BAR0: the registers;
//    the config region: the command register, which vfio-pci passes through for memory and bus
//    master enable). Closing the device resets the function where it can (vfio_pci_core_disable).
//  - NVMe Base 2.0, 3.5.1 (controller initialization): CC.EN cleared and CSTS.RDY seen clear,
//    AQA/ASQ/ACQ set, CC.EN set and CSTS.RDY awaited, each within CAP.TO (500 ms units); the
//    doorbells at 0x1000 with a stride of 4 << CAP.DSTRD; a completion is new while its phase
//    tag matches the one the queue expects, which flips at each wrap (4.6). I/O queues made with
//    Create I/O Completion/Submission Queue (5.4, 5.5), physically contiguous, no interrupt.
#include <endian.h>
#include <fcntl.h>
#include <linux/vfio.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <thread>

#include "command_controller.hpp"
#include "hostagent/common/posix_file.hpp"

namespace hostagent::nvme {
namespace {

using std::chrono::milliseconds;
using Clock = std::chrono::steady_clock;

// Controller registers (NVMe Base 2.0, Figure 33).
constexpr uint64_t kRegCap = 0x00;
constexpr uint64_t kRegCc = 0x14;
constexpr uint64_t kRegCsts = 0x1c;
constexpr uint64_t kRegAqa = 0x24;
constexpr uint64_t kRegAsq = 0x28;
constexpr uint64_t kRegAcq = 0x30;
constexpr uint64_t kDoorbells = 0x1000;

constexpr uint32_t kCcEnable = 1;
// CC: 64- and 16-byte I/O queue entries (IOSQES 6, IOCQES 4), the NVM command set, 4 KiB memory
// pages (MPS 0), round robin arbitration.
constexpr uint32_t kCcSettings = (6U << 16U) | (4U << 20U);
constexpr uint32_t kCstsReady = 1;
constexpr uint32_t kCstsFatal = 1U << 1U;

constexpr uint8_t kOpcodeCreateSq = 0x01;
constexpr uint8_t kOpcodeCreateCq = 0x05;

constexpr uint16_t kPciCommand = 0x04;
constexpr uint16_t kPciCommandMemory = 1U << 1U;
constexpr uint16_t kPciCommandMaster = 1U << 2U;

constexpr std::size_t kPage = 4096;
constexpr uint16_t kQueueEntries = 32;
// The pages the controller reaches: the admin queues, one I/O queue pair, and the data.
enum Page : std::size_t { kAdminSq, kAdminCq, kIoSq, kIoCq, kData, kPages = kData + 2 };
// Where the controller sees them: an address of this container's IOMMU space alone, clear of the
// MSI window x86 reserves (0xfee00000).
constexpr uint64_t kIova = 0x100000;
constexpr milliseconds kIoTimeout{std::chrono::seconds(30)};

struct Queue {
  uint16_t id = 0;
  Page sq = kAdminSq;
  Page cq = kAdminCq;
  uint16_t entries = kQueueEntries;
  uint16_t tail = 0;
  uint16_t head = 0;
  uint32_t phase = 1;
  uint16_t next_cid = 0;
};

// Waits growing from 1 ms to 20 ms: identify answers in microseconds, a format in minutes.
void pause_after(Clock::duration waited) {
  std::this_thread::sleep_for(waited < milliseconds(100) ? milliseconds(1) : milliseconds(20));
}

class VfioController final : public detail::CommandController {
 public:
  VfioController(std::string name, posix::FileDescriptor container, posix::FileDescriptor group,
                 posix::FileDescriptor device)
      : CommandController(std::move(name)),
        container_(std::move(container)),
        group_(std::move(group)),
        device_(std::move(device)) {}

  VfioController(const VfioController&) = delete;
  VfioController& operator=(const VfioController&) = delete;

  ~VfioController() override {
    // The controller stopped before its pages go: a reset (CC.EN cleared) ends its DMA.
    if (enabled_) {
      (void)write32(kRegCc, 0);
      (void)wait_ready(false);
    }
    if (command_) (void)config_write16(kPciCommand, *command_);
    if (mapped_) {
      vfio_iommu_type1_dma_unmap unmap{};
      unmap.argsz = sizeof unmap;
      unmap.iova = kIova;
      unmap.size = kPages * kPage;
      (void)::ioctl(container_.get(), VFIO_IOMMU_UNMAP_DMA, &unmap);
    }
    if (pages_ != nullptr) ::munmap(pages_, kPages * kPage);
  }

  // The registers and pages found, the controller reset and enabled with our admin queues.
  Status start() {
    HA_TRY_STATUS(find_regions());
    HA_TRY_STATUS(map_pages());
    HA_TRY(const uint16_t command, config_read16(kPciCommand));
    command_ = command;
    HA_TRY_STATUS(config_write16(kPciCommand, command | kPciCommandMemory | kPciCommandMaster));
    return enable();
  }

 protected:
  Status admin(const detail::Command& command, std::span<uint8_t> data, milliseconds timeout,
               const std::string& what) override {
    return run(admin_, command, data, timeout, what);
  }

  Status io_read(const detail::Command& command, std::span<uint8_t> data, const std::string& what) override {
    if (io_.id == 0) HA_TRY_STATUS(create_io_queues());
    return run(io_, command, data, kIoTimeout, what);
  }

 private:
  Status find_regions() {
    for (const auto index : {VFIO_PCI_BAR0_REGION_INDEX, VFIO_PCI_CONFIG_REGION_INDEX}) {
      vfio_region_info info{};
      info.argsz = sizeof info;
      info.index = index;
      if (::ioctl(device_.get(), VFIO_DEVICE_GET_REGION_INFO, &info) != 0) {
        return errno_error(errno, "read the VFIO regions of", name());
      }
      constexpr uint32_t kReadWrite = VFIO_REGION_INFO_FLAG_READ | VFIO_REGION_INFO_FLAG_WRITE;
      if ((info.flags & kReadWrite) != kReadWrite || (index == VFIO_PCI_BAR0_REGION_INDEX && info.size < 0x2000)) {
        return Error{ErrorCode::unsupported,
                     name() + ": VFIO offers no readable and writable " +
                         (index == VFIO_PCI_BAR0_REGION_INDEX ? "BAR0 of an NVMe controller's size" : "config space")};
      }
      (index == VFIO_PCI_BAR0_REGION_INDEX ? bar_ : config_) = info.offset;
    }
    return ok_status();
  }

  Status map_pages() {
    void* pages =
        ::mmap(nullptr, kPages * kPage, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE, -1, 0);
    if (pages == MAP_FAILED) return errno_error(errno, "map queue pages for", name());
    pages_ = static_cast<uint8_t*>(pages);
    vfio_iommu_type1_dma_map map{};
    map.argsz = sizeof map;
    map.flags = VFIO_DMA_MAP_FLAG_READ | VFIO_DMA_MAP_FLAG_WRITE;
    map.vaddr = reinterpret_cast<uintptr_t>(pages_);
    map.iova = kIova;
    map.size = kPages * kPage;
    if (::ioctl(container_.get(), VFIO_IOMMU_MAP_DMA, &map) != 0) {
      return errno_error(errno, "map queue pages in the IOMMU for", name());
    }
    mapped_ = true;
    return ok_status();
  }

  // A command's failure: "WHAT NAME: WHY".
  Error failure(const std::string& what, const std::string& why) const {
    return Error{ErrorCode::io_error, what + " " + name() + ": " + why};
  }

  uint8_t* page(Page which) const { return pages_ + which * kPage; }
  static uint64_t iova(Page which) { return kIova + which * kPage; }

  Status access(bool write, uint64_t offset, void* value, std::size_t size) const {
    const auto done = write ? ::pwrite(device_.get(), value, size, static_cast<off_t>(offset))
                            : ::pread(device_.get(), value, size, static_cast<off_t>(offset));
    if (done == static_cast<ssize_t>(size)) return ok_status();
    return errno_error(done < 0 ? errno : EIO, write ? "write a register of" : "read a register of", name());
  }
  // 32-bit accesses only: NVMe lets 64-bit registers be read and written as two halves (3.1.3).
  Result<uint32_t> read32(uint64_t reg) const {
    uint32_t value = 0;
    HA_TRY_STATUS(access(false, bar_ + reg, &value, sizeof value));
    return le32toh(value);
  }
  Status write32(uint64_t reg, uint32_t value) const {
    value = htole32(value);
    return access(true, bar_ + reg, &value, sizeof value);
  }
  Status write64(uint64_t reg, uint64_t value) const {
    HA_TRY_STATUS(write32(reg, static_cast<uint32_t>(value)));
    return write32(reg + 4, static_cast<uint32_t>(value >> 32U));
  }
  Result<uint16_t> config_read16(uint64_t reg) const {
    uint16_t value = 0;
    HA_TRY_STATUS(access(false, config_ + reg, &value, sizeof value));
    return le16toh(value);
  }
  Status config_write16(uint64_t reg, uint16_t value) const {
    value = htole16(value);
    return access(true, config_ + reg, &value, sizeof value);
  }

  Status enable() {
    HA_TRY(const uint32_t cap_low, read32(kRegCap));
    HA_TRY(const uint32_t cap_high, read32(kRegCap + 4));
    if (cap_low == 0xffffffff) return Error{ErrorCode::io_error, name() + " reads as all ones: it is not answering"};
    ready_timeout_ = milliseconds(500) * std::max(1U, (cap_low >> 24U) & 0xffU);
    doorbell_stride_ = 4U << (cap_high & 0xfU);
    if (((cap_high >> 16U) & 0xfU) != 0) {
      return Error{ErrorCode::unsupported, name() + " does not take 4 KiB memory pages (CAP.MPSMIN)"};
    }
    const auto entries = static_cast<uint16_t>(std::min<uint32_t>(kQueueEntries, (cap_low & 0xffffU) + 1));
    admin_ = Queue{0, kAdminSq, kAdminCq, entries};
    io_ = Queue{0, kIoSq, kIoCq, entries};
    HA_TRY(const uint32_t cc, read32(kRegCc));
    if ((cc & kCcEnable) != 0) {
      HA_TRY_STATUS(write32(kRegCc, cc & ~kCcEnable));
      HA_TRY_STATUS(wait_ready(false));
    }
    std::memset(pages_, 0, kPages * kPage);
    HA_TRY_STATUS(write32(kRegAqa, (uint32_t{entries} - 1) << 16U | (entries - 1U)));
    HA_TRY_STATUS(write64(kRegAsq, iova(kAdminSq)));
    HA_TRY_STATUS(write64(kRegAcq, iova(kAdminCq)));
    HA_TRY_STATUS(write32(kRegCc, kCcSettings | kCcEnable));
    enabled_ = true;
    return wait_ready(true);
  }

  Status wait_ready(bool ready) const {
    const auto start = Clock::now();
    for (;;) {
      HA_TRY(const uint32_t csts, read32(kRegCsts));
      if (csts == 0xffffffff) return Error{ErrorCode::io_error, name() + " reads as all ones: it is not answering"};
      if ((csts & kCstsFatal) != 0) {
        return Error{ErrorCode::io_error,
                     name() + " reports a fatal status (CSTS.CFS) while it is " + (ready ? "enabled" : "disabled")};
      }
      if (((csts & kCstsReady) != 0) == ready) return ok_status();
      if (Clock::now() - start > ready_timeout_) {
        return Error{ErrorCode::io_error, name() + " did not become " + (ready ? "ready" : "disabled") + " within " +
                                              std::to_string(ready_timeout_.count()) + " ms (CAP.TO)"};
      }
      pause_after(Clock::now() - start);
    }
  }

  uint64_t doorbell(const Queue& queue, bool completion) const {
    return kDoorbells + uint64_t{2U * queue.id + (completion ? 1U : 0U)} * doorbell_stride_;
  }

  Status create_io_queues() {
    const uint32_t size = (uint32_t{io_.entries} - 1) << 16U;
    // Queue 1, physically contiguous (CDW11 bit 0), no interrupt; the SQ completes into CQ 1.
    const detail::Command cq{kOpcodeCreateCq, 0, {1U | size, 1U}};
    HA_TRY_STATUS(run_at(admin_, cq, iova(kIoCq), 0, detail::CommandController::kAdminTimeout,
                         "create an I/O completion queue on"));
    const detail::Command sq{kOpcodeCreateSq, 0, {1U | size, 1U | (1U << 16U)}};
    HA_TRY_STATUS(run_at(admin_, sq, iova(kIoSq), 0, detail::CommandController::kAdminTimeout,
                         "create an I/O submission queue on"));
    io_.id = 1;
    return ok_status();
  }

  // A command with its data in our data pages, copied out once the controller completed it.
  Status run(Queue& queue, const detail::Command& command, std::span<uint8_t> data, milliseconds timeout,
             const std::string& what) {
    HA_ASSERT(data.size() <= detail::kLargestTransfer);
    std::memset(page(kData), 0, 2 * kPage);
    const uint64_t second = data.size() > kPage ? iova(static_cast<Page>(kData + 1)) : 0;
    HA_TRY_STATUS(run_at(queue, command, data.empty() ? 0 : iova(kData), second, timeout, what));
    if (!data.empty()) std::memcpy(data.data(), page(kData), data.size());
    return ok_status();
  }

  Status run_at(Queue& queue, const detail::Command& command, uint64_t prp1, uint64_t prp2, milliseconds timeout,
                const std::string& what) {
    if (!broken_.empty()) return failure(what, broken_);
    const uint16_t cid = queue.next_cid++;
    std::array<uint32_t, 16> entry{};
    entry[0] = command.opcode | (uint32_t{cid} << 16U);
    entry[1] = command.nsid;
    entry[6] = static_cast<uint32_t>(prp1);
    entry[7] = static_cast<uint32_t>(prp1 >> 32U);
    entry[8] = static_cast<uint32_t>(prp2);
    entry[9] = static_cast<uint32_t>(prp2 >> 32U);
    for (std::size_t i = 0; i < command.cdw.size(); ++i) entry[10 + i] = command.cdw[i];
    for (auto& word : entry) word = htole32(word);
    std::memcpy(page(queue.sq) + std::size_t{queue.tail} * 64, entry.data(), 64);
    queue.tail = static_cast<uint16_t>((queue.tail + 1) % queue.entries);
    std::atomic_thread_fence(std::memory_order_seq_cst);  // the entry is in memory before the doorbell
    HA_TRY_STATUS(write32(doorbell(queue, false), queue.tail));
    HA_TRY(const uint32_t dw3, completion(queue, timeout, what));
    if ((dw3 & 0xffffU) != cid) {
      broken_ = "its queue completed command " + std::to_string(dw3 & 0xffffU) + " where " + std::to_string(cid) +
                " was the one outstanding";
      return failure(what, broken_);
    }
    const auto status = static_cast<uint16_t>((dw3 >> 17U) & 0x7fffU);
    if (status != 0) return failure(what, detail::status_words(status));
    return ok_status();
  }

  // The next completion's last dword, once its phase tag says the controller wrote it.
  Result<uint32_t> completion(Queue& queue, milliseconds timeout, const std::string& what) {
    const auto* entry = reinterpret_cast<const uint32_t*>(page(queue.cq) + std::size_t{queue.head} * 16);
    const auto start = Clock::now();
    for (;;) {
      const uint32_t dw3 = le32toh(std::atomic_ref<const uint32_t>(entry[3]).load(std::memory_order_acquire));
      if (((dw3 >> 16U) & 1U) == queue.phase) {
        queue.head = static_cast<uint16_t>((queue.head + 1) % queue.entries);
        if (queue.head == 0) queue.phase ^= 1U;
        HA_TRY_STATUS(write32(doorbell(queue, true), queue.head));
        return dw3;
      }
      if (Clock::now() - start > timeout) {
        broken_ = "a command did not complete within " + std::to_string(timeout.count()) + " ms";
        return failure(what, broken_);
      }
      pause_after(Clock::now() - start);
    }
  }

  posix::FileDescriptor container_;
  posix::FileDescriptor group_;
  posix::FileDescriptor device_;
  uint64_t bar_ = 0;
  uint64_t config_ = 0;
  uint8_t* pages_ = nullptr;
  bool mapped_ = false;
  bool enabled_ = false;
  std::optional<uint16_t> command_;  // the PCI command register as we found it
  milliseconds ready_timeout_{500};
  uint32_t doorbell_stride_ = 4;
  Queue admin_;
  Queue io_;
  std::string broken_;  // set when the queues can no longer be trusted: a command timed out
};

Result<posix::FileDescriptor> open_device_file(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDWR | O_CLOEXEC);
  if (fd < 0) return errno_error(errno, "open", path);
  return posix::FileDescriptor(fd);
}

}  // namespace

Result<std::unique_ptr<Controller>> detail::open_vfio_controller(const std::string& address, int group) {
  const std::string name = address + " (through VFIO)";
  HA_TRY(auto container, open_device_file("/dev/vfio/vfio"));
  if (::ioctl(container.get(), VFIO_GET_API_VERSION) != VFIO_API_VERSION ||
      ::ioctl(container.get(), VFIO_CHECK_EXTENSION, VFIO_TYPE1v2_IOMMU) != 1) {
    return Error{ErrorCode::unsupported,
                 "this kernel's VFIO offers no type 1 IOMMU (v2) to drive " + address + " with"};
  }
  // EBUSY here: another process (a VM's QEMU) has the group open.
  HA_TRY(auto group_file, open_device_file("/dev/vfio/" + std::to_string(group)));
  vfio_group_status status{};
  status.argsz = sizeof status;
  if (::ioctl(group_file.get(), VFIO_GROUP_GET_STATUS, &status) != 0) {
    return errno_error(errno, "read the status of IOMMU group " + std::to_string(group) + " of", address);
  }
  if ((status.flags & VFIO_GROUP_FLAGS_VIABLE) == 0) {
    return Error{ErrorCode::conflict, "IOMMU group " + std::to_string(group) + " of " + address +
                                          " is not viable: one of its members is on a host driver"};
  }
  int container_fd = container.get();
  if (::ioctl(group_file.get(), VFIO_GROUP_SET_CONTAINER, &container_fd) != 0 ||
      ::ioctl(container.get(), VFIO_SET_IOMMU, VFIO_TYPE1v2_IOMMU) != 0) {
    return errno_error(errno, "set up an IOMMU container for", address);
  }
  const int device = ::ioctl(group_file.get(), VFIO_GROUP_GET_DEVICE_FD, address.c_str());
  if (device < 0) return errno_error(errno, "open the VFIO device of", address);
  auto controller = std::make_unique<VfioController>(name, std::move(container), std::move(group_file),
                                                     posix::FileDescriptor(device));
  HA_TRY_STATUS(controller->start());
  return std::unique_ptr<Controller>(std::move(controller));
}

}  // namespace hostagent::nvme
