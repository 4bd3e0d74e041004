// The module's small textual forms: libvirt CPU lists, Linux cpumaps as NCCL reads them, NCCL's
// link-speed strings, and the MMIO window rule on plain numbers.
#include <doctest/doctest.h>

#include "mmio_window.hpp"
#include "text_format.hpp"
#include "vf_macs.hpp"

namespace hostagent::render::detail {
namespace {

TEST_CASE("id lists compress runs, sort and drop duplicates") {
  CHECK(id_list({}).empty());
  CHECK(id_list({3}) == "3");
  CHECK(id_list({48, 0, 1, 2, 49, 5, 1}) == "0-2,5,48-49");
}

TEST_CASE("cpumaps match the kernel's and the samples' widths") {
  CHECK(cpumap({}, 8) == "00");
  // Vela's sample: 48 vCPUs, cell 0 = 0-23, cell 1 = 24-47.
  std::vector<int> low, high;
  for (int i = 0; i < 24; ++i) low.push_back(i), high.push_back(24 + i);
  CHECK(cpumap(low, 48) == "0000,00ffffff");
  CHECK(cpumap(high, 48) == "ffff,ff000000");
  // Azure ND96asr v4: 96 vCPUs, node 0 = 0-23.
  CHECK(cpumap(low, 96) == "00000000,00000000,00ffffff");
}

TEST_CASE("link speeds are spelled the way NCCL's table knows them") {
  CHECK(nccl_link_speed(2.5) == "2.5 GT/s");
  CHECK(nccl_link_speed(16.0) == "16 GT/s");
  CHECK(nccl_link_speed(32.0) == "32 GT/s");
  CHECK(nccl_link_speed(64.0) == "64.0 GT/s PCIe");
  CHECK_FALSE(nccl_link_speed(12.0).has_value());
}

TEST_CASE("the MMIO window: twice the 64-bit prefetchable BARs, a power of two, at least QEMU's default") {
  numa::PciFunction gpu;
  gpu.bars = {{0, 16ULL << 20, false, false},
              {1, 128ULL << 30, true, true},
              {3, 32ULL << 20, true, true},
              {6, 1ULL << 20, false, true}};
  numa::PciFunction nvme;
  nvme.bars = {{0, 16 << 10, true, false}};
  CHECK(size_mmio_window({&nvme}).window_bytes == 0);
  const auto one = size_mmio_window({&gpu, &nvme});
  CHECK(one.prefetchable_bar_bytes == (128ULL << 30) + (32ULL << 20));
  CHECK(one.window_bytes == 512ULL << 30);
  numa::PciFunction small;
  small.bars = {{0, 256ULL << 20, true, true}};
  CHECK(size_mmio_window({&small}).window_bytes == 32ULL << 30);
}

TEST_CASE("derived MACs are stable per host, VM and index, and differ across hosts and VMs") {
  const std::string host = "3d1219c7c4c5404aaa1f6d2a48adfda4";
  const std::string vm = "6f3b8c1e-2a4d-4e5f-9a0b-1c2d3e4f5a6b";
  CHECK(derived_mac(host, vm, 0) == derived_mac(host, vm, 0));
  CHECK(derived_mac(host, vm, 0) != derived_mac(host, vm, 1));
  CHECK(derived_mac(host, vm, 255).str().substr(15) == "ff");
  // One VM id on another host (same-named VMs of one fabric), or another VM on this one: other MACs.
  CHECK(derived_mac("another-host", vm, 0) != derived_mac(host, vm, 0));
  CHECK(derived_mac(host, "6f3b8c1e-2a4d-4e5f-9a0b-1c2d3e4f5a6c", 0) != derived_mac(host, vm, 0));
  CHECK(derived_mac("ab", "c", 0) != derived_mac("a", "bc", 0));
  // Every derived address is locally administered unicast: first octet's low bits 1 (U/L) and 0 (I/G).
  for (int i = 0; i < 1000; ++i) {
    const std::string mac = derived_mac(host, "vm-" + std::to_string(i), 0);
    CAPTURE(mac);
    CHECK((std::stoul(mac.substr(0, 2), nullptr, 16) & 0x03) == 0x02);
  }
}

}  // namespace
}  // namespace hostagent::render::detail
