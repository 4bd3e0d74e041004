// The templates hostagent ships (vmtemplates/templates/): each loads, and each states the shape its
// name promises. A change to a shipped template that alters a shape must change this test too.
#include <doctest/doctest.h>

#include <set>

#include "hostagent/vmtemplates/shape_request.hpp"
#include "hostagent/vmtemplates/vm_template.hpp"
#include "test_support.hpp"

namespace hostagent::vmtemplates {
namespace {

namespace fs = std::filesystem;

using hostagent::testing::kGiB;
const fs::path kShipped = hostagent::testing::shipped_templates_dir();

VmTemplate shipped(const std::string& name) {
  auto shape = load_template_file(kShipped / (name + ".yaml"), {});
  REQUIRE_MESSAGE(shape.ok(), (shape.ok() ? "" : shape.error().message));
  return *shape;
}

std::vector<PciId> nvidia(std::initializer_list<uint16_t> devices) {
  std::vector<PciId> ids;
  for (const uint16_t device : devices) ids.push_back(PciId{0x10de, device});
  return ids;
}

TEST_CASE("shipped templates: the directory loads, and the abstract base is not offered as a shape") {
  const auto loaded = load_template_dirs({kShipped});
  REQUIRE_MESSAGE(loaded.ok(), (loaded.ok() ? "" : loaded.error().message));
  std::set<std::string> names;
  for (const auto& [name, shape] : *loaded) {
    names.insert(name);
    CHECK(shape.name == name);
    CHECK_FALSE(shape.abstract);
    CHECK(shape.source == (kShipped / (name + ".yaml")).string());
    CHECK(shape.memory_bytes % shape.hugepage_size_bytes == 0);
  }
  CHECK(names == std::set<std::string>{"cx-2x1", "gx2-80x1280x8a100", "gx3-16x128x1h100", "gx3-32x256x2h100",
                                       "gx3d-160x1792x8h100", "gx3d-h200-8x4ib"});
}

TEST_CASE("shipped templates: gx3d-160x1792x8h100 is a whole Vela 2 node, built on base-h100") {
  const VmTemplate shape = shipped("gx3d-160x1792x8h100");
  CHECK(shape.name == "gx3d-160x1792x8h100");
  CHECK(shape.description == "Vela 2 training node, 8 H100 with a cluster VF each");
  CHECK(shape.vcpus == 160);
  CHECK(shape.memory_bytes == 1792 * kGiB);
  CHECK(shape.hugepage_size_bytes == kGiB);
  CHECK(shape.guest_numa.mirror);
  CHECK(shape.gpus.count == 8);
  CHECK(shape.gpus.model == "H100");
  CHECK(shape.gpus.ids == nvidia({0x2330, 0x2331, 0x2324}));
  CHECK(shape.nics.vfs_per_gpu == 1);
  CHECK(shape.nics.count == 0);
  CHECK(shape.nics.placement == NicPlacement::strict);
  CHECK(shape.nics.vf.mac == MacPolicy::automatic);
  CHECK(shape.nics.vf.trust == std::optional<bool>(true));
  CHECK(shape.nics.vf.spoofchk == std::optional<bool>(false));
  CHECK(shape.nics.vf.mtu == 9000);
  CHECK_FALSE(shape.nics.vf.vlan.has_value());
  CHECK(shape.nvme == 8);
  CHECK(shape.peer_to_peer);
  CHECK(shape.machine == "q35");
  CHECK(shape.firmware == Firmware::efi);
  CHECK(shape.boot.image == "/var/lib/hostagent/images/ubuntu-22.04-cuda.qcow2");
  CHECK(shape.boot.cloud_init.starts_with("#cloud-config\n"));
  CHECK(shape.boot.cloud_init.find("net.ipv4.conf.all.arp_ignore = 2\n") != std::string::npos);
  CHECK(shape.metadata == std::map<std::string, std::string>{{"family", "gx3"}, {"profile", "gx3d-160x1792x8h100"}});
  CHECK_FALSE(shape.abstract);
}

TEST_CASE("shipped templates: the small H100 shapes override the base's counts and peer-to-peer") {
  const VmTemplate one = shipped("gx3-16x128x1h100");
  CHECK(one.vcpus == 16);
  CHECK(one.memory_bytes == 128 * kGiB);
  CHECK(one.gpus.count == 1);
  CHECK(one.gpus.model == "H100");
  CHECK(one.nics.vfs_per_gpu == 1);
  CHECK(one.nvme == 0);
  CHECK_FALSE(one.peer_to_peer);  // the base says true; one GPU has no peer
  CHECK(one.nics.vf.mtu == 9000);

  const VmTemplate two = shipped("gx3-32x256x2h100");
  CHECK(two.vcpus == 32);
  CHECK(two.memory_bytes == 256 * kGiB);
  CHECK(two.gpus.count == 2);
  CHECK(two.nics.vfs_per_gpu == 1);
  CHECK(two.peer_to_peer);
  CHECK(two.metadata.at("profile") == "gx3-32x256x2h100");
  CHECK(two.metadata.at("family") == "gx3");
}

TEST_CASE("shipped templates: gx2-80x1280x8a100 is a Vela 1 node with 2 front-end VFs") {
  const VmTemplate shape = shipped("gx2-80x1280x8a100");
  CHECK(shape.vcpus == 80);
  CHECK(shape.memory_bytes == 1280 * kGiB);
  CHECK(shape.hugepage_size_bytes == kGiB);
  CHECK(shape.gpus.count == 8);
  CHECK(shape.gpus.model == "A100");
  CHECK(shape.gpus.ids == nvidia({0x20b0, 0x20b2, 0x20b5, 0x20f1}));
  CHECK(shape.nics.vfs_per_gpu == 0);
  CHECK(shape.nics.count == 2);
  CHECK(shape.nics.vf.mtu == 9000);
  CHECK_FALSE(shape.nics.vf.trust.has_value());  // silent: the host's devices.vf decides
  CHECK_FALSE(shape.nics.vf.spoofchk.has_value());
  CHECK(shape.nvme == 4);
  CHECK(shape.peer_to_peer);
  CHECK(shape.boot.image == "/var/lib/hostagent/images/ubuntu-20.04-cuda.qcow2");
  CHECK(shape.boot.cloud_init.empty());
}

TEST_CASE("shipped templates: cx-2x1 has no devices, for CI lifecycle tests") {
  const VmTemplate shape = shipped("cx-2x1");
  CHECK(shape.vcpus == 2);
  CHECK(shape.memory_bytes == 1 * kGiB);
  CHECK(shape.hugepage_size_bytes == 2ULL << 20);
  CHECK_FALSE(shape.guest_numa.mirror);
  CHECK(shape.guest_numa.cells == 1);
  CHECK(shape.gpus.count == 0);
  CHECK(shape.gpus.ids.empty());
  CHECK(shape.nics.vfs_per_gpu == 0);
  CHECK(shape.nics.count == 0);
  CHECK(shape.nvme == 0);
  CHECK_FALSE(shape.peer_to_peer);
  CHECK(shape.firmware == Firmware::bios);
  CHECK(shape.boot.image.empty());
  CHECK(shape.metadata == std::map<std::string, std::string>{{"purpose", "ci"}});
}

TEST_CASE("shipped templates: base-h100 loads on its own as an abstract base") {
  const VmTemplate base = shipped("base-h100");
  CHECK(base.abstract);
  CHECK(base.vcpus == 0);
  CHECK(base.memory_bytes == 0);
  CHECK(base.gpus.model == "H100");
  CHECK(base.gpus.count == 0);
  CHECK(base.peer_to_peer);
}

}  // namespace
TEST_CASE("shipped templates: gx3d-h200-8x4ib takes 8 H200 and 4 whole HCAs, each near its GPUs") {
  const auto shape = shipped("gx3d-h200-8x4ib");
  const auto* it = &shape;
  CHECK(it->gpus.count == 8);
  CHECK(it->gpus.model == "H200");
  CHECK(it->nics.mode == NicMode::pf);
  CHECK(it->nics.count == 4);
  CHECK(it->nics.placement == NicPlacement::strict);
  const auto request = placement_request(*it);
  CHECK(request.whole_nics == 4);
  CHECK(request.extra_vfs == 0);
  CHECK(request.vfs_per_gpu == 0);
}

}  // namespace hostagent::vmtemplates
