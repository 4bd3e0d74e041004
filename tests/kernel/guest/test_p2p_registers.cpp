// Inside the emulated GPU host: the registers of the peer-to-peer setting (Vela's setpci
// ECAP_ACS+0x6.w and ECAP_ATS+0x6.w) on QEMU's ports and endpoints, written through the config
// attribute as libpci does. The root ports have ACS with what Linux enabled at boot
// (pci_std_enable_acs: Source Validation, Request and Completion Redirect, Upstream Forwarding);
// the ATS endpoint has ATS, off until someone enables it.
#include <doctest/doctest.h>

#include "../emulated_host.hpp"
#include "guest_host.hpp"

namespace hostagent::testing::guest {
namespace {

namespace host = emulated_host;

constexpr int kAcsCapabilityRegister = 4;
constexpr int kAcsControlRegister = 6;
constexpr int kAtsControlRegister = 6;
constexpr uint16_t kLinuxAcs = 0x001d;  // SV | RR | CR | UF
constexpr uint16_t kDirectTranslated = 0x0040;
constexpr uint16_t kAtsEnable = 0x8000;

PciAddress nvme_root_port() {
  const auto nvmes = pci_functions(host::kNvmeVendor, host::kNvmeDevice);
  REQUIRE(!nvmes.empty());
  const auto port = parent_bridge(nvmes.front());
  REQUIRE(port.has_value());
  return *port;
}

TEST_CASE("a root port's ACS control holds what Linux enabled and takes Direct Translated P2P, then its old value") {
  const PciAddress port = nvme_root_port();
  const auto acs = ext_capability(port, kAcs);
  REQUIRE_MESSAGE(acs.has_value(), port.to_string() << " has no ACS capability");
  const uint16_t capability = read_config16(port, *acs + kAcsCapabilityRegister);
  const uint16_t before = read_config16(port, *acs + kAcsControlRegister);
  CHECK((capability & kDirectTranslated) != 0);
  CHECK(before == kLinuxAcs);

  write_config16(port, *acs + kAcsControlRegister, before | kDirectTranslated);
  CHECK(read_config16(port, *acs + kAcsControlRegister) == (before | kDirectTranslated));
  write_config16(port, *acs + kAcsControlRegister, before);
  CHECK(read_config16(port, *acs + kAcsControlRegister) == before);
}

TEST_CASE("the ATS endpoint's ATS is off, can be enabled and disabled again") {
  const auto endpoints = pci_functions(host::kAtsEndpointVendor, host::kAtsEndpointDevice);
  REQUIRE(endpoints.size() == 1);
  const PciAddress endpoint = endpoints.front();
  const auto ats = ext_capability(endpoint, kAts);
  REQUIRE_MESSAGE(ats.has_value(), endpoint.to_string() << " has no ATS capability");
  const uint16_t before = read_config16(endpoint, *ats + kAtsControlRegister);
  CHECK((before & kAtsEnable) == 0);

  write_config16(endpoint, *ats + kAtsControlRegister, before | kAtsEnable);
  CHECK(read_config16(endpoint, *ats + kAtsControlRegister) == (before | kAtsEnable));
  write_config16(endpoint, *ats + kAtsControlRegister, before);
  CHECK(read_config16(endpoint, *ats + kAtsControlRegister) == before);
}

TEST_CASE("the edu GPU stand-ins are conventional PCI functions without extended capabilities") {
  for (const auto& edu : pci_functions(host::kEduVendor, host::kEduDevice)) {
    INFO(edu.to_string());
    CHECK(sysfs().read_binary(pci_path(edu, "config")).value().size() == 256);
  }
}

}  // namespace
}  // namespace hostagent::testing::guest
