// devices/device_cleaning: each cleaning step, and which a device's role gets.
#include "hostagent/devices/device_cleaning.hpp"

#include <algorithm>

#include "hostagent/common/text.hpp"
#include "hostagent/vfio/expansion_rom.hpp"
#include "program_run.hpp"

namespace hostagent::devices {
namespace {

StepOutcome passed(std::string detail) {
  return {StepResult::passed, std::move(detail)};
}
StepOutcome failed(std::string detail) {
  return {StepResult::failed, std::move(detail)};
}
StepOutcome skipped(std::string detail) {
  return {StepResult::skipped, std::move(detail)};
}

std::string pci_dir(const PciAddress& address) {
  return kPciDevicesDir + address.to_string();
}

// "{address}" in each argument replaced by the device's address.
std::vector<std::string> scrub_argv(const std::vector<std::string>& configured, const PciAddress& address) {
  std::vector<std::string> argv = configured;
  for (auto& arg : argv) {
    for (auto at = arg.find("{address}"); at != std::string::npos; at = arg.find("{address}", at)) {
      arg.replace(at, 9, address.to_string());
      at += address.to_string().size();
    }
  }
  return argv;
}

// A program's output as one line of text the evidence holds (which is one-line XML-safe UTF-8):
// controls made spaces, bytes that are not UTF-8 shown as \xNN, and what still is not (U+FFFE) not
// shown at all.
std::string one_line(const std::string& output) {
  std::string line;
  for (const char c : output) {
    const auto byte = static_cast<unsigned char>(c);
    line += byte < 0x20 || byte == 0x7f ? ' ' : c;
  }
  while (!line.empty() && line.back() == ' ') line.pop_back();
  line = text::valid_utf8(line);
  if (!text::xml_text_problem(line, text::XmlText::one_line).empty()) return "(its output is not text)";
  return line;
}

// The operator's scrubber, while the GPU is on vfio-pci (where the host keeps its GPUs between
// VMs, and where no host driver can touch the memory being cleared).
StepOutcome scrub_step(const CleaningParts& parts, const numa::PciFunction& function) {
  const auto& configured = parts.hygiene->gpu_scrub;
  if (configured.empty()) return skipped("not scrubbed: no scrubber configured");
  auto driver = parts.sysfs->read_link_name(pci_dir(function.address) + "/driver");
  if (!driver.ok()) return failed(driver.error().message);
  if (*driver != std::optional<std::string>("vfio-pci")) {
    return failed("not scrubbed: the GPU is on " + driver->value_or("no driver") + ", not vfio-pci");
  }
  const auto argv = scrub_argv(configured, function.address);
  auto run = detail::run_program(argv, parts.hygiene->gpu_scrub_timeout);
  if (!run.ok()) return failed("the scrubber could not be started: " + run.error().message);
  const auto said = one_line(run->output);
  const std::string output = said.empty() ? "" : "; it said: " + said;
  if (run->timed_out) {
    return failed(argv.front() + " did not finish within " +
                  std::to_string(parts.hygiene->gpu_scrub_timeout.count() / 1000) + " s, and was killed" + output);
  }
  if (run->exit_code != 0) {
    return failed(argv.front() + " exited with " +
                  (run->exit_code < 0 ? std::string("a signal") : "status " + std::to_string(run->exit_code)) + output);
  }
  return passed("scrubbed by " + argv.front() + " (exit status 0)" + output);
}

bool is_vf(const numa::PciFunction& function) {
  return function.physfn.has_value();
}

StepOutcome reset_step(const CleaningParts& parts, const numa::PciFunction& function) {
  const auto identity = is_vf(function) ? vfio::vf_identity(function.class_code)
                                        : vfio::function_identity(function.vendor_id, function.device_id);
  auto report = vfio::reset_unbound_and_verify(*parts.sysfs, *parts.writer, *parts.config_space, function.address,
                                               identity, parts.hygiene->reset_polling);
  if (!report.ok()) return failed(report.error().message);
  const std::string methods = report->methods.empty() ? "the kernel's" : "\"" + report->methods + "\"";
  const std::string driver =
      report->host_driver.empty() ? "" : "; off " + report->host_driver + " for it, and back on it after";
  return passed("reset by " + methods + " methods; answered as " + identity.name + " after " +
                std::to_string(report->polls) + (report->polls == 1 ? " read" : " reads") + driver);
}

// A ROM a tenant could have rewritten is compared with what the operator knows to be good: its
// hash is in the evidence either way.
StepOutcome firmware_step(const CleaningParts& parts, const numa::PciFunction& function) {
  auto rom = vfio::read_expansion_rom(*parts.sysfs, *parts.writer, function.address);
  if (!rom.ok()) return failed(rom.error().message);
  if (!*rom) return skipped("no expansion ROM");
  const std::string id = vfio::function_identity(function.vendor_id, function.device_id).name;
  const std::string seen = "ROM of " + std::to_string((*rom)->size) + " bytes, sha256 " + (*rom)->sha256;
  const auto known = parts.hygiene->firmware.find({function.vendor_id, function.device_id});
  if (known == parts.hygiene->firmware.end()) {
    return skipped(seen + ": not checked, hygiene.firmware has no known-good list for " + id);
  }
  if (std::find(known->second.begin(), known->second.end(), (*rom)->sha256) == known->second.end()) {
    return failed(seen + " is not on the known-good list for " + id +
                  " (hygiene.firmware): the firmware may have been rewritten");
  }
  return passed(seen + ", on the known-good list for " + id);
}

// Read back, not trusted: release reset the VF (sriov::reset), and this shows the driver holds it.
StepOutcome vf_neutral_step(const CleaningParts& parts, const numa::PciFunction& function) {
  const auto* pf = function.physfn ? parts.host->find(*function.physfn) : nullptr;
  if (pf == nullptr || !pf->sriov || pf->net_interfaces.empty()) {
    return skipped("no PF network interface to read its settings through");
  }
  const auto& vfs = pf->sriov->vfs;
  const auto at = std::find(vfs.begin(), vfs.end(), function.address);
  if (at == vfs.end()) return failed("not among the virtfn links of its PF " + pf->address.to_string());
  const auto& netdev = pf->net_interfaces.front();
  const int index = static_cast<int>(at - vfs.begin());
  auto state = parts.netlink->read(netdev, index);
  if (!state.ok()) return failed(state.error().message);
  std::string off;
  const auto differs = [&](bool away, const std::string& what) {
    if (away) off += (off.empty() ? "" : ", ") + what;
  };
  differs(state->mac != "00:00:00:00:00:00", "mac " + state->mac);
  differs(state->vlan != 0, "vlan " + std::to_string(state->vlan));
  differs(state->qos != 0, "qos " + std::to_string(state->qos));
  differs(state->trust.value_or(false), "trust on");
  differs(!state->spoofchk.value_or(true), "spoofchk off");
  differs(state->min_tx_rate_mbps != 0 || state->max_tx_rate_mbps != 0, "a rate limit");
  const std::string vf = sriov::vf_name(netdev, index);
  if (!off.empty()) return failed(vf + " is not neutral: " + off);
  return passed(vf + " neutral: mac 00:00:00:00:00:00, vlan 0, trust off, spoofchk on, no rate limit");
}

// The controller the kernel's nvme driver made of `function` ("nvme3"), once it is live. The
// driver names it under the PCI device (drivers/nvme/host/core.c nvme_init_ctrl) and brings it up
// in the background after a bind (nvme_reset_work): a controller released to the driver a moment
// ago is waited for, 30 s at most.
Result<std::string> live_controller(const CleaningParts& parts, const PciAddress& function) {
  HA_TRY(const auto driver, parts.sysfs->read_link_name(pci_dir(function) + "/driver"));
  if (driver != std::optional<std::string>("nvme")) {
    return Error{ErrorCode::io_error, function.to_string() + " is on " + driver.value_or("no driver") +
                                          ", neither vfio-pci nor the kernel's nvme driver, which hostagent erases "
                                          "and reads through"};
  }
  const auto& polling = parts.hygiene->reset_polling;
  constexpr int kPolls = 300;
  std::string state = "not there";
  for (int poll = 1;; ++poll) {
    HA_TRY(const auto names, parts.sysfs->list(pci_dir(function) + "/nvme", true));
    if (names.size() == 1) {
      auto read = parts.sysfs->read(pci_dir(function) + "/nvme/" + names.front() + "/state");
      state = read.ok() ? *read : read.error().message;
      if (state == "live") return names.front();
    }
    if (poll == kPolls) {
      return Error{ErrorCode::io_error, "the nvme driver did not bring " + function.to_string() +
                                            "'s controller up (its state: " + state + ")"};
    }
    polling.sleep(polling.interval);
  }
}

// The generic devices of the controller's namespaces (ngNnM, which the driver puts under the
// controller: nvme_add_ns_cdev), read when asked: the namespace scan follows a bind or a format.
nvme::NamespaceDevices generic_devices(SysfsRoot sysfs, std::string controller_dir) {
  return [sysfs = std::move(sysfs), dir = std::move(controller_dir)] {
    std::vector<std::string> devices;
    const auto names = sysfs.list(dir, true);
    if (!names.ok()) return devices;
    for (const auto& name : *names) {
      if (name.rfind("ng", 0) == 0) devices.push_back("/dev/" + name);
    }
    return devices;
  };
}

Result<std::unique_ptr<nvme::Controller>> open_controller(const CleaningParts& parts, const PciAddress& function) {
  HA_TRY(const auto name, live_controller(parts, function));
  return parts.nvme->open("/dev/" + name, generic_devices(*parts.sysfs, pci_dir(function) + "/nvme/" + name));
}

// A VF's controller holds data only through namespaces attached to it, which its PF manages: the
// PF's secondary controller list names the VF's controller, and each namespace its controllers.
// None attached: there is nothing of the tenant's to erase. One attached is refused: hostagent
// does not erase a VF's namespace yet, and a device not shown clean is not given again. The PF is
// asked even where its OACS does not claim virtualization management (QEMU 7.2 answers the list
// and leaves the bit clear): a PF that cannot answer fails the step with its own words.
StepOutcome vf_namespaces_step(const CleaningParts& parts, const numa::PciFunction& function) {
  const auto* pf = parts.host->find(*function.physfn);
  if (pf == nullptr || !pf->sriov) return failed("its PF is not an SR-IOV function of this host");
  const auto& vfs = pf->sriov->vfs;
  const auto at = std::find(vfs.begin(), vfs.end(), function.address);
  if (at == vfs.end()) return failed("not among the virtfn links of its PF " + pf->address.to_string());
  const auto vf_number = static_cast<uint16_t>(at - vfs.begin() + 1);
  auto controller = open_controller(parts, pf->address);
  if (!controller.ok()) return failed(controller.error().message);
  auto scid = (*controller)->secondary_controller(vf_number);
  if (!scid.ok()) return failed(scid.error().message);
  if (!*scid)
    return failed("its PF " + pf->address.to_string() + " lists no controller for VF " + std::to_string(vf_number));
  const std::string which = "controller " + std::to_string(**scid) + " of PF " + pf->address.to_string();
  auto attached = (*controller)->namespaces_attached_to(**scid);
  if (!attached.ok()) return failed(attached.error().message);
  if (attached->empty()) return passed("nothing to erase: no namespace is attached to the VF's " + which);
  std::string nsids;
  for (const auto nsid : *attached) nsids += (nsids.empty() ? "" : ", ") + std::to_string(nsid);
  return failed("namespace " + nsids + " is attached to the VF's " + which +
                ", and hostagent does not erase a VF's namespaces yet");
}

// A whole controller on vfio-pci, where hostagent keeps the tenants' controllers (bound at start,
// left there when a VM lets them go): driven through VFIO, by its IOMMU group. No host driver ever
// binds it, so the host never scans, probes or assembles what the tenant left on it.
Result<std::unique_ptr<nvme::Controller>> open_on_vfio(const CleaningParts& parts, const PciAddress& function) {
  HA_TRY(const auto group, parts.sysfs->read_link_number(pci_dir(function) + "/iommu_group"));
  if (!group) return Error{ErrorCode::io_error, function.to_string() + " has no IOMMU group to drive it through"};
  return parts.nvme->open_vfio(function.to_string(), *group);
}

// A whole controller the tenant held: erased with the strongest method it offers, then read back,
// through VFIO where it is on vfio-pci. On the kernel's nvme driver (an install that does not bind
// at start, or a controller an older hostagent gave back) through that driver.
StepOutcome erase_step(const CleaningParts& parts, const numa::PciFunction& function) {
  HA_ASSERT(parts.nvme != nullptr);
  if (is_vf(function)) return vf_namespaces_step(parts, function);
  auto driver = parts.sysfs->read_link_name(pci_dir(function.address) + "/driver");
  if (!driver.ok()) return failed(driver.error().message);
  const bool on_vfio = *driver == std::optional<std::string>("vfio-pci");
  auto controller = on_vfio ? open_on_vfio(parts, function.address) : open_controller(parts, function.address);
  if (!controller.ok()) return failed(controller.error().message);
  auto report = nvme::erase_controller(**controller, parts.hygiene->nvme_erase);
  if (!report.ok()) return failed(report.error().message);
  return passed(nvme::describe(*report) + (on_vfio ? "; through VFIO, on vfio-pci" : "; through the nvme driver"));
}

// The host's uses of the function, read now; "" when it has none.
Result<std::string> host_uses(const CleaningParts& parts, const PciAddress& address) {
  HA_ASSERT(parts.host_use != nullptr);
  HA_TRY(const auto uses, parts.host_use());
  std::string reasons;
  for (const auto& use : uses) {
    if (use.address == address) reasons += (reasons.empty() ? "" : "; ") + use.reason;
  }
  return reasons;
}

// A step, run only while the host does not use the device: asked again right before it, since a
// disk mounted or an interface addressed after the model was read is the host's all the same.
CleaningStep guarded(const CleaningParts& parts, const numa::PciFunction& function, CleaningStep step) {
  step.run = [parts, address = function.address, name = step.name, run = std::move(step.run)] {
    const auto uses = host_uses(parts, address);
    if (!uses.ok()) return failed("not run: what the host uses could not be read: " + uses.error().message);
    if (!uses->empty()) {
      return failed("not run: the host uses " + address.to_string() + " (" + *uses +
                    "), and hostagent never resets, erases or scrubs a device the host uses");
    }
    return run();
  };
  return step;
}

}  // namespace

const char* to_string(StepResult result) noexcept {
  switch (result) {
    case StepResult::passed:
      return "passed";
    case StepResult::failed:
      return "failed";
    case StepResult::skipped:
      return "skipped";
  }
  return "failed";
}

std::vector<CleaningStep> host_cleaning_steps(const CleaningParts& parts, const numa::PciFunction& function) {
  std::vector<CleaningStep> steps;
  // Outside the preparer's lock: for a function on a host driver the kernel's reset waits for that
  // driver's own (pci_reset_function: reset_prepare, reset_done), which a wedged device never
  // finishes, and creates must not wait behind it. The writer (one write(2) per call) and libpci's
  // config space (its own lock) are safe from two threads; the function is out of placement.
  steps.push_back({"reset", [parts, function] { return reset_step(parts, function); }, false});
  steps.push_back({"firmware", [parts, function] { return firmware_step(parts, function); }});
  if (function.role == numa::PciRole::nvme) {
    // Outside the preparer's lock: it writes no sysfs file, and a sanitize may run for minutes.
    steps.push_back({"erase", [parts, function] { return erase_step(parts, function); }, false});
  }
  if (function.role == numa::PciRole::gpu) {
    steps.push_back({"scrub", [parts, function] { return scrub_step(parts, function); }, false});
  }
  if (function.role == numa::PciRole::nic && is_vf(function)) {
    steps.push_back({"vf-neutral", [parts, function] { return vf_neutral_step(parts, function); }});
  }
  for (auto& step : steps) step = guarded(parts, function, std::move(step));
  return steps;
}

std::vector<CleaningStep> libvirt_managed_cleaning_steps(const numa::PciFunction& function, ManagedHost host) {
  const auto managed = [](std::string what) { return [what = std::move(what)] { return skipped(what); }; };
  std::vector<CleaningStep> steps;
  steps.push_back({"reset", managed("libvirt resets a managed hostdev as it gives it back to the host")});
  steps.push_back({"firmware", managed("not read: libvirt manages this host's devices")});
  if (function.role == numa::PciRole::nvme && host == ManagedHost::simulated) {
    steps.push_back({"erase", managed("not erased: a simulated host's NVMe has no media")});
  } else if (function.role == numa::PciRole::nvme) {
    // libvirt gives a managed hostdev back to its host driver (virHostdevReAttachPCIDevices) and
    // erases nothing: freeing it would give the next tenant this one's data.
    steps.push_back({"erase", [] {
                       return failed(
                           "not erased: under devices.preparation libvirt nothing erases an NVMe between tenants "
                           "(libvirt gives it back to the host's nvme driver as the VM left it); erase it by hand "
                           "and run hostagentctl quarantine clear, or set devices.preparation: hostagent, which "
                           "erases it");
                     }});
  }
  if (function.role == numa::PciRole::gpu) {
    steps.push_back({"scrub", managed("not scrubbed: no scrubber configured")});
  }
  if (function.role == numa::PciRole::nic && is_vf(function)) {
    steps.push_back({"vf-neutral", managed("libvirt restores a managed VF's settings as it gives it back")});
  }
  return steps;
}

}  // namespace hostagent::devices
