// Discovery against data from real machines (shared/data, via HOSTAGENT_REFERENCE_DATA): hwloc's own
// sysfs snapshots with hwloc's expected XML beside them, hwloc exports of a DGX-2, a POWER9 with GPU
// memory as NUMA nodes, and libvirt's snapshot of a 4-socket Opteron.
#include <doctest/doctest.h>

#include <algorithm>
#include <fstream>
#include <map>
#include <regex>
#include <set>

#include "hostagent/common/sysfs_root.hpp"
#include "hostagent/discovery/discovery.hpp"
#include "hostagent/numa/placement.hpp"
#include "test_support.hpp"

namespace hostagent::discovery {
namespace {

namespace fs = std::filesystem;
using testing::TempDir;

std::map<std::string, const numa::PciFunction*> by_address(const numa::HostModel& model) {
  std::map<std::string, const numa::PciFunction*> out;
  for (const auto& f : model.pci_devices) out[f.address.to_string()] = &f;
  return out;
}

// The sysfs snapshot discovered through our reader and hwloc's expected XML for it must tell the same
// story: the same NUMA nodes with the same CPUs and memory, the same PCI functions on the same
// parents, and the same locality for each function.
void check_snapshot_matches_expected(const numa::HostModel& from_sysfs, const numa::HostModel& from_xml) {
  REQUIRE(from_sysfs.numa_nodes.size() == from_xml.numa_nodes.size());
  for (size_t i = 0; i < from_xml.numa_nodes.size(); ++i) {
    CAPTURE(from_xml.numa_nodes[i].id);
    CHECK(from_sysfs.numa_nodes[i].id == from_xml.numa_nodes[i].id);
    CHECK(from_sysfs.numa_nodes[i].cpus == from_xml.numa_nodes[i].cpus);
    CHECK(from_sysfs.numa_nodes[i].memory_bytes == from_xml.numa_nodes[i].memory_bytes);
    CHECK(from_sysfs.numa_nodes[i].distances == from_xml.numa_nodes[i].distances);
  }
  const auto sysfs_pci = by_address(from_sysfs);
  size_t compared = 0;
  for (const auto& expected : from_xml.pci_devices) {
    CAPTURE(expected.address.to_string());
    const auto it = sysfs_pci.find(expected.address.to_string());
    REQUIRE(it != sysfs_pci.end());
    const numa::PciFunction& actual = *it->second;
    CHECK(actual.vendor_id == expected.vendor_id);
    CHECK(actual.device_id == expected.device_id);
    CHECK((actual.class_code >> 8) == (expected.class_code >> 8));
    CHECK(actual.parent == expected.parent);
    CHECK(actual.locality_numa_nodes == expected.locality_numa_nodes);
    ++compared;
  }
  CHECK(compared > 0);
}

// The kernel's cpumask format: 32-bit hex words, most significant first, comma separated.
std::string cpumask(const std::vector<int>& cpus) {
  const int words = cpus.empty() ? 1 : cpus.back() / 32 + 1;
  std::vector<uint32_t> mask(static_cast<size_t>(words), 0);
  for (const int cpu : cpus) mask[static_cast<size_t>(cpu / 32)] |= 1U << (cpu % 32);
  std::string out;
  for (int i = words - 1; i >= 0; --i) {
    char buf[16];
    std::snprintf(buf, sizeof buf, "%08x", mask[static_cast<size_t>(i)]);
    out += buf;
    if (i > 0) out += ',';
  }
  return out;
}

TEST_CASE("hwloc snapshot 32em64t-2n8c: sysfs discovery agrees with hwloc's expected XML") {
  const auto data = testing::reference_data_or_skip();
  if (!data) return;
  TempDir dir;
  testing::extract_tarball(*data / "hwloc/32em64t-2n8c+dax+nvme+mic+dimms.tar.bz2", dir.path());
  const auto from_sysfs = discover_from_sysfs(dir.path() / "32em64t-2n8c+1mic");
  REQUIRE_MESSAGE(from_sysfs.ok(), from_sysfs.error().message);
  const auto from_xml = discover_from_hwloc_xml(*data / "hwloc/32em64t-2n8c+dax+nvme+mic+dimms.xml");
  REQUIRE_MESSAGE(from_xml.ok(), from_xml.error().message);
  check_snapshot_matches_expected(*from_sysfs, *from_xml);

  // The ConnectX-3 (15b3:1003) is on node 1, as its numa_node file says.
  const auto* nic = from_sysfs->find(PciAddress::parse("0000:82:00.0").value());
  REQUIRE(nic != nullptr);
  CHECK(nic->role == numa::PciRole::nic);
  CHECK(nic->numa_node == std::optional<int>(1));
  CHECK(nic->driver == std::optional<std::string>("mlx4_core"));
}

TEST_CASE("hwloc snapshot 40intel64 (bridges report numa_node=-1): locality as hwloc's forced expected output") {
  const auto data = testing::reference_data_or_skip();
  if (!data) return;
  TempDir dir;
  testing::extract_tarball(*data / "hwloc/40intel64-2g2n4c+pcilocality.tar.bz2", dir.path());
  // hwloc made the expected XML with this locality forced (tests/hwloc/linux/*.test in hwloc).
  setenv("HWLOC_PCI_LOCALITY",
         "# near 1st package;0000:00-09 0x00000055,0x55555555;# near 2nd package;0000:40-46 0x000000aa,0xaaaaaaaa", 1);
  const auto from_sysfs = discover_from_sysfs(dir.path() / "40intel64-2g2n4c+pci");
  unsetenv("HWLOC_PCI_LOCALITY");
  REQUIRE_MESSAGE(from_sysfs.ok(), from_sysfs.error().message);
  const auto from_xml = discover_from_hwloc_xml(*data / "hwloc/40intel64-2g2n4c+pcilocality.xml");
  REQUIRE_MESSAGE(from_xml.ok(), from_xml.error().message);
  check_snapshot_matches_expected(*from_sysfs, *from_xml);

  // The quirk: every bridge says -1, the QLogic HBA (1077:7322) beneath 0000:40:03.0 says node 2.
  // The device keeps its node and the root port above it takes it.
  const auto* hba = from_sysfs->find(PciAddress::parse("0000:43:00.0").value());
  const auto* port = from_sysfs->find(PciAddress::parse("0000:40:03.0").value());
  REQUIRE(hba != nullptr);
  REQUIRE(port != nullptr);
  CHECK(hba->numa_node_reported == std::optional<int>(2));
  CHECK(hba->numa_node == std::optional<int>(2));
  CHECK(port->numa_node_reported == std::optional<int>(-1));
  CHECK(port->numa_node == std::optional<int>(2));
  // A bridge with nothing beneath that names a node stays unknown: nothing is invented.
  const auto* empty_port = from_sysfs->find(PciAddress::parse("0000:40:01.0").value());
  REQUIRE(empty_port != nullptr);
  CHECK_FALSE(empty_port->numa_node.has_value());
}

TEST_CASE("POWER9 AC922 snapshot: GPU memory nodes 250-255 are kept as CPU-less nodes") {
  const auto data = testing::reference_data_or_skip();
  if (!data) return;
  TempDir dir;
  testing::extract_tarball(*data / "hwloc/nvidiagpunumanodes.tar.bz2", dir.path());
  const auto model = discover_from_sysfs(dir.path() / "nvidiagpunumanodes");
  REQUIRE_MESSAGE(model.ok(), model.error().message);

  // hwloc's console output for this snapshot (kept variant) names the GPU memory nodes.
  std::set<int> expected_gpu_nodes;
  std::ifstream console(*data / "hwloc/nvidiagpunumanodes-kept.console");
  const std::regex gpu_node(R"(NUMANode\(GPUMemory\) L#\d+ \(P#(\d+))");
  for (std::string line; std::getline(console, line);) {
    std::smatch match;
    if (std::regex_search(line, match, gpu_node)) expected_gpu_nodes.insert(std::stoi(match[1]));
  }
  REQUIRE(expected_gpu_nodes.size() == 6);

  std::set<int> cpuless, with_cpus;
  for (const auto& node : model->numa_nodes) (node.cpuless ? cpuless : with_cpus).insert(node.id);
  CHECK(cpuless == expected_gpu_nodes);
  CHECK(with_cpus == std::set<int>{0, 8});
  for (const auto& node : model->numa_nodes) {
    if (!node.cpuless) continue;
    CHECK(node.cpus.empty());
    CHECK(node.memory_bytes.value_or(0) > (14ULL << 30));
  }
  for (const auto& cpu : model->cpus) {
    REQUIRE(cpu.numa_node.has_value());
    CHECK(with_cpus.count(*cpu.numa_node) == 1);
  }
}

TEST_CASE("DGX-2 hwloc export: 16 V100 behind two levels of PCIe switches, 8 per NUMA node") {
  const auto data = testing::reference_data_or_skip();
  if (!data) return;
  const auto model = discover_from_hwloc_xml(*data / "hwloc/nvidiaDGX2.xml");
  REQUIRE_MESSAGE(model.ok(), model.error().message);

  std::map<int, int> gpus_per_node;
  for (const auto& f : model->pci_devices) {
    if (f.role != numa::PciRole::gpu) continue;
    CAPTURE(f.address.to_string());
    CHECK(f.device_id == 0x1db8);
    int switch_levels = 0;
    for (const auto& bridge : f.bridge_chain)
      switch_levels += model->find(bridge)->role == numa::PciRole::switch_upstream;
    CHECK(switch_levels == 2);
    REQUIRE(f.numa_node.has_value());
    ++gpus_per_node[*f.numa_node];
    // Unknown in an export, never invented.
    CHECK_FALSE(f.iommu_group.has_value());
    CHECK_FALSE(f.driver.has_value());
  }
  CHECK(gpus_per_node == std::map<int, int>{{0, 8}, {1, 8}});
  const auto nvswitches = std::count_if(model->pci_devices.begin(), model->pci_devices.end(),
                                        [](const numa::PciFunction& f) { return f.role == numa::PciRole::nvswitch; });
  CHECK(nvswitches == 11);  // the twelfth has an all-zero config space: hwloc reports no ids for it
  CHECK(model->iommu_groups.empty());
}

// On the DGX-2, GPUs under the two switches below one parent switch reach each other without the
// CPU (NCCL's PXB): one peer-to-peer clique per parent switch, not per leaf switch.
TEST_CASE("DGX-2 hwloc export: an 8-GPU placement makes one clique per parent switch") {
  const auto data = testing::reference_data_or_skip();
  if (!data) return;
  const auto model = discover_from_hwloc_xml(*data / "hwloc/nvidiaDGX2.xml");
  REQUIRE_MESSAGE(model.ok(), model.error().message);
  numa::PlacementRequest request;
  request.vcpus = 4;
  request.memory_bytes = 64ULL << 30;
  request.gpus = 8;
  request.peer_to_peer = true;
  numa::HostPolicy policy;
  policy.check_hugepages = false;
  const auto placement = place(*model, {}, policy, request);
  REQUIRE_MESSAGE(placement.ok(), placement.error().message);
  std::map<int, std::set<PciAddress>> parents_of_clique;
  for (const auto& gpu : placement->gpus) {
    const auto* f = model->find(gpu.gpu.address);
    REQUIRE(f != nullptr);
    // The outermost switch upstream port above the GPU (bridge_chain is nearest first).
    std::optional<PciAddress> parent;
    for (const auto& bridge : f->bridge_chain) {
      if (model->find(bridge)->role == numa::PciRole::switch_upstream) parent = bridge;
    }
    REQUIRE(parent.has_value());
    CHECK(parent != f->pcie_switch);  // two levels: the parent is not the GPU's own switch
    parents_of_clique[gpu.clique].insert(*parent);
  }
  REQUIRE(parents_of_clique.size() == 2);  // 4 GPUs under each of two parent switches
  for (const auto& [clique, parents] : parents_of_clique) CHECK(parents.size() == 1);
  CHECK(*parents_of_clique[0].begin() != *parents_of_clique[1].begin());
}

TEST_CASE("every hwloc XML export in the reference data loads, hwloc 3.0 format included") {
  const auto data = testing::reference_data_or_skip();
  if (!data) return;
  int loaded = 0;
  for (const auto& entry : fs::directory_iterator(*data / "hwloc")) {
    if (entry.path().extension() != ".xml") continue;
    CAPTURE(entry.path().string());
    const auto model = discover_from_hwloc_xml(entry.path());
    REQUIRE_MESSAGE(model.ok(), model.error().message);
    CHECK_FALSE(model->numa_nodes.empty());
    CHECK_FALSE(model->cpus.empty());
    CHECK_FALSE(model->pci_devices.empty());
    ++loaded;
  }
  CHECK(loaded == 6);
}

TEST_CASE("libvirt's 4-socket Opteron 6172 snapshot: 8 NUMA nodes of 6 cores, no SMT") {
  const auto data = testing::reference_data_or_skip();
  if (!data) return;
  TempDir dir;
  testing::extract_tarball(*data / "libvirt/virhostcpudata-linux-test3.tar.bz2", dir.path());
  // libvirt keeps only the cpu/ and node/ directories; lay them out as a sysfs root.
  const fs::path root = dir.path() / "root";
  fs::create_directories(root / "sys/devices/system");
  fs::create_directories(root / "proc");
  fs::rename(dir.path() / "linux-test3/cpu", root / "sys/devices/system/cpu");
  fs::rename(dir.path() / "linux-test3/node", root / "sys/devices/system/node");
  fs::copy_file(dir.path() / "linux-x86_64-test3.cpuinfo", root / "proc/cpuinfo");
  // libvirt kept each node's cpuN links but not the cpulist/cpumap files the kernel exports beside
  // them (drivers/base/node.c), which hwloc reads; write those from the links.
  for (const auto& node : fs::directory_iterator(root / "sys/devices/system/node")) {
    if (node.path().filename().string().rfind("node", 0) != 0) continue;
    std::vector<int> cpus;
    for (const auto& entry : fs::directory_iterator(node.path())) {
      const auto name = entry.path().filename().string();
      if (name.rfind("cpu", 0) == 0 && name.size() > 3) cpus.push_back(std::stoi(name.substr(3)));
    }
    std::sort(cpus.begin(), cpus.end());
    std::ofstream(node.path() / "cpulist") << format_cpu_list(cpus) << "\n";
    std::ofstream(node.path() / "cpumap") << cpumask(cpus) << "\n";
  }
  const auto model = discover_from_sysfs(root);
  REQUIRE_MESSAGE(model.ok(), model.error().message);

  // linux-x86_64-test3.expected: "CPUs: 48/48, MHz: 2100, Nodes: 8, Sockets: 1, Cores: 6, Threads: 1"
  CHECK(model->cpus.size() == 48);
  REQUIRE(model->numa_nodes.size() == 8);
  for (const auto& node : model->numa_nodes) CHECK(node.cpus.size() == 6);
  for (const auto& cpu : model->cpus) CHECK(cpu.siblings.size() == 1);
}

}  // namespace
}  // namespace hostagent::discovery
