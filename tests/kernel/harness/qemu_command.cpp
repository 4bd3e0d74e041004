// Real-kernel harness: the emulated GPU host's QEMU command line (see qemu_command.hpp).
#include "qemu_command.hpp"

#include "../emulated_host.hpp"
#include "hostagent/verify/guest_image.hpp"

namespace hostagent::testing::kernel {
namespace {

namespace host = emulated_host;

std::string hex(int value) {
  static constexpr const char* kDigits = "0123456789abcdef";
  std::string out;
  do {
    out.insert(out.begin(), kDigits[value % 16]);
    value /= 16;
  } while (value > 0);
  return "0x" + out;
}

// Every PCIe port needs a (chassis, slot) pair of its own; a counter gives each a chassis.
class Chassis {
 public:
  std::string next() { return std::to_string(next_++); }

 private:
  int next_ = 1;
};

// QEMU 7.2's NVMe SR-IOV constraints (hw/nvme/ctrl.c nvme_check_constraints): a subsystem; at least
// two flexible queue pairs and one flexible interrupt per VF; the PF keeps two queue pairs (admin +
// one I/O) and its MSI-X table two vectors beyond the flexible ones.
std::string nvme_pf(int node, int max_vfs) {
  const int vq_flexible = 2 * max_vfs;
  const int vi_flexible = max_vfs;
  const std::string n = std::to_string(node);
  return "nvme,id=nvme" + n + ",bus=rp" + n + "n,serial=hostagent-nvme" + n + ",subsys=subsys" + n +
         ",sriov_max_vfs=" + std::to_string(max_vfs) + ",sriov_vq_flexible=" + std::to_string(vq_flexible) +
         ",sriov_vi_flexible=" + std::to_string(vi_flexible) + ",max_ioqpairs=" + std::to_string(vq_flexible + 2) +
         ",msix_qsize=" + std::to_string(vi_flexible + 2);
}

void add_node(std::vector<std::string>& devices, int node, Chassis& chassis, int nvme_max_vfs,
              const std::filesystem::path& edu_romfile) {
  const std::string n = std::to_string(node);
  const std::string pxb = "pxb" + n;
  devices.push_back("pxb-pcie,id=" + pxb + ",bus_nr=" + hex(host::kBusBase.at(node)) + ",numa_node=" + n +
                    ",bus=pcie.0,addr=" + hex(0x10 + node));
  // The switch: a root port, the upstream port, one downstream port per endpoint.
  devices.push_back("pcie-root-port,id=rp" + n + "s,bus=" + pxb + ",chassis=" + chassis.next() + ",slot=0,addr=0x0");
  devices.push_back("x3130-upstream,id=up" + n + ",bus=rp" + n + "s");
  int port = 0;
  const auto downstream = [&](const std::string& endpoint) {
    const std::string id = "dp" + n + "_" + std::to_string(port);
    devices.push_back("xio3130-downstream,id=" + id + ",bus=up" + n + ",port=" + std::to_string(port) +
                      ",chassis=" + chassis.next() + ",slot=0");
    devices.push_back(endpoint + ",bus=" + id);
    ++port;
  };
  const std::string edu = edu_romfile.empty() ? "edu" : "edu,romfile=" + edu_romfile.string();
  for (int i = 0; i < host::kEduPerNode; ++i) downstream(edu);
  if (node == 0) downstream("virtio-rng-pci,disable-legacy=on,ats=on");
  // The NVMe PF on a root port of its own.
  devices.push_back("pcie-root-port,id=rp" + n + "n,bus=" + pxb + ",chassis=" + chassis.next() + ",slot=0,addr=0x1");
  devices.push_back("nvme-subsys,id=subsys" + n + ",nqn=hostagent-kernel-" + n);
  devices.push_back(nvme_pf(node, nvme_max_vfs));
}

}  // namespace

std::string kernel_cmdline(bool host_dma_translated) {
  // tcg_kernel_cmdline appends no_timer_check: under TCG on a loaded machine the boot's timer check panics.
  const std::string iommu = host_dma_translated ? "intel_iommu=on" : "intel_iommu=on iommu=pt";
  return verify::tcg_kernel_cmdline("console=ttyS0 " + iommu + " panic=-1 quiet");
}

std::vector<std::string> device_arguments(int nvme_max_vfs, const std::filesystem::path& edu_romfile,
                                          bool tenant_nvme) {
  // The IOMMU first: QEMU attaches each PCI device to the IOMMU that exists when it is created.
  std::vector<std::string> devices = {"intel-iommu,intremap=on,caching-mode=on"};
  Chassis chassis;
  for (int node = 0; node < host::kNodes; ++node) add_node(devices, node, chassis, nvme_max_vfs, edu_romfile);
  if (tenant_nvme) {
    // On node 1's expander, after its PF (a higher bus: placement ranks the PF's VFs first on the
    // node). The legacy drive= property: one namespace, NSID 1, attached at realize (hw/nvme/ctrl.c
    // nvme_realize), which Format NVM zeroes (nvme_format_ns_cb: write-zeroes over the drive).
    devices.push_back("pcie-root-port,id=rp1t,bus=pxb1,chassis=" + chassis.next() + ",slot=0,addr=0x2");
    devices.push_back(std::string("nvme,id=nvmetenant,serial=") + host::kTenantNvmeSerial +
                      ",drive=tenant,bus=rp1t,use-intel-id=on");
  }
  return devices;
}

std::vector<std::string> qemu_argv(const QemuInputs& inputs) {
  const int cpus = host::kNodes * host::kCpusPerNode;
  // TCG, as on CI, even where /dev/kvm exists: nested KVM with the emulated IOMMU and the split
  // irqchip hung before the kernel's first line on a development machine.
  std::vector<std::string> argv = {inputs.qemu.string(),       "-accel", "tcg", "-machine",
                                   "q35,kernel-irqchip=split", "-cpu",   "max"};
  // A socket per node, as on a two-socket host: CPUs of one package on two nodes make the guest
  // kernel warn (arch/x86/kernel/smpboot.c topology_sane).
  argv.insert(argv.end(), {"-smp", std::to_string(cpus) + ",sockets=" + std::to_string(host::kNodes), "-m",
                           std::to_string(host::kNodes * host::kMemoryMibPerNode) + "M"});
  // No default NIC, VGA, monitor or serial port: only what is listed here.
  argv.insert(argv.end(), {"-nodefaults", "-display", "none", "-no-reboot"});
  for (int node = 0; node < host::kNodes; ++node) {
    const std::string n = std::to_string(node);
    const int first_cpu = node * host::kCpusPerNode;
    const std::string cpu_range =
        host::kCpusPerNode == 1 ? std::to_string(first_cpu)
                                : std::to_string(first_cpu) + "-" + std::to_string(first_cpu + host::kCpusPerNode - 1);
    argv.insert(argv.end(),
                {"-object", "memory-backend-ram,id=mem" + n + ",size=" + std::to_string(host::kMemoryMibPerNode) + "M",
                 "-numa", "node,nodeid=" + n + ",cpus=" + cpu_range + ",memdev=mem" + n});
  }
  for (const auto& device : device_arguments(inputs.nvme_max_vfs, inputs.edu_romfile, !inputs.tenant_disk.empty()))
    argv.insert(argv.end(), {"-device", device});
  if (inputs.share_host_root) {
    // security_model=none: files keep this machine's owners and modes, and nothing is remapped;
    // multidevs=remap: / spans several file systems, whose inode numbers would otherwise collide
    // in the guest (QEMU's docs/system/invocation, -fsdev).
    argv.insert(argv.end(),
                {"-fsdev", std::string("local,id=hostroot,path=/,security_model=none,readonly=on,multidevs=remap"),
                 "-device", std::string("virtio-9p-pci,fsdev=hostroot,mount_tag=") + kHostRootTag + ",bus=pcie.0"});
  }
  if (!inputs.persistent_disk.empty()) {
    // QEMU's NVMe flushes its drive on the guest's Flush command: what the guest synced is on the
    // image when QEMU exits.
    argv.insert(argv.end(), {"-drive", "file=" + inputs.persistent_disk.string() + ",if=none,id=persist,format=raw",
                             "-device", "nvme,id=nvmepersist,serial=hostagent-persist,drive=persist,bus=pcie.0"});
  }
  if (!inputs.tenant_disk.empty()) {
    // Before the devices: the tenant's controller (device_arguments) names this drive.
    argv.insert(argv.end(), {"-drive", "file=" + inputs.tenant_disk.string() + ",if=none,id=tenant,format=raw"});
  }
  argv.insert(argv.end(), {"-serial", "file:" + inputs.console_log.string(), "-serial",
                           "file:" + inputs.results_log.string(), "-kernel", inputs.kernel.string(), "-initrd",
                           inputs.initrd.string(), "-append", kernel_cmdline(!inputs.tenant_disk.empty())});
  return argv;
}

}  // namespace hostagent::testing::kernel
