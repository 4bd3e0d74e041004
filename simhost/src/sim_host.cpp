// simhost/sim_host: the built-in hosts. Device identities are those of the real parts (PCI ids,
// classes, BAR sizes, link widths); bus numbers follow Intel Xeon IIO stacks, where every PCIe root
// port sits on its own root bus (one host bridge per stack), with the 0000:BB:00.0 host bridge
// function (8086:09a2) on each stack. Layouts are spelled out above each host below.
#include "hostagent/simhost/sim_host.hpp"

#include <cstdio>

namespace hostagent::simhost {
namespace {

constexpr uint64_t KiB = 1024;
constexpr uint64_t MiB = 1024 * KiB;
constexpr uint64_t GiB = 1024 * MiB;

// A device model: what every function of that part has in common.
struct Model {
  uint16_t vendor = 0;
  uint16_t device = 0;
  uint16_t subsystem_vendor = 0;
  uint16_t subsystem_device = 0;
  uint32_t class_code = 0;
  uint8_t revision = 0;
  SimPortType port_type = SimPortType::endpoint;
  const char* driver = "";
  std::vector<SimBar> bars;
  int gen = 4;
  int width = 16;
  bool ats = false;
};

SimBar mem32(int index, uint64_t size) {
  return {index, size, false, false};
}
SimBar mem64(int index, uint64_t size) {
  return {index, size, true, false};
}
SimBar pref64(int index, uint64_t size) {
  return {index, size, true, true};
}

// clang-format off
// Ice Lake-SP IIO: the per-stack host bridge function and the root ports.
const Model kHostBridge{0x8086, 0x09a2, 0x8086, 0x0000, 0x060000, 0x04, SimPortType::endpoint,
                        "", {}, 1, 1};
const Model kRootPort{0x8086, 0x347a, 0x8086, 0x0000, 0x060400, 0x04, SimPortType::root_port,
                      "pcieport", {}};
// Broadcom PEX88096: the upstream port exposes a 256 KiB management BAR.
const Model kSwitchUp{0x10b5, 0xc010, 0x10b5, 0xa064, 0x060400, 0xb0, SimPortType::upstream,
                      "pcieport", {mem32(0, 256 * KiB)}};
const Model kSwitchDown{0x10b5, 0xc010, 0x10b5, 0xa064, 0x060400, 0xb0, SimPortType::downstream,
                        "pcieport", {}};
// NVIDIA data-center GPUs: 16 MiB registers, 128 GiB framebuffer aperture, 32 MiB BAR3.
const std::vector<SimBar> kGpuBars{mem32(0, 16 * MiB), pref64(1, 128 * GiB), pref64(3, 32 * MiB)};
const Model kA100{0x10de, 0x20b0, 0x10de, 0x1463, 0x030200, 0xa1, SimPortType::endpoint,
                  "nvidia", kGpuBars, 4, 16, true};
const Model kH100{0x10de, 0x2330, 0x10de, 0x16c1, 0x030200, 0xa1, SimPortType::endpoint,
                  "nvidia", kGpuBars, 5, 16, true};
const Model kNvSwitch{0x10de, 0x1af1, 0x10de, 0x1626, 0x068000, 0xa1, SimPortType::endpoint,
                      "nvidia-nvswitch", {mem32(0, 32 * MiB)}, 4, 2};
const Model kRtxA6000{0x10de, 0x2230, 0x10de, 0x1459, 0x030000, 0xa1, SimPortType::endpoint,
                      "nvidia", {mem32(0, 16 * MiB), pref64(1, 256 * MiB), pref64(3, 32 * MiB)}};
const Model kRtxAudio{0x10de, 0x1aef, 0x10de, 0x1459, 0x040300, 0xa1, SimPortType::endpoint,
                      "snd_hda_intel", {mem32(0, 16 * KiB)}};
// Mellanox ConnectX: 32 MiB prefetchable BAR0 on the PF, 1 MiB per VF (add_nic_pf).
const Model kCx6Dx{0x15b3, 0x101d, 0x15b3, 0x0016, 0x020000, 0x00, SimPortType::endpoint,
                   "mlx5_core", {pref64(0, 32 * MiB)}, 4, 16, true};
const Model kCx7{0x15b3, 0x1021, 0x15b3, 0x0021, 0x020000, 0x00, SimPortType::endpoint,
                 "mlx5_core", {pref64(0, 32 * MiB)}, 5, 16, true};
// ConnectX-7 as an InfiniBand HCA (class 0207): one port, no SR-IOV, given to a VM whole.
const Model kCx7Ib{0x15b3, 0x1021, 0x15b3, 0x0041, 0x020700, 0x00, SimPortType::endpoint,
                   "mlx5_core", {pref64(0, 32 * MiB)}, 5, 16, true};
const Model kH200{0x10de, 0x2335, 0x10de, 0x18be, 0x030200, 0xa1, SimPortType::endpoint,
                  "nvidia", kGpuBars, 5, 16, true};
const Model kCxVf{0x15b3, 0x101e, 0x15b3, 0x0021, 0x020000, 0x00, SimPortType::endpoint,
                  "mlx5_core", {}, 5, 16, true};
const Model kNvme{0x144d, 0xa824, 0x144d, 0xa801, 0x010802, 0x00, SimPortType::endpoint,
                  "nvme", {mem64(0, 16 * KiB)}, 4, 4};
const Model kIgc{0x8086, 0x15f3, 0x8086, 0x0000, 0x020000, 0x03, SimPortType::endpoint,
                 "igc", {mem32(0, 1 * MiB), mem32(3, 16 * KiB)}, 2, 1};
// clang-format on

constexpr uint16_t kAcsDefault = 0x001d;  // SV, RR, CR, UF on; DT off: what Linux enables

std::string addr(int bus, int dev, int fn) {
  char buf[16];
  std::snprintf(buf, sizeof(buf), "0000:%02x:%02x.%x", bus, dev, fn);
  return buf;
}

class HostBuilder {
 public:
  HostBuilder(std::string name, std::string description) {
    spec_.name = std::move(name);
    spec_.description = std::move(description);
  }

  void node(int id, int cores, int package, uint64_t memory, uint64_t free,
            std::map<uint64_t, std::pair<uint64_t, uint64_t>> hugepages, std::vector<int> distances) {
    SimNumaNode n;
    n.id = id;
    n.cores = cores;
    n.package = package;
    n.memory_bytes = memory;
    n.memory_free_bytes = free;
    n.hugepages = std::move(hugepages);
    n.distances = std::move(distances);
    spec_.nodes.push_back(std::move(n));
  }

  // Adds a function of `model`; every function gets its own IOMMU group, numbered in order.
  SimFunction& add(const Model& model, const std::string& address, const std::string& parent, int numa) {
    SimFunction f;
    f.address = address;
    f.parent = parent;
    f.vendor = model.vendor;
    f.device = model.device;
    f.subsystem_vendor = model.subsystem_vendor;
    f.subsystem_device = model.subsystem_device;
    f.class_code = model.class_code;
    f.revision = model.revision;
    f.port_type = model.port_type;
    f.driver = model.driver;
    f.bars = model.bars;
    f.link_cap_gen = f.link_sta_gen = model.gen;
    f.link_cap_width = f.link_sta_width = model.width;
    f.ats = model.ats;
    f.numa_node = numa;
    f.iommu_group = next_group_++;
    // Linux enables ACS on every downstream-facing port that has it (pci_enable_acs).
    if (f.port_type == SimPortType::root_port || f.port_type == SimPortType::downstream) {
      f.acs = true;
      f.acs_control = kAcsDefault;
    }
    spec_.functions.push_back(std::move(f));
    return spec_.functions.back();
  }

  // A port whose link matches the device it leads to.
  SimFunction& add_port(const Model& model, const std::string& address, const std::string& parent, int numa, int gen,
                        int width) {
    auto& f = add(model, address, parent, numa);
    f.link_cap_gen = f.link_sta_gen = gen;
    f.link_cap_width = f.link_sta_width = width;
    return f;
  }

  // The host's own disk and uplink: what it mounts, swaps on, and routes through.
  void host_uses(std::vector<SimMount> mounts, std::vector<std::string> swaps, std::string default_route) {
    spec_.mounts = std::move(mounts);
    spec_.swaps = std::move(swaps);
    spec_.default_route = std::move(default_route);
  }

  HostSpec take() { return std::move(spec_); }

 private:
  HostSpec spec_;
  int next_group_ = 0;
};

// One IIO stack on root bus R with a PEX88096 under its root port:
//   R:00.0 host bridge, R:02.0 root port -> (R+1):00.0 upstream port -> (R+2):0k.0 downstream
//   ports, k = 0..links-1, each leading to bus R+3+k. Returns the downstream port addresses.
std::vector<std::string> add_switch_stack(HostBuilder& b, int root_bus, int numa, int gen,
                                          const std::vector<int>& link_widths) {
  b.add(kHostBridge, addr(root_bus, 0, 0), "", numa);
  const std::string root_port = addr(root_bus, 2, 0);
  const std::string upstream = addr(root_bus + 1, 0, 0);
  b.add_port(kRootPort, root_port, "", numa, gen, 16);
  b.add_port(kSwitchUp, upstream, root_port, numa, gen, 16);
  std::vector<std::string> downstream;
  for (std::size_t k = 0; k < link_widths.size(); ++k) {
    downstream.push_back(addr(root_bus + 2, static_cast<int>(k), 0));
    b.add_port(kSwitchDown, downstream.back(), upstream, numa, gen, link_widths[k]);
  }
  return downstream;
}

// HGX's legacy stack 0x00 (node 0): 00:00.0 host bridge, 00:01.0 root port -> 01:00.0 PEX88096
// upstream -> 02:00.0-03.0 downstream -> the 4 NVSwitches 03:00.0-06:00.0.
void add_nvswitch_stack(HostBuilder& b) {
  b.add(kHostBridge, addr(0x00, 0, 0), "", 0);
  b.add_port(kRootPort, addr(0x00, 1, 0), "", 0, 4, 16);
  b.add_port(kSwitchUp, addr(0x01, 0, 0), addr(0x00, 1, 0), 0, 4, 16);
  for (int k = 0; k < 4; ++k) {
    b.add_port(kSwitchDown, addr(0x02, k, 0), addr(0x01, 0, 0), 0, 4, 2);
    b.add(kNvSwitch, addr(0x03 + k, 0, 0), addr(0x02, k, 0), 0);
  }
}

// A ConnectX PF with SR-IOV; its VFs (if any) follow at PF + offset + n * stride.
SimFunction& add_nic_pf(HostBuilder& b, const Model& model, const std::string& address, const std::string& parent,
                        int numa, int total_vfs, int offset) {
  auto& pf = b.add(model, address, parent, numa);
  pf.sriov_total_vfs = total_vfs;
  pf.sriov_vf_device = kCxVf.device;
  pf.sriov_vf_offset = offset;
  pf.sriov_vf_stride = 1;
  pf.sriov_vf_bars = {pref64(0, 1 * MiB)};
  return pf;
}

// The boot disk and management uplink of a GPU server, on the legacy stacks the GPUs leave alone:
// 00:1d.0 root port -> BUS:00.0 M.2 NVMe (nvme0: /boot/efi and / on it); 80:1d.0 root port ->
// 81:00.0 onboard 1GbE (eno1, the default route). Added last, so the GPUs' IOMMU groups keep their
// numbers.
void add_host_devices(HostBuilder& b, int boot_bus) {
  b.add_port(kRootPort, addr(0x00, 0x1d, 0), "", 0, 4, 4);
  b.add(kNvme, addr(boot_bus, 0, 0), addr(0x00, 0x1d, 0), 0);
  b.add_port(kRootPort, addr(0x80, 0x1d, 0), "", 1, 2, 1);
  b.add(kIgc, addr(0x81, 0, 0), addr(0x80, 0x1d, 0), 1).net_interfaces = {"eno1"};
  b.host_uses({{"nvme0n1p1", "/boot/efi", "vfat"}, {"nvme0n1p2", "/", "ext4"}}, {}, "eno1");
}

// ---------------------------------------------------------------------------------------------
// vela1: Vela-1-like A100 host. 2 sockets = 2 NUMA nodes of 24 cores x 2 threads (node 0: CPUs
// 0-23,48-71; node 1: 24-47,72-95), 768 GiB each, 700 free 1 GiB pages per node. Four IIO stacks
// with a PEX88096 each (2 per socket), each switch carrying 2 A100, one dual-port ConnectX-6 Dx
// (two PFs, 8 VFs possible each, 2 created on each, as a host configuration would) and 2 NVMe:
//   socket 0: root buses 0x16 and 0x30; socket 1: 0x97 and 0xb0. Stack R:
//     R:00.0 host bridge, R:02.0 root port, (R+1):00.0 upstream, (R+2):00.0-04.0 downstream,
//     (R+3):00.0 A100, (R+4):00.0 A100, (R+5):00.0/.1 ConnectX-6 Dx, (R+6):00.0 and (R+7):00.0
//     NVMe.
//   NICs: slot s = 1..4 in bus order, netdevs ens<s>f0np0/ens<s>f1np1, RDMA mlx5_0..mlx5_7.
//   Legacy stack 0x00 (node 0): 00:00.0 host bridge, 00:01.0 root port -> 01:00.0 PEX upstream ->
//     02:00.0-05.0 downstream -> NVSwitches 03:00.0-08:00.0 (HGX A100 has six).
//   The host's own: 00:1d.0 -> 09:00.0 boot NVMe, 80:1d.0 -> 81:00.0 eno1 (add_host_devices).
HostSpec vela1() {
  HostBuilder b("vela1", "Vela-1-like: 2 sockets, 8x A100 SXM4 behind 4 PCIe switches, 4x ConnectX-6 Dx");
  const std::map<uint64_t, std::pair<uint64_t, uint64_t>> huge{{1 * GiB, {700, 700}}};
  b.node(0, 24, 0, 768 * GiB, 60 * GiB, huge, {10, 21});
  b.node(1, 24, 1, 768 * GiB, 60 * GiB, huge, {21, 10});
  const std::vector<std::pair<int, int>> stacks{{0x16, 0}, {0x30, 0}, {0x97, 1}, {0xb0, 1}};
  b.add(kHostBridge, addr(0x00, 0, 0), "", 0);
  for (std::size_t s = 0; s < stacks.size(); ++s) {
    const auto [r, numa] = stacks[s];
    if (r == 0x97) b.add(kHostBridge, addr(0x80, 0, 0), "", 1);
    const auto down = add_switch_stack(b, r, numa, 4, {16, 16, 16, 4, 4});
    b.add(kA100, addr(r + 3, 0, 0), down[0], numa);
    b.add(kA100, addr(r + 4, 0, 0), down[1], numa);
    const std::string slot = std::to_string(s + 1);
    for (int port = 0; port < 2; ++port) {
      // ConnectX PFs place their VFs after both PFs: PF0 at +2, PF1 at +9 (1 + 9 = 2 + 8).
      const int offset = port == 0 ? 2 : 9;
      auto& pf = add_nic_pf(b, kCx6Dx, addr(r + 5, 0, port), down[2], numa, 8, offset);
      pf.sriov_num_vfs = 2;
      pf.net_interfaces = {"ens" + slot + "f" + std::to_string(port) + "np" + std::to_string(port)};
      pf.rdma_devices = {"mlx5_" + std::to_string(2 * s + static_cast<std::size_t>(port))};
      for (int n = 0; n < 2; ++n) {
        // Routing ID = PF's + offset + n (stride 1): PF0's VFs are 00.2-00.3, PF1's 01.2-01.3.
        const int rid = port + offset + n;
        auto& vf = b.add(kCxVf, addr(r + 5, rid / 8, rid % 8), down[2], numa);
        vf.physfn = addr(r + 5, 0, port);
        vf.link_sta_gen = vf.link_sta_width = 0;
        vf.net_interfaces = {"ens" + slot + "f" + std::to_string(port) + "v" + std::to_string(n)};
        vf.rdma_devices = {"mlx5_" + std::to_string(8 + 4 * s + 2 * static_cast<std::size_t>(port) + n)};
      }
    }
    b.add(kNvme, addr(r + 6, 0, 0), down[3], numa);
    b.add(kNvme, addr(r + 7, 0, 0), down[4], numa);
  }
  // HGX A100's six NVSwitches, on PCIe for their management only (NVLink joins them to the GPUs).
  b.add_port(kRootPort, addr(0x00, 1, 0), "", 0, 4, 16);
  b.add_port(kSwitchUp, addr(0x01, 0, 0), addr(0x00, 1, 0), 0, 4, 16);
  for (int k = 0; k < 6; ++k) {
    b.add_port(kSwitchDown, addr(0x02, k, 0), addr(0x01, 0, 0), 0, 4, 2);
    b.add(kNvSwitch, addr(0x03 + k, 0, 0), addr(0x02, k, 0), 0);
  }
  add_host_devices(b, 0x09);
  return b.take();
}

// ---------------------------------------------------------------------------------------------
// vela2: Vela-2-like HGX H100 host. 2 sockets = 2 NUMA nodes of 48 cores x 2 threads (node 0:
// 0-47,96-143; node 1: 48-95,144-191), 1 TiB each, 900 free 1 GiB pages per node.
//   Legacy stack 0x00 (node 0): 00:00.0 host bridge, 00:01.0 root port -> 01:00.0 PEX88096
//     upstream -> 02:00.0-03.0 downstream -> NVSwitches 03:00.0, 04:00.0, 05:00.0, 06:00.0.
//   Legacy stack 0x80 (node 1): host bridge only.
//   GPU stacks, socket 0: 0x15, 0x26, 0x37, 0x48; socket 1: 0x97, 0xa8, 0xb9, 0xca. Stack R:
//     R:00.0 host bridge, R:02.0 root port, (R+1):00.0 upstream, (R+2):00.0-02.0 downstream,
//     (R+3):00.0 H100, (R+4):00.0 ConnectX-7 PF with VFs (R+4):00.1-00.4, (R+5):00.0 NVMe.
//   NICs: slot s = 1..8, PF netdev ens<s>np0 and RDMA mlx5_<s-1>; its VFs ens<s>v0..v3 and
//     mlx5_<8 + 4(s-1) + n>.
//   The host's own: 00:1d.0 -> 07:00.0 boot NVMe, 80:1d.0 -> 81:00.0 eno1 (add_host_devices).
HostSpec vela2() {
  HostBuilder b("vela2",
                "Vela-2-like HGX H100: 2 sockets, 8x H100 SXM5 and 8x ConnectX-7 behind 8 PCIe "
                "switches, 4 NVSwitches");
  const std::map<uint64_t, std::pair<uint64_t, uint64_t>> huge{{1 * GiB, {900, 900}}};
  b.node(0, 48, 0, 1024 * GiB, 112 * GiB, huge, {10, 21});
  b.node(1, 48, 1, 1024 * GiB, 112 * GiB, huge, {21, 10});
  add_nvswitch_stack(b);
  const std::vector<std::pair<int, int>> stacks{{0x15, 0}, {0x26, 0}, {0x37, 0}, {0x48, 0},
                                                {0x97, 1}, {0xa8, 1}, {0xb9, 1}, {0xca, 1}};
  for (std::size_t s = 0; s < stacks.size(); ++s) {
    const auto [r, numa] = stacks[s];
    if (r == 0x97) b.add(kHostBridge, addr(0x80, 0, 0), "", 1);
    const auto down = add_switch_stack(b, r, numa, 5, {16, 16, 4});
    b.add(kH100, addr(r + 3, 0, 0), down[0], numa);
    const std::string slot = std::to_string(s + 1);
    auto& pf = add_nic_pf(b, kCx7, addr(r + 4, 0, 0), down[1], numa, 16, 1);
    pf.sriov_num_vfs = 4;
    pf.net_interfaces = {"ens" + slot + "np0"};
    pf.rdma_devices = {"mlx5_" + std::to_string(s)};
    for (int n = 0; n < 4; ++n) {
      // VFs have no link of their own: Link Status reads zero (lspci: "Speed unknown, Width x0").
      auto& vf = b.add(kCxVf, addr(r + 4, 0, 1 + n), down[1], numa);
      vf.physfn = addr(r + 4, 0, 0);
      vf.link_sta_gen = vf.link_sta_width = 0;
      vf.net_interfaces = {"ens" + slot + "v" + std::to_string(n)};
      vf.rdma_devices = {"mlx5_" + std::to_string(8 + 4 * s + static_cast<std::size_t>(n))};
    }
    b.add(kNvme, addr(r + 5, 0, 0), down[2], numa);
  }
  add_host_devices(b, 0x07);
  return b.take();
}

// ---------------------------------------------------------------------------------------------
// h200ib: an HGX H200 build with whole InfiniBand HCAs, one per two GPUs, under two switch levels.
// 2 sockets = 2 NUMA nodes of 48 cores x 2 threads, 1 TiB each, 900 free 1 GiB pages per node.
//   Legacy stack 0x00 (node 0): NVSwitches 03:00.0-06:00.0 behind a PEX88096, as on vela2.
//   GPU stacks, socket 0: 0x15, 0x2a; socket 1: 0x97, 0xac. Stack R:
//     R:00.0 host bridge, R:02.0 root port -> (R+1):00.0 top switch upstream -> (R+2):00.0-02.0
//     downstream: (R+3):00.0 H200 (the top GPU); (R+4):00.0 leaf switch upstream ->
//     (R+5):00.0-01.0 downstream -> (R+6):00.0 ConnectX-7 HCA (no VFs), (R+7):00.0 H200 (the leaf
//     GPU); (R+8):00.0 NVMe.
//   So the leaf GPU and its HCA are PIX, the top GPU and that HCA PXB, two stacks of one socket NODE.
//   HCAs: ibs<s> (IPoIB) and mlx5_<s-1>, s = 1..4.
//   The host's own: 00:1d.0 -> 07:00.0 boot NVMe, 80:1d.0 -> 81:00.0 eno1 (add_host_devices).
HostSpec h200ib() {
  HostBuilder b("h200ib",
                "HGX H200 with InfiniBand: 2 sockets, 8x H200 SXM5, 4 ConnectX-7 HCAs without VFs, each "
                "under a leaf switch with one GPU, below a top switch with another; 4 NVSwitches");
  const std::map<uint64_t, std::pair<uint64_t, uint64_t>> huge{{1 * GiB, {900, 900}}};
  b.node(0, 48, 0, 1024 * GiB, 112 * GiB, huge, {10, 21});
  b.node(1, 48, 1, 1024 * GiB, 112 * GiB, huge, {21, 10});
  add_nvswitch_stack(b);
  const std::vector<std::pair<int, int>> stacks{{0x15, 0}, {0x2a, 0}, {0x97, 1}, {0xac, 1}};
  for (std::size_t s = 0; s < stacks.size(); ++s) {
    const auto [r, numa] = stacks[s];
    if (r == 0x97) b.add(kHostBridge, addr(0x80, 0, 0), "", 1);
    const auto top = add_switch_stack(b, r, numa, 5, {16, 16, 4});
    b.add(kH200, addr(r + 3, 0, 0), top[0], numa);
    const std::string leaf_up = addr(r + 4, 0, 0);
    b.add_port(kSwitchUp, leaf_up, top[1], numa, 5, 16);
    const std::string leaf_hca = addr(r + 5, 0, 0);
    const std::string leaf_gpu = addr(r + 5, 1, 0);
    b.add_port(kSwitchDown, leaf_hca, leaf_up, numa, 5, 16);
    b.add_port(kSwitchDown, leaf_gpu, leaf_up, numa, 5, 16);
    auto& hca = b.add(kCx7Ib, addr(r + 6, 0, 0), leaf_hca, numa);
    hca.net_interfaces = {"ibs" + std::to_string(s + 1)};
    hca.rdma_devices = {"mlx5_" + std::to_string(s)};
    b.add(kH200, addr(r + 7, 0, 0), leaf_gpu, numa);
    b.add(kNvme, addr(r + 8, 0, 0), top[2], numa);
  }
  add_host_devices(b, 0x07);
  return b.take();
}

// ---------------------------------------------------------------------------------------------
// workstation: 1 NUMA node of 8 cores x 2 threads (0-15), 64 GiB, 1024 free 2 MiB pages.
//   00:00.0 host bridge; 00:01.0 root port -> 01:00.0 RTX A6000 + 01:00.1 its HDMI audio;
//   00:1b.0 root port -> 02:00.0 NVMe; 00:1c.0 root port -> 03:00.0 Intel I225 (igc, enp3s0).
//   The host boots from its only NVMe (nvme0n1p1 /boot/efi, p2 /, p3 swap) and routes through enp3s0.
HostSpec workstation() {
  HostBuilder b("workstation", "1 socket, 1 RTX A6000 with its audio function, 1 NVMe, onboard 2.5GbE");
  b.node(0, 8, 0, 64 * GiB, 56 * GiB, {{2 * MiB, {1024, 1024}}}, {10});
  b.add(kHostBridge, addr(0x00, 0, 0), "", 0);
  b.add_port(kRootPort, addr(0x00, 0x01, 0), "", 0, 4, 16);
  b.add(kRtxA6000, addr(0x01, 0, 0), addr(0x00, 0x01, 0), 0);
  b.add(kRtxAudio, addr(0x01, 0, 1), addr(0x00, 0x01, 0), 0);
  b.add_port(kRootPort, addr(0x00, 0x1b, 0), "", 0, 4, 4);
  b.add(kNvme, addr(0x02, 0, 0), addr(0x00, 0x1b, 0), 0);
  b.add_port(kRootPort, addr(0x00, 0x1c, 0), "", 0, 2, 1);
  b.add(kIgc, addr(0x03, 0, 0), addr(0x00, 0x1c, 0), 0).net_interfaces = {"enp3s0"};
  b.host_uses({{"nvme0n1p1", "/boot/efi", "vfat"}, {"nvme0n1p2", "/", "ext4"}}, {"nvme0n1p3"}, "enp3s0");
  return b.take();
}

// ---------------------------------------------------------------------------------------------
// quirks: what real hosts get wrong. 2 CPU nodes of 4 cores x 2 threads (node 0: 0-3,8-11;
// node 1: 4-7,12-15), 32 GiB each, plus node 2: 96 GiB and no CPU (GPU memory as on Grace),
// nearest to node 1.
//   Root bus 0x00 (node 0): 00:00.0 host bridge;
//     00:01.0 root port -> 01:00.0 RTX A6000 + 01:00.1 audio, sharing one IOMMU group;
//     00:03.0 root port -> 02:00.0 A100 whose link trained at Gen3 x8 (capable of Gen4 x16).
//   Root bus 0x80, firmware without _PXM: 80:00.0 host bridge, 80:02.0 root port, 81:00.0
//     upstream, 82:00.0 and 82:01.0 downstream ports all say numa_node -1, while beneath them
//     83:00.0 A100 and 84:00.0 ConnectX-6 Dx (ens2f0np0, mlx5_0) say node 1.
HostSpec quirks() {
  HostBuilder b("quirks",
                "2 small sockets, a CPU-less memory node, a shared IOMMU group, unknown bridge "
                "locality, a downtrained link");
  b.node(0, 4, 0, 32 * GiB, 28 * GiB, {}, {10, 21, 40});
  b.node(1, 4, 1, 32 * GiB, 28 * GiB, {}, {21, 10, 30});
  b.node(2, 0, 1, 96 * GiB, 96 * GiB, {}, {40, 30, 10});
  b.add(kHostBridge, addr(0x00, 0, 0), "", 0);
  b.add_port(kRootPort, addr(0x00, 0x01, 0), "", 0, 4, 16);
  auto& gpu = b.add(kRtxA6000, addr(0x01, 0, 0), addr(0x00, 0x01, 0), 0);
  const int shared_group = *gpu.iommu_group;
  // No ACS between the functions of a multi-function device: one group (drivers/iommu/iommu.c).
  b.add(kRtxAudio, addr(0x01, 0, 1), addr(0x00, 0x01, 0), 0).iommu_group = shared_group;
  auto& slow_port = b.add_port(kRootPort, addr(0x00, 0x03, 0), "", 0, 4, 16);
  slow_port.link_sta_gen = 3;
  slow_port.link_sta_width = 8;
  auto& slow_gpu = b.add(kA100, addr(0x02, 0, 0), addr(0x00, 0x03, 0), 0);
  slow_gpu.link_sta_gen = 3;
  slow_gpu.link_sta_width = 8;
  b.add(kHostBridge, addr(0x80, 0, 0), "", -1);
  b.add_port(kRootPort, addr(0x80, 0x02, 0), "", -1, 4, 16);
  b.add_port(kSwitchUp, addr(0x81, 0, 0), addr(0x80, 0x02, 0), -1, 4, 16);
  b.add_port(kSwitchDown, addr(0x82, 0, 0), addr(0x81, 0, 0), -1, 4, 16);
  b.add_port(kSwitchDown, addr(0x82, 1, 0), addr(0x81, 0, 0), -1, 4, 16);
  b.add(kA100, addr(0x83, 0, 0), addr(0x82, 0, 0), 1);
  auto& nic = add_nic_pf(b, kCx6Dx, addr(0x84, 0, 0), addr(0x82, 1, 0), 1, 8, 2);
  nic.net_interfaces = {"ens2f0np0"};
  nic.rdma_devices = {"mlx5_0"};
  return b.take();
}

struct Builtin {
  const char* name;
  HostSpec (*make)();
};
const Builtin kBuiltins[] = {
    {"vela1", vela1}, {"vela2", vela2}, {"h200ib", h200ib}, {"workstation", workstation}, {"quirks", quirks}};

}  // namespace

std::vector<std::string> builtin_host_names() {
  std::vector<std::string> names;
  for (const auto& builtin : kBuiltins) names.emplace_back(builtin.name);
  return names;
}

Result<HostSpec> builtin_host(const std::string& name) {
  for (const auto& builtin : kBuiltins) {
    if (name == builtin.name) return builtin.make();
  }
  std::string known;
  for (const auto& builtin : kBuiltins) {
    known += (known.empty() ? "" : ", ") + std::string(builtin.name);
  }
  return Error{ErrorCode::not_found, "simhost: no built-in host '" + name + "'; known hosts: " + known};
}

}  // namespace hostagent::simhost
