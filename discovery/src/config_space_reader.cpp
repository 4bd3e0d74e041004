#include "config_space_reader.hpp"

extern "C" {
#include <pci/pci.h>
}

#include <string>

namespace hostagent::discovery::detail {
namespace {

numa::PciePortType port_type_from(unsigned code) {
  // PCIe Base Spec 7.5.3.2, Device/Port Type field of the PCI Express Capabilities Register.
  switch (code) {
    case PCI_EXP_TYPE_ENDPOINT:
      return numa::PciePortType::endpoint;
    case PCI_EXP_TYPE_LEG_END:
      return numa::PciePortType::legacy_endpoint;
    case PCI_EXP_TYPE_ROOT_PORT:
      return numa::PciePortType::root_port;
    case PCI_EXP_TYPE_UPSTREAM:
      return numa::PciePortType::upstream;
    case PCI_EXP_TYPE_DOWNSTREAM:
      return numa::PciePortType::downstream;
    case PCI_EXP_TYPE_PCI_BRIDGE:
      return numa::PciePortType::pcie_to_pci;
    case PCI_EXP_TYPE_PCIE_BRIDGE:
      return numa::PciePortType::pci_to_pcie;
    case PCI_EXP_TYPE_ROOT_INT_EP:
      return numa::PciePortType::rc_integrated;
    case PCI_EXP_TYPE_ROOT_EC:
      return numa::PciePortType::rc_event_collector;
    default:
      return numa::PciePortType::unknown;
  }
}

void read_pcie(pci_dev* dev, ConfigSpaceInfo& info) {
  pci_cap* cap = pci_find_cap(dev, PCI_CAP_ID_EXP, PCI_CAP_NORMAL);
  if (cap == nullptr) return;
  info.has_pcie_capability = true;
  const unsigned flags = pci_read_word(dev, cap->addr + PCI_EXP_FLAGS);
  info.port_type = port_type_from((flags & PCI_EXP_FLAGS_TYPE) >> 4);
  const uint16_t devctl = pci_read_word(dev, cap->addr + PCI_EXP_DEVCTL);
  info.max_read_request_bytes = 128 << ((devctl & PCI_EXP_DEVCTL_READRQ) >> 12);
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
    info.acs =
        numa::AcsState{pci_read_word(dev, acs->addr + PCI_ACS_CAP), pci_read_word(dev, acs->addr + PCI_ACS_CTRL)};
  }
  if (pci_cap* ats = pci_find_cap(dev, PCI_EXT_CAP_ID_ATS, PCI_CAP_EXTENDED); ats != nullptr) {
    const uint16_t ctrl = pci_read_word(dev, ats->addr + PCI_ATS_CTRL);
    info.ats = numa::AtsState{(ctrl & PCI_ATS_CTRL_ENABLE) != 0, PCI_ATS_CTRL_STU(ctrl)};
  }
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

Result<ConfigSpaceReader> ConfigSpaceReader::open(const std::filesystem::path& sysfs_bus_pci) {
  HA_TRY(auto session, LibpciSession::open(sysfs_bus_pci));
  return ConfigSpaceReader(std::move(session));
}

ConfigSpaceInfo ConfigSpaceReader::read(const PciAddress& address) const {
  ConfigSpaceInfo info;
  pci_dev* dev =
      pci_get_dev(session_.access(), static_cast<int>(address.domain), address.bus, address.device, address.function);
  if (dev == nullptr) return info;
  const bool completed = LibpciSession::call([dev, &info] {
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
  pci_free_dev(dev);
  return info;
}

}  // namespace hostagent::discovery::detail
