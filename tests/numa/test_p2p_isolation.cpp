// numa/p2p_isolation on the vela2 simulated host: which ports a peer-to-peer VM gets relaxed, which
// it does not and why, and what a relaxed domain keeps from the VMs placed after it.
//
// vela2's GPU stack R: R:02.0 root port -> (R+1):00.0 switch -> (R+2):00.0 (GPU), 01.0 (NIC PF with
// 4 VFs), 02.0 (NVMe). Stack 0x15 holds GPU 18:00.0, PF 19:00.0 with VFs 19:00.1-00.4, NVMe 1a:00.0.
#include <doctest/doctest.h>

#include <algorithm>
#include <set>

#include "hostagent/numa/host_use.hpp"
#include "hostagent/numa/p2p_isolation.hpp"
#include "hostagent/numa/placement.hpp"
#include "simulated_hosts.hpp"
#include "test_support.hpp"

namespace hostagent::numa {
namespace {

using hostagent::testing::kGiB;

PciAddress at(const char* text) {
  return PciAddress::parse(text).value();
}

const HostModel& vela2() {
  static const HostModel model = testing::discover_shared("vela2");
  return model;
}

HostPolicy policy() {
  return HostPolicy{{0, 96, 48, 144}, true, {}, {}, {}, {}};
}

PlacementRequest gpus(int count, bool peer_to_peer) {
  PlacementRequest r;
  r.vcpus = 16 * count;
  r.memory_bytes = 64 * kGiB * static_cast<uint64_t>(count);
  r.gpus = count;
  r.vfs_per_gpu = 1;
  r.peer_to_peer = peer_to_peer;
  return r;
}

Placement placed(const HostModel& host, const std::vector<Allocation>& existing, const PlacementRequest& r) {
  auto p = place(host, existing, policy(), r);
  REQUIRE_MESSAGE(p.ok(), p.error().message);
  return std::move(p).value();
}

std::set<PciAddress> as_set(const std::vector<PciAddress>& addresses) {
  return {addresses.begin(), addresses.end()};
}

// The three ACS ports of GPU stack R: its root port and the switch's GPU and NIC downstream ports.
std::set<PciAddress> stack_ports(int r) {
  return {PciAddress{0, static_cast<uint8_t>(r), 2, 0}, PciAddress{0, static_cast<uint8_t>(r + 2), 0, 0},
          PciAddress{0, static_cast<uint8_t>(r + 2), 1, 0}};
}

TEST_CASE("p2p domain: a downstream port reaches its whole switch, a root port its subtree") {
  const std::set<PciAddress> stack{at("0000:18:00.0"), at("0000:19:00.0"), at("0000:19:00.1"), at("0000:19:00.2"),
                                   at("0000:19:00.3"), at("0000:19:00.4"), at("0000:1a:00.0")};
  CHECK(as_set(p2p_domain(vela2(), at("0000:17:00.0"))) == stack);  // the GPU's downstream port
  CHECK(as_set(p2p_domain(vela2(), at("0000:15:02.0"))) == stack);  // the root port
  CHECK(p2p_domain(vela2(), at("0000:16:00.0")).empty());           // an upstream port is no ACS port
  CHECK(p2p_domain(vela2(), at("0000:18:00.0")).empty());           // nor is a GPU
  CHECK(as_set(acs_ports_above(vela2(), {at("0000:18:00.0"), at("0000:19:00.1")})) ==
        std::set<PciAddress>{at("0000:15:02.0"), at("0000:17:00.0"), at("0000:17:01.0")});
}

TEST_CASE("p2p placement: a VM that does not ask for peer-to-peer gets no port relaxed") {
  const auto p = placed(vela2(), {}, gpus(2, false));
  CHECK(p.p2p_ports.empty());
  CHECK(p.p2p_kept.empty());
  CHECK(allocation_of("a", p, kGiB).p2p_ports.empty());
}

TEST_CASE("p2p placement: alone on the host, every port above its GPUs and NICs is relaxed and recorded") {
  const auto p = placed(vela2(), {}, gpus(2, true));
  REQUIRE(p.gpus.size() == 2);
  std::set<PciAddress> expected;
  for (const auto& gpu : p.gpus) {
    const auto root = gpu.gpu.address.bus - 3;  // GPU at (R+3):00.0
    const auto ports = stack_ports(root);
    expected.insert(ports.begin(), ports.end());
  }
  CHECK(as_set(p.p2p_ports) == expected);
  CHECK(p.p2p_kept.empty());
  CHECK(as_set(allocation_of("a", p, kGiB).p2p_ports) == expected);
}

TEST_CASE("p2p placement: a port whose domain holds another VM's device is kept, naming it") {
  // b takes one VF with no GPU: the first free one, on stack 0x15.
  PlacementRequest vf_only;
  vf_only.vcpus = 4;
  vf_only.memory_bytes = 8 * kGiB;
  vf_only.extra_vfs = 1;
  const auto b = placed(vela2(), {}, vf_only);
  REQUIRE(b.extra_vfs.size() == 1);
  const auto b_vf = b.extra_vfs[0].address;
  REQUIRE(b_vf.bus == 0x19);
  const std::vector<Allocation> existing{allocation_of("b", b, kGiB)};

  auto all = gpus(8, true);
  all.vcpus = 128;
  all.memory_bytes = 1024 * kGiB;
  const auto a = placed(vela2(), existing, all);
  REQUIRE(a.gpus.size() == 8);
  CHECK(as_set(p2p_domain(vela2(), at("0000:15:02.0"))).count(b_vf) == 1);
  // Stack 0x15's three ports stay as the host set them; the seven other stacks are relaxed.
  std::set<PciAddress> kept;
  for (const auto& k : a.p2p_kept) {
    kept.insert(k.port);
    CHECK_MESSAGE(k.reason.find(b_vf.to_string() + " of vm b") != std::string::npos, k.reason);
  }
  CHECK(kept == stack_ports(0x15));
  CHECK(a.p2p_ports.size() == 7 * 3);
  for (const auto& port : stack_ports(0x15)) CHECK(as_set(a.p2p_ports).count(port) == 0);
  const auto root = std::find_if(a.p2p_kept.begin(), a.p2p_kept.end(),
                                 [](const KeptPort& k) { return k.port == at("0000:15:02.0"); });
  REQUIRE(root != a.p2p_kept.end());
  CHECK(root->reason == "below it is 0000:19:00.1 of vm b");
  const auto gpu_port = std::find_if(a.p2p_kept.begin(), a.p2p_kept.end(),
                                     [](const KeptPort& k) { return k.port == at("0000:17:00.0"); });
  REQUIRE(gpu_port != a.p2p_kept.end());
  CHECK(gpu_port->reason == "its switch holds 0000:19:00.1 of vm b");
}

TEST_CASE("p2p placement: a port whose domain holds a device the host uses is kept") {
  HostModel host = vela2();
  REQUIRE(mark_host_use(host, {{at("0000:1a:00.0"), "nvme1n1 mounted at /scratch"}}).empty());
  const auto p = placed(host, {}, gpus(1, true));
  REQUIRE(p.gpus[0].gpu.address == at("0000:18:00.0"));
  CHECK(p.p2p_ports.empty());
  REQUIRE(p.p2p_kept.size() == 3);
  CHECK(p.p2p_kept[0] ==
        KeptPort{at("0000:15:02.0"), "below it is 0000:1a:00.0, used by the host (nvme1n1 mounted at /scratch)"});
}

TEST_CASE("p2p placement: what a relaxed domain holds free is kept from the next VMs, with why") {
  const auto a = placed(vela2(), {}, gpus(1, true));
  REQUIRE(a.gpus[0].gpu.address == at("0000:18:00.0"));
  const std::vector<Allocation> existing{allocation_of("a", a, kGiB)};
  const auto fenced = fenced_devices(vela2(), existing);
  // The PF, its three other VFs and the NVMe: free, but reachable from a's GPU and VF.
  CHECK(fenced.size() == 5);
  CHECK(fenced.at(at("0000:1a:00.0")) == "in the peer-to-peer domain of 0000:15:02.0, relaxed for vm a");
  CHECK(fenced.count(a.gpus[0].gpu.address) == 0);

  // The next VM's GPU, VFs and NVMe come from other stacks.
  PlacementRequest next = gpus(1, false);
  next.extra_vfs = 3;
  next.nvme = 1;
  const auto b = placed(vela2(), existing, next);
  const auto b_devices = allocation_of("b", b, kGiB).devices;
  for (const auto& device : b_devices) CHECK_MESSAGE(fenced.count(device) == 0, device.to_string());

  // Every NVMe refused names the one a's domain keeps.
  PlacementRequest disks;
  disks.vcpus = 4;
  disks.memory_bytes = 8 * kGiB;
  disks.nvme = 8;
  const auto refused = place(vela2(), existing, policy(), disks);
  REQUIRE_FALSE(refused.ok());
  CHECK(refused.error().code == ErrorCode::does_not_fit);
  CHECK_MESSAGE(refused.error().message.find(
                    "0000:1a:00.0 in the peer-to-peer domain of 0000:15:02.0, relaxed for vm a") != std::string::npos,
                refused.error().message);

  // Once a is gone, its domain is free again.
  CHECK(fenced_devices(vela2(), {}).empty());
  CHECK(place(vela2(), {}, policy(), disks).ok());
}

TEST_CASE("p2p placement: a non-peer-to-peer VM fences nothing, nor does a lone peer device") {
  const auto a = placed(vela2(), {}, gpus(1, false));
  CHECK(fenced_devices(vela2(), {allocation_of("a", a, kGiB)}).empty());
  PlacementRequest one_vf;
  one_vf.vcpus = 4;
  one_vf.memory_bytes = 8 * kGiB;
  one_vf.extra_vfs = 1;
  one_vf.peer_to_peer = true;
  const auto lone = placed(vela2(), {}, one_vf);
  CHECK(lone.p2p_ports.empty());
  CHECK(lone.p2p_kept.empty());
}

}  // namespace
}  // namespace hostagent::numa
