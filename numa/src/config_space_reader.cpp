#include "config_space_reader.hpp"

extern "C" {
#include <pci/pci.h>
}

#include <csetjmp>
#include <cstdarg>
#include <cstdio>
#include <string>

namespace hostagent::numa::detail {
namespace {

// libpci declares its error callback noreturn ("write error message and quit"); the default one
// calls exit(). A daemon must not exit because one config file is odd, so the callback jumps back
// to the libpci call in progress. libpci is C: no destructors are skipped by the jump.
thread_local std::jmp_buf* libpci_escape = nullptr;
thread_local std::string libpci_last_error;

// GNU attribute rather than [[noreturn]]: libpci's callback type carries it, and clang checks it.
__attribute__((noreturn)) void on_libpci_error(char* msg, ...) {
  char buf[512];
  va_list args;
  va_start(args, msg);
  std::vsnprintf(buf, sizeof buf, msg, args);
  va_end(args);
  libpci_last_error = buf;
  if (libpci_escape != nullptr) std::longjmp(*libpci_escape, 1);
  std::fprintf(stderr, "hostagent: libpci error outside a guarded call: %s\n", buf);
  std::abort();
}

void on_libpci_warning(char*, ...) {}  // missing attributes are reported by our own reads

PciePortType port_type_from(unsigned code) {
  // PCIe Base Spec 7.5.3.2, Device/Port Type field of the PCI Express Capabilities Register.
  switch (code) {
    case PCI_EXP_TYPE_ENDPOINT:
      return PciePortType::endpoint;
    case PCI_EXP_TYPE_LEG_END:
      return PciePortType::legacy_endpoint;
    case PCI_EXP_TYPE_ROOT_PORT:
      return PciePortType::root_port;
    case PCI_EXP_TYPE_UPSTREAM:
      return PciePortType::upstream;
    case PCI_EXP_TYPE_DOWNSTREAM:
      return PciePortType::downstream;
    case PCI_EXP_TYPE_PCI_BRIDGE:
      return PciePortType::pcie_to_pci;
    case PCI_EXP_TYPE_PCIE_BRIDGE:
      return PciePortType::pci_to_pcie;
    case PCI_EXP_TYPE_ROOT_INT_EP:
      return PciePortType::rc_integrated;
    case PCI_EXP_TYPE_ROOT_EC:
      return PciePortType::rc_event_collector;
    default:
      return PciePortType::unknown;
  }
}

void read_pcie(pci_dev* dev, ConfigSpaceInfo& info) {
  pci_cap* cap = pci_find_cap(dev, PCI_CAP_ID_EXP, PCI_CAP_NORMAL);
  if (cap == nullptr) return;
  info.has_pcie_capability = true;
  const unsigned flags = pci_read_word(dev, cap->addr + PCI_EXP_FLAGS);
  info.port_type = port_type_from((flags & PCI_EXP_FLAGS_TYPE) >> 4);
  const uint32_t lnkcap = pci_read_long(dev, cap->addr + PCI_EXP_LNKCAP);
  const uint16_t lnksta = pci_read_word(dev, cap->addr + PCI_EXP_LNKSTA);
  // Link Capabilities bits 3:0 speed, 9:4 width; Link Status the same layout (7.5.3.6, 7.5.3.8).
  if (const double gts = pcie_speed_gts(static_cast<int>(lnkcap & 0xf)); gts > 0) info.link.max_speed_gts = gts;
  if (const int width = static_cast<int>((lnkcap >> 4) & 0x3f); width > 0) info.link.max_width = width;
  if (const double gts = pcie_speed_gts(lnksta & 0xf); gts > 0) info.link.speed_gts = gts;
  if (const int width = (lnksta >> 4) & 0x3f; width > 0) info.link.width = width;
}

void read_extended(pci_dev* dev, ConfigSpaceInfo& info) {
  if (pci_cap* acs = pci_find_cap(dev, PCI_EXT_CAP_ID_ACS, PCI_CAP_EXTENDED); acs != nullptr) {
    info.acs = AcsState{pci_read_word(dev, acs->addr + PCI_ACS_CAP), pci_read_word(dev, acs->addr + PCI_ACS_CTRL)};
  }
  if (pci_cap* ats = pci_find_cap(dev, PCI_EXT_CAP_ID_ATS, PCI_CAP_EXTENDED); ats != nullptr) {
    const uint16_t ctrl = pci_read_word(dev, ats->addr + PCI_ATS_CTRL);
    info.ats = AtsState{(ctrl & PCI_ATS_CTRL_ENABLE) != 0, PCI_ATS_CTRL_STU(ctrl)};
  }
}

// Runs f with libpci errors turned into a false return. Only trivially destructible frames may lie
// between here and the jump (f's and libpci's), and f writes its results outside this frame, so
// nothing here is modified between setjmp and longjmp.
template <typename F>
bool call_guarded(F&& f) {
  std::jmp_buf escape;
  libpci_escape = &escape;
  if (setjmp(escape) != 0) {
    libpci_escape = nullptr;
    return false;
  }
  f();
  libpci_escape = nullptr;
  return true;
}

}  // namespace

double pcie_speed_gts(int speed_code) {
  switch (speed_code) {
    case 1:
      return 2.5;
    case 2:
      return 5.0;
    case 3:
      return 8.0;
    case 4:
      return 16.0;
    case 5:
      return 32.0;
    case 6:
      return 64.0;
    default:
      return 0.0;
  }
}

void ConfigSpaceReader::AccessDeleter::operator()(pci_access* access) const {
  pci_cleanup(access);
}

Result<ConfigSpaceReader> ConfigSpaceReader::open(const std::filesystem::path& sysfs_bus_pci) {
  std::unique_ptr<pci_access, AccessDeleter> access(pci_alloc());
  if (!access) return Error{ErrorCode::internal, "pci_alloc failed"};
  access->method = PCI_ACCESS_SYS_BUS_PCI;
  access->error = on_libpci_error;
  access->warning = on_libpci_warning;
  std::string path = sysfs_bus_pci.string();
  pci_set_param(access.get(), const_cast<char*>("sysfs.path"), path.data());
  pci_access* raw = access.get();
  if (!call_guarded([raw] { pci_init(raw); })) {
    return Error{ErrorCode::io_error, "libpci on " + path + ": " + libpci_last_error};
  }
  return ConfigSpaceReader(std::move(access));
}

ConfigSpaceInfo ConfigSpaceReader::read(const PciAddress& address) const {
  ConfigSpaceInfo info;
  pci_dev* dev =
      pci_get_dev(access_.get(), static_cast<int>(address.domain), address.bus, address.device, address.function);
  if (dev == nullptr) return info;
  const bool completed = call_guarded([dev, &info] {
    uint8_t header[64];
    // A config file shorter than the standard header (or absent) has nothing to decode.
    if (pci_read_block(dev, 0, header, sizeof header) != 0) {
      info.readable = true;
      read_pcie(dev, info);
      read_extended(dev, info);
    }
  });
  // Half-read config space is worse than none: callers treat it as the device's truth.
  if (!completed) info = ConfigSpaceInfo{};
  libpci_last_error.clear();
  pci_free_dev(dev);
  return info;
}

}  // namespace hostagent::numa::detail
