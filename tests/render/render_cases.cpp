// The scenarios the render tests share: 8 GPUs with their VFs over 2 cells on vela1 and vela2, a
// 2-GPU guest, a guest without devices, IBM's gx2-80x1280x8a100 shape on vela1, the quirks host (a
// GPU with its audio function, GPUs on root ports of their own), CI's direct-kernel-boot guest, and a
// small VM with its cloud-init seed.
#include <doctest/doctest.h>

#include "render_fixture.hpp"

namespace hostagent::render::testing {
namespace {

Case start(const std::string& name, const std::string& host, int vfs_per_pf, const Want& want) {
  Case c;
  c.name = name;
  c.host_name = host;
  c.vfs_per_pf = vfs_per_pf;
  c.host = discover(host, vfs_per_pf);
  c.want = want;
  c.shape = make_shape(name, want);
  c.placement = make_placement(c.host->model, want);
  c.opts = options(name);
  return c;
}

Case vela1_8gpu() {
  Want want;
  want.host_nodes = {0, 1};
  want.vcpus_per_cell = 16;
  want.memory_per_cell = 64 * GiB;
  want.gpus_per_cell = 4;
  want.vfs_per_gpu = 1;
  auto c = start("vela1-8gpu", "vela1", 2, want);
  c.shape.peer_to_peer = true;
  c.shape.boot.image = "/var/lib/hostagent/images/vela1-8gpu.qcow2";
  return c;
}

Case vela2_8gpu() {
  Want want;
  want.host_nodes = {0, 1};
  want.vcpus_per_cell = 32;
  want.memory_per_cell = 128 * GiB;
  want.gpus_per_cell = 4;
  want.vfs_per_gpu = 1;
  want.nvme = 2;
  auto c = start("vela2-8gpu", "vela2", 0, want);
  c.shape.peer_to_peer = true;
  c.shape.nics.vf.vlan = 100;
  c.shape.boot.image = "/var/lib/hostagent/images/vela2-8gpu.qcow2";
  c.shape.metadata = {{"team", "llm-pretraining"}, {"cost_center", "R&D <4711>"}};
  return c;
}

Case vela2_2gpu() {
  Want want;
  want.host_nodes = {1};
  want.vcpus_per_cell = 12;
  want.memory_per_cell = 96 * GiB;
  want.gpus_per_cell = 2;
  want.vfs_per_gpu = 1;
  want.nvme = 1;
  auto c = start("vela2-2gpu", "vela2", 0, want);
  c.shape.boot.image = "/var/lib/hostagent/images/vela2-2gpu.qcow2";
  c.opts.managed_hostdevs = false;
  // As a request gives them, in either case: MacAddress keeps them in lower case.
  c.opts.vf_macs = {MacAddress::parse("52:54:00:AA:00:01", "macs[0]").value(), "52:54:00:aa:00:02"};
  return c;
}

Case vela1_nodevice() {
  Want want;
  want.host_nodes = {0};
  want.vcpus_per_cell = 4;
  want.memory_per_cell = 8 * GiB;
  auto c = start("vela1-nodevice", "vela1", 0, want);
  c.shape.firmware = vmtemplates::Firmware::bios;
  c.opts.uuid = "6f3b8c1e-2a4d-4e5f-9a0b-1c2d3e4f5a6b";
  return c;
}

// IBM Cloud's gx2-80x1280x8a100 profile: 80 vCPUs, 1280 GiB, 8 A100, a VF of the NIC beside each
// GPU plus 2 front-end VFs, 4 NVMe.
Case vela1_gx2() {
  Want want;
  want.host_nodes = {0, 1};
  want.vcpus_per_cell = 40;
  want.memory_per_cell = 640 * GiB;
  want.gpus_per_cell = 4;
  want.vfs_per_gpu = 1;
  want.extra_vfs = 2;
  want.nvme = 4;
  auto c = start("vela1-gx2-80x1280x8a100", "vela1", 2, want);
  c.shape.name = "gx2-80x1280x8a100";
  c.shape.peer_to_peer = true;
  c.shape.boot.image = "/var/lib/hostagent/images/gx2-80x1280x8a100.qcow2";
  c.opts.emulator = "/usr/bin/qemu-system-x86_64";
  return c;
}

// CI's lifecycle guest (tests/support/test_guest.hpp) on vela1's node 1: 2 vCPUs, 1 GiB in 2M
// pages, BIOS, direct kernel boot with the disk image beside it, the console logged to a file.
Case vela1_kernel_boot() {
  Want want;
  want.host_nodes = {1};
  want.vcpus_per_cell = 2;
  want.memory_per_cell = GiB;
  want.page_size = 2ULL << 20;
  auto c = start("vela1-kernel-boot", "vela1", 0, want);
  c.shape.firmware = vmtemplates::Firmware::bios;
  c.shape.boot.kernel = "/boot/vmlinuz-6.1.0-57-amd64";
  c.shape.boot.initrd = "/var/lib/hostagent/test-guest/initramfs.cpio";
  c.shape.boot.cmdline = "console=ttyS0 panic=-1 quiet";
  c.shape.boot.image = "/var/lib/hostagent/images/scratch.qcow2";
  c.opts.domain_type = "qemu";
  c.opts.console_log = "/var/log/hostagent/vela1-kernel-boot.console.log";
  return c;
}

// A small cloud VM on vela1's node 0: the boot image, and the cloud-init NoCloud seed hostagent
// writes for it (its SSH keys) as a read-only CD-ROM.
Case vela1_cloud_init() {
  Want want;
  want.host_nodes = {0};
  want.vcpus_per_cell = 4;
  want.memory_per_cell = 8 * GiB;
  auto c = start("vela1-cloud-init", "vela1", 0, want);
  c.shape.boot.image = "/var/lib/hostagent/images/vela1-cloud-init.qcow2";
  c.opts.seed_iso = "/var/lib/hostagent/seeds/vela1-cloud-init.iso";
  return c;
}

// The quirks host: an RTX A6000 sharing its IOMMU group with its audio function and a downtrained
// A100, both on root ports of node 0; on node 1 an A100 and a ConnectX-6 Dx behind a switch whose
// ports do not know their NUMA node.
Case quirks_3gpu() {
  Want want;
  want.host_nodes = {0, 1};
  want.vcpus_per_cell = 6;
  want.memory_per_cell = 4 * GiB;
  want.gpus_per_cell = 2;
  want.housekeeping = {0, 8};
  auto c = start("quirks-3gpu", "quirks", 1, want);
  REQUIRE(c.placement.gpus.size() == 3);
  const auto* vf = c.host->model.find(pci("0000:84:00.2"));
  REQUIRE(vf != nullptr);
  c.placement.gpus[2].vfs.push_back(numa::PlacedDevice{vf->address, vf->numa_node, vf->pcie_switch, 1});
  c.shape.gpus.count = 3;
  c.shape.nics.vfs_per_gpu = 1;
  c.shape.peer_to_peer = true;
  return c;
}

}  // namespace

std::vector<std::string> case_names() {
  return {"vela1-8gpu",  "vela2-8gpu",        "vela2-2gpu",      "vela1-nodevice", "vela1-gx2-80x1280x8a100",
          "quirks-3gpu", "vela1-kernel-boot", "vela1-cloud-init"};
}

Case make_case(const std::string& name) {
  if (name == "vela1-8gpu") return vela1_8gpu();
  if (name == "vela2-8gpu") return vela2_8gpu();
  if (name == "vela2-2gpu") return vela2_2gpu();
  if (name == "vela1-nodevice") return vela1_nodevice();
  if (name == "vela1-gx2-80x1280x8a100") return vela1_gx2();
  if (name == "quirks-3gpu") return quirks_3gpu();
  if (name == "vela1-kernel-boot") return vela1_kernel_boot();
  if (name == "vela1-cloud-init") return vela1_cloud_init();
  FAIL("unknown case " << name);
  return {};
}

}  // namespace hostagent::render::testing
