// What a domain hostagent did not make holds, read from its XML: Vela's own reference guest, and
// the forms libvirt allows (cpuset exclusions, a floating vCPU set, a memory nodeset, no NUMA
// binding), with an error naming what cannot be read.
#include <doctest/doctest.h>

#include "hostagent/common/text_file.hpp"
#include "hostagent/state/domain_holdings.hpp"
#include "test_support.hpp"

namespace hostagent::state::testing {
namespace {

constexpr uint64_t kGiBytes = 1ULL << 30U;
constexpr uint64_t kTwoMiB = 2ULL << 20U;

DomainHoldings held(const std::string& xml) {
  auto holdings = domain_holdings("other", xml, kTwoMiB);
  REQUIRE_MESSAGE(holdings.ok(), holdings.error().message);
  return std::move(holdings).value();
}

TEST_CASE("Vela's reference guest holds its 48 pinned CPUs, its 12 passthrough functions and 375 GiB a node") {
  const auto data = hostagent::testing::reference_data_or_skip();
  if (!data) return;
  const auto xml = read_text_file(*data / "vela" / "sample-optimized-a100-vm-q35.xml");
  REQUIRE_MESSAGE(xml.ok(), xml.error().message);
  const auto holdings = held(*xml);
  CHECK(holdings.allocation.vm == "other");
  std::vector<int> cpus(48);
  for (int i = 0; i < 48; ++i) cpus[static_cast<std::size_t>(i)] = i;
  CHECK(holdings.allocation.cpus == cpus);
  REQUIRE(holdings.allocation.devices.size() == 12);
  CHECK(holdings.allocation.devices.front().to_string() == "0000:3f:00.2");
  CHECK(holdings.allocation.hugepage_size_bytes == kGiBytes);
  CHECK(holdings.allocation.hugepages == std::map<int, uint64_t>{{0, 375}, {1, 375}});
  CHECK(holdings.uncounted.empty());
}

TEST_CASE("a floating vCPU set with exclusions, a memory nodeset and the default page size are held") {
  const auto holdings = held(R"(<domain type='kvm'><name>other</name>
    <memory unit='GiB'>6</memory>
    <memoryBacking><hugepages/></memoryBacking>
    <vcpu placement='static' cpuset='8-15,^10'>4</vcpu>
    <cputune><vcpupin vcpu='0' cpuset='20'/><emulatorpin cpuset='2-3'/></cputune>
    <numatune><memory mode='strict' nodeset='0-1'/></numatune>
    <devices>
      <hostdev mode='subsystem' type='pci' managed='yes'>
        <source><address domain='0x0000' bus='0x1b' slot='0x00' function='0x1'/></source>
        <address type='pci' domain='0x0000' bus='0x05' slot='0x00' function='0x0'/>
      </hostdev>
      <hostdev mode='subsystem' type='usb'><source><vendor id='0x1234'/></source></hostdev>
      <interface type='network'><source network='default'/></interface>
    </devices></domain>)");
  CHECK(holdings.allocation.cpus == std::vector<int>{2, 3, 8, 9, 11, 12, 13, 14, 15, 20});
  REQUIRE(holdings.allocation.devices.size() == 1);  // the USB device is not a PCI function
  CHECK(holdings.allocation.devices.front().to_string() == "0000:1b:00.1");
  CHECK(holdings.allocation.hugepage_size_bytes == kTwoMiB);
  CHECK(holdings.allocation.hugepages == std::map<int, uint64_t>{{0, 1536}, {1, 1536}});
  CHECK(holdings.uncounted.empty());
}

TEST_CASE("unpinned vCPUs and hugepages bound to no node are said, not counted") {
  const auto holdings = held(R"(<domain type='kvm'><name>other</name>
    <memory unit='KiB'>4194304</memory><memoryBacking><hugepages><page size='1' unit='G'/></hugepages></memoryBacking>
    <vcpu>8</vcpu><devices/></domain>)");
  CHECK(holdings.allocation.cpus.empty());
  CHECK(holdings.allocation.hugepages.empty());
  REQUIRE(holdings.uncounted.size() == 2);
  CHECK(holdings.uncounted[0].find("vCPUs are not pinned") != std::string::npos);
  CHECK(holdings.uncounted[1].find("bound to no host node") != std::string::npos);
  // Without hugepages, its memory is the kernel's to give, not a pool's.
  const auto plain = held("<domain><name>other</name><memory>1048576</memory><vcpu cpuset='4'>1</vcpu></domain>");
  CHECK(plain.allocation.cpus == std::vector<int>{4});
  CHECK(plain.allocation.hugepages.empty());
  CHECK(plain.uncounted.empty());
}

TEST_CASE("a domain whose holdings cannot be read is refused with the domain and the element named") {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"<domain", "does not parse"},
      {"<other/>", "no <domain> element"},
      {"<domain><vcpu cpuset='3-1'>1</vcpu></domain>", "vcpu cpuset \"3-1\""},
      {"<domain><cputune><vcpupin vcpu='0' cpuset='x'/></cputune></domain>", "vcpupin cpuset"},
      {"<domain><devices><hostdev mode='subsystem' type='pci'><source><address domain='0x0000' bus='0x1b' "
       "slot='0x20' function='0x0'/></source></hostdev></devices></domain>",
       "slot \"0x20\""},
      {"<domain><memory unit='parsecs'>1</memory><memoryBacking><hugepages/></memoryBacking>"
       "<numatune><memory nodeset='0'/></numatune></domain>",
       "\"parsecs\""},
  };
  for (const auto& one : cases) {
    const std::string& xml = one.first;
    const std::string& named = one.second;
    CAPTURE(xml);
    const auto read = domain_holdings("other", xml, kTwoMiB);
    REQUIRE_FALSE(read.ok());
    CHECK(read.error().code == ErrorCode::parse_error);
    CHECK_MESSAGE(read.error().message.find("domain other") != std::string::npos, read.error().message);
    CHECK_MESSAGE(read.error().message.find(named) != std::string::npos, read.error().message);
  }
}

}  // namespace
}  // namespace hostagent::state::testing
