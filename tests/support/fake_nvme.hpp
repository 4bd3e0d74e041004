// A fake NVMe controller that keeps data the way a controller does: blocks a tenant wrote hold it
// until a format or sanitize erases them, after which they read as the namespace's DLFEAT says (or,
// where DLFEAT says nothing, as the noise a crypto erase leaves). A sanitize runs in the
// background for a number of status-log reads. Faults: a command refused with an NVMe status, a
// block the controller "forgets" to erase, a sanitize that fails, a namespace detached by the
// tenant. Shared by tests/nvme and tests/devices.
#pragma once

#include <cerrno>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "hostagent/nvme/nvme_controller.hpp"

namespace hostagent::testing {

struct FakeNamespace {
  nvme::NamespaceInfo info;
  std::map<uint64_t, std::vector<uint8_t>> written;  // blocks holding data, by LBA
  bool erased_to_noise = false;                      // a crypto erase left them unreadable noise
};

struct FakeNvmeState {
  nvme::ControllerInfo info{"Fake NVMe", nvme::kOacsFormat, 0, 0};
  std::vector<FakeNamespace> namespaces;
  std::vector<uint32_t> detached;                         // allocated, not attached here
  std::map<uint16_t, uint16_t> secondary_by_vf;           // VFN -> SCID
  std::map<uint16_t, std::vector<uint32_t>> attached_to;  // SCID -> NSIDs
  int subsystem_controllers = 1;                          // this one, and any other port or function of its subsystem
  int sanitize_polls = 2;                                 // status reads while in progress
  bool sanitize_fails = false;
  bool sanitize_keeps_allocated = false;  // No-Deallocate: blocks erased, not deallocated
  std::string refuse;                     // "format", "sanitize", "read": refused
  bool group_busy = false;                // its IOMMU group is open elsewhere (a VM's QEMU)
  std::set<uint64_t> forgotten;           // LBAs an erase leaves as they were
  // What was asked.
  std::vector<std::pair<uint32_t, nvme::SecureErase>> formats;
  std::vector<nvme::SanitizeAction> sanitizes;
  int sanitize_reads = 0;
  std::vector<std::string> opened;             // each open's controller device, or "vfio ADDRESS in /dev/vfio/N"
  std::vector<std::string> namespace_devices;  // the last open's namespace devices

  void write(uint32_t nsid, uint64_t lba, uint8_t fill) {
    auto& ns = find(nsid);
    ns.written[lba] = std::vector<uint8_t>(ns.info.block_size, fill);
  }
  FakeNamespace& find(uint32_t nsid) {
    for (auto& ns : namespaces)
      if (ns.info.nsid == nsid) return ns;
    HA_ASSERT(false);
    return namespaces.front();
  }
  void erase(FakeNamespace& ns, bool crypto) {
    for (auto it = ns.written.begin(); it != ns.written.end();) {
      it = forgotten.count(it->first) != 0 ? std::next(it) : ns.written.erase(it);
    }
    ns.erased_to_noise = crypto && (ns.info.dlfeat & 0x7) == 0;
  }
};

class FakeNvmeController final : public nvme::Controller {
 public:
  explicit FakeNvmeController(FakeNvmeState& state) : state_(state) {}

  Result<nvme::ControllerInfo> identify() override { return state_.info; }
  Result<std::vector<nvme::NamespaceInfo>> namespaces() override {
    std::vector<nvme::NamespaceInfo> out;
    for (const auto& ns : state_.namespaces) out.push_back(ns.info);
    return out;
  }
  Status format(uint32_t nsid, nvme::SecureErase erase, std::chrono::milliseconds /*timeout*/) override {
    if (state_.refuse == "format") return refused("format");
    state_.formats.emplace_back(nsid, erase);
    for (auto& ns : state_.namespaces) {
      if (nsid == nvme::kAllNamespaces || ns.info.nsid == nsid)
        state_.erase(ns, erase == nvme::SecureErase::cryptographic);
    }
    return ok_status();
  }
  Status sanitize(nvme::SanitizeAction action) override {
    if (state_.refuse == "sanitize") return refused("sanitize");
    state_.sanitizes.push_back(action);
    return ok_status();
  }
  Result<nvme::SanitizeProgress> sanitize_progress() override {
    using State = nvme::SanitizeProgress::State;
    ++state_.sanitize_reads;
    if (state_.sanitizes.empty()) return nvme::SanitizeProgress{State::never, 0};
    if (state_.sanitize_reads <= state_.sanitize_polls) {
      return nvme::SanitizeProgress{State::in_progress, static_cast<uint16_t>(state_.sanitize_reads * 1000)};
    }
    if (state_.sanitize_fails) return nvme::SanitizeProgress{State::failed, 0};
    // A sanitize reaches every namespace, attached or not; it deallocates unless it says it did not.
    for (auto& ns : state_.namespaces) state_.erase(ns, state_.sanitize_keeps_allocated);
    if (state_.sanitize_keeps_allocated) {
      for (auto& ns : state_.namespaces) ns.erased_to_noise = true;
      return nvme::SanitizeProgress{State::completed_no_deallocate, 0};
    }
    return nvme::SanitizeProgress{State::completed, 0};
  }
  Result<std::vector<uint8_t>> read_block(uint32_t nsid, uint64_t lba) override {
    if (state_.refuse == "read") return refused("read");
    auto& ns = state_.find(nsid);
    const auto written = ns.written.find(lba);
    if (written != ns.written.end()) return written->second;
    if (ns.erased_to_noise) return std::vector<uint8_t>(ns.info.block_size, static_cast<uint8_t>(0x5a ^ lba));
    const uint8_t erased = (ns.info.dlfeat & 0x7) == 2 ? 0xff : 0x00;
    return std::vector<uint8_t>(ns.info.block_size, erased);
  }
  Result<std::optional<uint16_t>> secondary_controller(uint16_t vf_number) override {
    const auto found = state_.secondary_by_vf.find(vf_number);
    if (found == state_.secondary_by_vf.end()) return std::optional<uint16_t>();
    return std::optional<uint16_t>(found->second);
  }
  Result<int> subsystem_controllers() override { return state_.subsystem_controllers; }
  Result<std::vector<uint32_t>> allocated_namespaces() override {
    std::vector<uint32_t> out = state_.detached;
    for (const auto& ns : state_.namespaces) out.push_back(ns.info.nsid);
    return out;
  }
  Result<std::vector<uint32_t>> namespaces_attached_to(uint16_t cntlid) override {
    const auto found = state_.attached_to.find(cntlid);
    return found == state_.attached_to.end() ? std::vector<uint32_t>{} : found->second;
  }

 private:
  static Error refused(const std::string& what) {
    return Error{ErrorCode::io_error, what + " /dev/nvme0: the controller answered \"Invalid Field in Command\""};
  }
  FakeNvmeState& state_;
};

class FakeNvmeOpener final : public nvme::ControllerOpener {
 public:
  explicit FakeNvmeOpener(FakeNvmeState& state) : state_(state) {}
  Result<std::unique_ptr<nvme::Controller>> open(const std::string& controller_device,
                                                 nvme::NamespaceDevices namespace_devices) override {
    state_.opened.push_back(controller_device);
    state_.namespace_devices = namespace_devices();
    return std::unique_ptr<nvme::Controller>(std::make_unique<FakeNvmeController>(state_));
  }
  // As VFIO answers: a group another process holds open is busy (EBUSY at its open).
  Result<std::unique_ptr<nvme::Controller>> open_vfio(const std::string& address, int group) override {
    const std::string path = "/dev/vfio/" + std::to_string(group);
    if (state_.group_busy) return errno_error(EBUSY, "open", path);
    state_.opened.push_back("vfio " + address + " in " + path);
    return std::unique_ptr<nvme::Controller>(std::make_unique<FakeNvmeController>(state_));
  }

 private:
  FakeNvmeState& state_;
};

// One namespace of `blocks` 512-byte blocks whose deallocated blocks read as zeros.
inline FakeNamespace fake_namespace(uint32_t nsid, uint64_t blocks = 1024, uint8_t dlfeat = 1) {
  return FakeNamespace{nvme::NamespaceInfo{nsid, blocks, 512, dlfeat}, {}, false};
}

}  // namespace hostagent::testing
