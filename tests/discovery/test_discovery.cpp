// Discovery on the simulated hosts (simhost writes them as sysfs trees): golden outputs for each,
// one test per quirk, and the errors an operator sees for a broken root.
#include <doctest/doctest.h>

#include <algorithm>
#include <fstream>

#include "hostagent/api/host_json.hpp"
#include "hostagent/discovery/discovery.hpp"
#include "hostagent/simhost/sim_host.hpp"
#include "simulated_hosts.hpp"
#include "test_support.hpp"

namespace hostagent::discovery {
namespace {

namespace fs = std::filesystem;
using testing::TempDir;

// A built-in host's model, read from its shared tree (tests/support/simulated_hosts.hpp).
struct Discovered {
  numa::HostModel model;
};

std::unique_ptr<Discovered> discover_builtin(const std::string& name) {
  return std::make_unique<Discovered>(Discovered{testing::discover_shared(name)});
}

// A built-in host written to a tree of the test's own, which the test breaks.
struct Written {
  TempDir dir;
  numa::HostModel model;
};

std::unique_ptr<Written> written_builtin(const std::string& name) {
  auto out = std::make_unique<Written>();
  out->model = testing::discover_simulated(name, out->dir);
  return out;
}

std::vector<const numa::PciFunction*> with_role(const numa::HostModel& model, numa::PciRole role) {
  std::vector<const numa::PciFunction*> out;
  for (const auto& f : model.pci_devices) {
    if (f.role == role) out.push_back(&f);
  }
  return out;
}

TEST_CASE("golden topology JSON for every simulated host") {
  for (const auto& name : simhost::builtin_host_names()) {
    CAPTURE(name);
    const auto host = discover_builtin(name);
    const auto json = api::to_pretty_json(api::to_json(host->model));
    const auto diff = testing::compare_golden("topology/" + name + ".json", json);
    CHECK_MESSAGE(diff.empty(), diff);
  }
}

TEST_CASE(
    "vela1: 2 sockets, 4 switches each pairing 2 A100 with a dual-port ConnectX-6 Dx and 2 NVMe, and NVSwitches") {
  const auto host = discover_builtin("vela1");
  const auto& m = host->model;
  REQUIRE(m.numa_nodes.size() == 2);
  CHECK(m.cpus.size() == 96);
  REQUIRE(m.switches.size() == 5);
  // The first switch carries the six NVSwitches of the HGX A100 baseboard and nothing else.
  const auto nvswitches = with_role(m, numa::PciRole::nvswitch);
  CHECK(nvswitches.size() == 6);
  for (const auto* nvswitch : nvswitches) CHECK(nvswitch->pcie_switch == m.switches.front().upstream);
  for (const auto& sw : m.switches) {
    CAPTURE(sw.upstream.to_string());
    if (sw.upstream == m.switches.front().upstream) continue;
    int gpus = 0, nics = 0, nvmes = 0;
    for (const auto& address : sw.devices) {
      const auto* f = m.find(address);
      gpus += f->role == numa::PciRole::gpu;
      nics += f->role == numa::PciRole::nic && !f->physfn;
      nvmes += f->role == numa::PciRole::nvme;
      if (f->role != numa::PciRole::switch_downstream) CHECK(f->numa_node == sw.numa_node);
    }
    CHECK(gpus == 2);
    CHECK(nics == 2);
    CHECK(nvmes == 2);
  }
  for (const auto* gpu : with_role(m, numa::PciRole::gpu)) {
    CHECK(gpu->device_id == 0x20b0);
    CHECK(gpu->ats.has_value());  // ATS capability decoded from config space by libpci
    CHECK(gpu->link.speed_gts == 16.0);
    CHECK(gpu->link.width == 16);
    CHECK(gpu->iommu_group.has_value());
    CHECK(gpu->driver == std::optional<std::string>("nvidia"));
    const auto large = std::any_of(gpu->bars.begin(), gpu->bars.end(), [](const numa::Bar& b) {
      return b.is_64bit && b.prefetchable && b.size_bytes >= (64ULL << 30);
    });
    CHECK(large);
  }
  for (const auto* port : with_role(m, numa::PciRole::switch_downstream)) CHECK(port->acs.has_value());
  // SMT siblings are reported in pairs.
  for (const auto& cpu : m.cpus) CHECK(cpu.siblings.size() == 2);
}

TEST_CASE("vela2: 8 switches each with one H100, one ConnectX-7 PF with its VFs, one NVMe, and NVSwitches") {
  const auto host = discover_builtin("vela2");
  const auto& m = host->model;
  CHECK(m.cpus.size() == 192);
  CHECK(with_role(m, numa::PciRole::gpu).size() == 8);
  CHECK(with_role(m, numa::PciRole::nvswitch).size() == 4);
  int pfs = 0;
  for (const auto* nic : with_role(m, numa::PciRole::nic)) {
    if (nic->physfn) {
      const auto* pf = m.find(*nic->physfn);
      REQUIRE(pf != nullptr);
      CHECK(nic->pcie_switch == pf->pcie_switch);
      CHECK_FALSE(nic->rdma_devices.empty());
      continue;
    }
    ++pfs;
    REQUIRE(nic->sriov.has_value());
    CHECK(nic->sriov->total_vfs == 16);
    CHECK(nic->sriov->num_vfs == 4);
    CHECK(nic->sriov->vfs.size() == 4);
    REQUIRE(nic->pcie_switch.has_value());
    const auto& sw = *std::find_if(m.switches.begin(), m.switches.end(),
                                   [&](const numa::PcieSwitch& s) { return s.upstream == *nic->pcie_switch; });
    const auto gpus = std::count_if(sw.devices.begin(), sw.devices.end(),
                                    [&](const PciAddress& a) { return m.find(a)->role == numa::PciRole::gpu; });
    CHECK(gpus == 1);
  }
  CHECK(pfs == 8);
}

TEST_CASE("workstation: one NUMA node, a GPU on a root port, no ConnectX") {
  const auto host = discover_builtin("workstation");
  const auto& m = host->model;
  CHECK(m.numa_nodes.size() == 1);
  CHECK(m.switches.empty());
  const auto gpus = with_role(m, numa::PciRole::gpu);
  REQUIRE(gpus.size() == 1);
  CHECK_FALSE(gpus[0]->pcie_switch.has_value());
  CHECK(with_role(m, numa::PciRole::nic).empty());
  const auto& node = m.numa_nodes[0];
  REQUIRE(node.hugepages.size() >= 1);
  CHECK(node.hugepages[0].page_size_bytes == (2ULL << 20));
}

TEST_CASE("treat_as_gpus: listed endpoints become GPUs, bridges and other ids keep their role") {
  auto host = discover_builtin("vela2");
  auto& m = host->model;
  const auto nvmes = with_role(m, numa::PciRole::nvme);
  REQUIRE_FALSE(nvmes.empty());
  const auto gpus_before = with_role(m, numa::PciRole::gpu).size();
  const PciAddress nvme = nvmes[0]->address;
  const std::pair<uint16_t, uint16_t> nvme_id{nvmes[0]->vendor_id, nvmes[0]->device_id};
  const auto* port = m.find(*m.find(nvme)->parent);
  REQUIRE(port != nullptr);
  const std::pair<uint16_t, uint16_t> port_id{port->vendor_id, port->device_id};
  const auto same_id =
      static_cast<std::size_t>(std::count_if(m.pci_devices.begin(), m.pci_devices.end(), [&](const auto& f) {
        return f.vendor_id == nvme_id.first && f.device_id == nvme_id.second && !f.is_bridge();
      }));
  const int changed = treat_as_gpus(m, {nvme_id, port_id, {0xffff, 0xffff}});
  CHECK(static_cast<std::size_t>(changed) == same_id);
  CHECK(m.find(nvme)->role == numa::PciRole::gpu);
  CHECK(m.find(port->address)->role != numa::PciRole::gpu);
  CHECK(with_role(m, numa::PciRole::gpu).size() == gpus_before + same_id);
  CHECK(treat_as_gpus(m, {nvme_id}) == 0);
}

TEST_CASE("quirk: a GPU and its audio function share one IOMMU group") {
  const auto host = discover_builtin("quirks");
  const auto& m = host->model;
  bool found = false;
  for (const auto& group : m.iommu_groups) {
    if (group.members.size() != 2) continue;
    const auto* a = m.find(group.members[0]);
    const auto* b = m.find(group.members[1]);
    if (a->role == numa::PciRole::gpu && b->class_code >> 8 == 0x0403) {
      found = true;
      CHECK(a->address.function == 0);
      CHECK(b->address.function == 1);
    }
  }
  CHECK(found);
}

TEST_CASE("quirk: a switch and root port reporting numa_node=-1 take their devices' node") {
  const auto host = discover_builtin("quirks");
  const auto& m = host->model;
  int checked = 0;
  for (const auto& sw : m.switches) {
    const auto* up = m.find(sw.upstream);
    if (up->numa_node_reported != std::optional<int>(-1)) continue;
    CHECK(sw.numa_node == std::optional<int>(1));
    for (const auto& bridge : up->bridge_chain) CHECK(m.find(bridge)->numa_node == std::optional<int>(1));
    ++checked;
  }
  CHECK(checked >= 1);
}

TEST_CASE("quirk: a CPU-less NUMA node is kept and marked") {
  const auto host = discover_builtin("quirks");
  const auto cpuless = std::find_if(host->model.numa_nodes.begin(), host->model.numa_nodes.end(),
                                    [](const numa::NumaNode& n) { return n.cpuless; });
  REQUIRE(cpuless != host->model.numa_nodes.end());
  CHECK(cpuless->cpus.empty());
  CHECK(cpuless->memory_bytes.value_or(0) > 0);
  for (const auto& cpu : host->model.cpus) CHECK(cpu.numa_node != std::optional<int>(cpuless->id));
}

TEST_CASE("quirk: a GPU link trained below its capability is visible") {
  const auto host = discover_builtin("quirks");
  int degraded = 0;
  for (const auto* gpu : with_role(host->model, numa::PciRole::gpu)) {
    const auto& link = gpu->link;
    REQUIRE(link.speed_gts.has_value());
    REQUIRE(link.max_speed_gts.has_value());
    if (*link.speed_gts < *link.max_speed_gts || link.width < link.max_width) ++degraded;
  }
  CHECK(degraded == 1);
}

// The first GPU's directory in a fixture tree, to break.
fs::path first_gpu_dir(const Written& host) {
  const auto gpus = with_role(host.model, numa::PciRole::gpu);
  REQUIRE_FALSE(gpus.empty());
  return host.dir.path() / "sys/bus/pci/devices" / gpus[0]->address.to_string();
}

TEST_CASE("garbage in a sysfs attribute is an error naming the file") {
  const auto host = written_builtin("workstation");
  const auto numa_node = first_gpu_dir(*host) / "numa_node";
  fs::remove(numa_node);
  std::ofstream(numa_node) << "zero\n";
  const auto model = discover_from_sysfs(host->dir.path());
  REQUIRE_FALSE(model.ok());
  CHECK(model.error().code == ErrorCode::parse_error);
  CHECK(model.error().message.find(numa_node.string()) != std::string::npos);
  CHECK(model.error().message.find("\"zero\"") != std::string::npos);
}

TEST_CASE("an unreadable sysfs attribute is an error naming the file") {
  const auto host = written_builtin("workstation");
  const auto vendor = first_gpu_dir(*host) / "vendor";
  // Root reads through any mode bits, so make the attribute a directory: read(2) fails with EISDIR.
  fs::remove(vendor);
  fs::create_directory(vendor);
  const auto model = discover_from_sysfs(host->dir.path());
  REQUIRE_FALSE(model.ok());
  CHECK(model.error().message.find(vendor.string()) != std::string::npos);
}

TEST_CASE("a missing root, and a directory that is not a sysfs root, are errors naming the path") {
  const auto missing = discover_from_sysfs("/nonexistent/hostagent-root");
  REQUIRE_FALSE(missing.ok());
  CHECK(missing.error().code == ErrorCode::not_found);
  CHECK(missing.error().message.find("/nonexistent/hostagent-root") != std::string::npos);

  TempDir empty;
  const auto not_sysfs = discover_from_sysfs(empty.path());
  REQUIRE_FALSE(not_sysfs.ok());
  CHECK(not_sysfs.error().message.find("is not a sysfs root") != std::string::npos);

  const auto not_xml = discover_from_hwloc_xml(empty.path() / "nothing.xml");
  REQUIRE_FALSE(not_xml.ok());
  CHECK(not_xml.error().code == ErrorCode::not_found);
}

TEST_CASE("an XML file that is not an hwloc export is refused with the reason") {
  TempDir dir;
  std::ofstream(dir.path() / "domain.xml") << "<domain type='kvm'><name>x</name></domain>\n";
  std::ofstream(dir.path() / "broken.xml") << "<topology version='2.0'><object\n";
  const auto domain = discover_from_hwloc_xml(dir.path() / "domain.xml");
  REQUIRE_FALSE(domain.ok());
  CHECK(domain.error().message.find("no <topology> root") != std::string::npos);
  const auto broken = discover_from_hwloc_xml(dir.path() / "broken.xml");
  REQUIRE_FALSE(broken.ok());
  CHECK(broken.error().code == ErrorCode::parse_error);
}

TEST_CASE("the live machine's sysfs (a VM with virtio devices) is discovered") {
  const auto model = discover_from_sysfs("/");
  REQUIRE_MESSAGE(model.ok(), model.error().message);
  CHECK_FALSE(model->numa_nodes.empty());
  CHECK_FALSE(model->cpus.empty());
  for (const auto& f : model->pci_devices) {
    CAPTURE(f.address.to_string());
    CHECK(f.driver.has_value());  // known (possibly "") on a live host
  }
}

}  // namespace
}  // namespace hostagent::discovery
