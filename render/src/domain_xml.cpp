// render/domain_xml: the domain-wide parts of the libvirt domain XML: identity and metadata, memory
// and hugepages, vCPU pinning, guest NUMA cells with host distances, strict NUMA memory, firmware.
#include "domain_xml.hpp"

#include <algorithm>
#include <map>
#include <optional>
#include <utility>

#include "text_format.hpp"
#include "xml_util.hpp"

namespace hostagent::render::detail {
namespace {

constexpr uint64_t KiB = 1024;
constexpr uint64_t MiB = 1024 * KiB;
constexpr int kLocalDistance = 10;  // ACPI SLIT: a node's distance to itself

uint64_t total_memory(const numa::Placement& placement) {
  uint64_t total = 0;
  for (const auto& cell : placement.cells) total += cell.memory_bytes;
  return total;
}

std::vector<int> host_nodes(const numa::Placement& placement) {
  std::vector<int> nodes;
  for (const auto& cell : placement.cells) nodes.push_back(cell.host_node);
  return nodes;
}

std::vector<int> cell_ids(const numa::Placement& placement) {
  std::vector<int> ids;
  for (const auto& cell : placement.cells) ids.push_back(cell.id);
  return ids;
}

void append_metadata(pugi::xml_node domain, const DomainInputs& in) {
  // libvirt keeps one element per namespace under <metadata> and hands it back unchanged: the
  // place where the daemon keeps what the VM is (DESIGN.md, State). Keys were checked as XML names.
  auto vm = add(add(domain, "metadata"), "hostagent:vm");
  set(vm, "xmlns:hostagent", kHostagentNamespace);
  set(add(vm, "hostagent:template"), "name", in.shape.name);
  if (in.shape.metadata.empty()) return;
  auto entries = add(vm, "hostagent:metadata");
  for (const auto& [key, value] : in.shape.metadata) add_text(entries, ("hostagent:" + key).c_str(), value);
}

void append_identity(pugi::xml_node domain, const DomainInputs& in) {
  add_text(domain, "name", in.options.name);
  if (in.options.uuid) add_text(domain, "uuid", in.options.uuid->str());
  append_metadata(domain, in);
}

void append_memory(pugi::xml_node domain, const DomainInputs& in) {
  set(add_text(domain, "memory", std::to_string(total_memory(in.placement) / KiB)), "unit", "KiB");
  const uint64_t page = in.shape.hugepage_size_bytes;
  if (page == 0) return;
  // One page size for every guest cell; each cell's pages come from its own host node (numatune).
  auto backing = add(domain, "memoryBacking");
  auto node = add(add(backing, "hugepages"), "page");
  set(node, "size", page / KiB);
  set(node, "unit", "KiB");
  set(node, "nodeset", id_list(cell_ids(in.placement)));
  // Hugepages are allocated up front anyway (libvirt sets prealloc for them); threads='N' is QEMU's
  // prealloc-threads per cell backend. libvirt 9.0 gives each cell's threads a thread-context bound
  // to the cell's host node (qemuBuildThreadContextProps, with the numatune memnode below), so the
  // zeroing runs on the node that owns the memory (docs/operations.md, "Levers").
  set(set(add(backing, "allocation"), "mode", "immediate"), "threads",
      render::allocation_threads(in.shape, in.placement));
}

void append_cputune(pugi::xml_node domain, const DomainInputs& in) {
  std::map<int, int> pins;  // vCPU -> host CPU, in vCPU order
  for (const auto& cell : in.placement.cells) {
    for (std::size_t i = 0; i < cell.vcpus.size(); ++i) pins[cell.vcpus[i]] = cell.host_cpus[i];
  }
  set(add_text(domain, "vcpu", std::to_string(pins.size())), "placement", "static");
  auto cputune = add(domain, "cputune");
  for (const auto& [vcpu, cpu] : pins) {
    set(set(add(cputune, "vcpupin"), "vcpu", vcpu), "cpuset", std::to_string(cpu));
  }
  // QEMU's main loop and I/O threads stay on the housekeeping CPUs, off the vCPUs' cores.
  if (!in.placement.emulator_cpus.empty()) {
    set(add(cputune, "emulatorpin"), "cpuset", id_list(in.placement.emulator_cpus));
  }
}

void append_numatune(pugi::xml_node domain, const DomainInputs& in) {
  // strict: the guest's memory is never silently taken from another host node (a remote node
  // would break the locality the guest's NUMA layout promises NCCL).
  auto numatune = add(domain, "numatune");
  set(set(add(numatune, "memory"), "mode", "strict"), "nodeset", id_list(host_nodes(in.placement)));
  for (const auto& cell : in.placement.cells) {
    auto memnode = set(add(numatune, "memnode"), "cellid", cell.id);
    set(set(memnode, "mode", "strict"), "nodeset", std::to_string(cell.host_node));
  }
}

// OVMF sizes its 64-bit PCI aperture from the fw_cfg file "opt/ovmf/X-PciMmio64Mb" (OvmfPkg
// PlatformInitLib); Debian 12's OVMF (edk2 2022.11) otherwise stops at 32 GiB. Same size as
// pcihole64. libvirt refuses opt/ovmf/ names in <sysinfo type='fwcfg'> ("That firmware name is
// reserved", qemuValidateDomainDefSysinfo), so the file goes on QEMU's command line, as libvirt's
// own documentation of the qemu namespace shows it; libvirt marks such a domain tainted
// (custom-argv) in its log, which is all it does.
void append_qemu_commandline(pugi::xml_node domain, const DomainInputs& in) {
  if (in.shape.firmware != vmtemplates::Firmware::efi || in.mmio.window_bytes == 0) return;
  auto line = add(domain, "qemu:commandline");
  set(add(line, "qemu:arg"), "value", "-fw_cfg");
  set(add(line, "qemu:arg"), "value",
      "name=opt/ovmf/X-PciMmio64Mb,string=" + std::to_string(in.mmio.window_bytes / MiB));
  set(domain, "xmlns:qemu", kQemuNamespace);
}

int bits_for(int count) {
  int bits = 0;
  while ((1 << bits) < count) ++bits;
  return bits;
}

// The highest x2APIC id QEMU gives a vCPU: thread, core and socket ids packed into bit fields each
// rounded up to a power of two (QEMU include/hw/i386/topology.h).
int max_apic_id(const numa::GuestCpuTopology& t) {
  const int core_shift = bits_for(t.threads);
  const int socket_shift = core_shift + bits_for(t.cores);
  return ((t.sockets - 1) << socket_shift) | ((t.cores - 1) << core_shift) | (t.threads - 1);
}

// Direct kernel boot: QEMU loads these itself (-kernel, -initrd, -append) and gives its linuxboot
// option ROM boot index 0 (hw/i386/x86.c), so the kernel boots before any disk with a <boot order>.
void append_kernel_boot(pugi::xml_node os, const vmtemplates::BootSpec& boot) {
  if (boot.kernel.empty()) return;
  add_text(os, "kernel", boot.kernel);
  if (!boot.initrd.empty()) add_text(os, "initrd", boot.initrd);
  if (!boot.cmdline.empty()) add_text(os, "cmdline", boot.cmdline);
}

void append_os(pugi::xml_node domain, const DomainInputs& in) {
  auto os = add(domain, "os");
  // libvirt >= 5.2 picks an OVMF build from the firmware descriptors (firmware autoselection).
  if (in.shape.firmware == vmtemplates::Firmware::efi) set(os, "firmware", "efi");
  auto type = add_text(os, "type", "hvm");
  set(type, "arch", "x86_64");
  set(type, "machine", in.shape.machine);
  append_kernel_boot(os, in.shape.boot);
  // ACPI is required: pxb-pcie buses and guest NUMA nodes reach the guest through ACPI (DSDT, SRAT).
  auto features = add(domain, "features");
  add(features, "acpi");
  add(features, "apic");
  // APIC ids past 254 do not fit an xAPIC destination: QEMU then needs the split irqchip, and the
  // guest reaches those vCPUs through KVM's extended MSI destination id (QEMU >= 5.2, Linux >= 5.10).
  if (max_apic_id(in.placement.topology) > 254) set(add(features, "ioapic"), "driver", "qemu");
}

// The host's SLIT distances between the cells' nodes; nullopt when the host does not tell them all
// (QEMU wants all or none). Two cells on one host node get 11: libvirt rejects 10 between cells.
std::optional<std::vector<std::vector<int>>> cell_distances(const DomainInputs& in) {
  const auto& cells = in.placement.cells;
  std::vector<std::vector<int>> matrix(cells.size(), std::vector<int>(cells.size(), kLocalDistance));
  for (std::size_t i = 0; i < cells.size(); ++i) {
    for (std::size_t j = 0; j < cells.size(); ++j) {
      if (i == j) continue;
      const auto d = in.host.distance(cells[i].host_node, cells[j].host_node);
      if (!d) return std::nullopt;
      matrix[i][j] = std::max(*d, kLocalDistance + 1);
    }
  }
  return matrix;
}

void append_numa_cells(pugi::xml_node cpu, const DomainInputs& in) {
  const auto distances = cell_distances(in);
  auto numa = add(cpu, "numa");
  for (std::size_t i = 0; i < in.placement.cells.size(); ++i) {
    const auto& cell = in.placement.cells[i];
    auto node = set(set(add(numa, "cell"), "id", cell.id), "cpus", id_list(cell.vcpus));
    set(set(node, "memory", cell.memory_bytes / KiB), "unit", "KiB");
    if (!distances) continue;
    auto siblings = add(node, "distances");
    for (std::size_t j = 0; j < in.placement.cells.size(); ++j) {
      set(set(add(siblings, "sibling"), "id", static_cast<int>(j)), "value", (*distances)[i][j]);
    }
  }
}

void append_cpu(pugi::xml_node domain, const DomainInputs& in) {
  // host-passthrough: the guest sees the host's CPUID (NCCL reads vendor/family/model from it) and,
  // with maxphysaddr passthrough, the host's physical address width, which the multi-TiB 64-bit
  // MMIO window needs. TCG ('qemu') cannot pass the host CPU through: it gets QEMU's maximum model.
  const bool kvm = in.options.domain_type != "qemu";
  auto cpu = add(domain, "cpu");
  set(cpu, "mode", kvm ? "host-passthrough" : "maximum");
  set(cpu, "check", "none");
  set(cpu, "migratable", "off");
  const auto& t = in.placement.topology;
  set(set(set(add(cpu, "topology"), "sockets", t.sockets), "cores", t.cores), "threads", t.threads);
  if (kvm) set(add(cpu, "maxphysaddr"), "mode", "passthrough");
  append_numa_cells(cpu, in);
}

void append_clock_and_events(pugi::xml_node domain) {
  auto clock = set(add(domain, "clock"), "offset", "utc");
  set(set(add(clock, "timer"), "name", "rtc"), "tickpolicy", "catchup");
  set(set(add(clock, "timer"), "name", "pit"), "tickpolicy", "delay");
  set(set(add(clock, "timer"), "name", "hpet"), "present", "no");
  add_text(domain, "on_poweroff", "destroy");
  add_text(domain, "on_reboot", "restart");
  add_text(domain, "on_crash", "destroy");
  // Assigned devices cannot follow the guest into S3/S4.
  auto pm = add(domain, "pm");
  set(add(pm, "suspend-to-mem"), "enabled", "no");
  set(add(pm, "suspend-to-disk"), "enabled", "no");
}

}  // namespace

bool takes_clique(const Device& device) {
  constexpr uint16_t kNvidia = 0x10de;
  return device.role == DeviceRole::gpu && device.host->vendor_id == kNvidia;
}

std::string render_domain_xml(const DomainInputs& in) {
  pugi::xml_document doc;
  auto domain = set(doc.append_child("domain"), "type", in.options.domain_type);
  append_identity(domain, in);
  append_memory(domain, in);
  append_cputune(domain, in);
  append_numatune(domain, in);
  append_os(domain, in);
  append_cpu(domain, in);
  append_clock_and_events(domain);
  append_devices(domain, in);
  append_qemu_commandline(domain, in);
  append_qemu_override(domain, in);
  return to_text(doc, pugi::format_attribute_single_quote);
}

}  // namespace hostagent::render::detail

namespace hostagent::render {

int allocation_threads(const vmtemplates::VmTemplate& shape, const numa::Placement& placement) {
  if (shape.allocation_threads > 0) return shape.allocation_threads;
  // libvirt passes one count to every cell: the smallest cell's pinned CPUs, so no cell's zeroing
  // runs on more threads than the VM has CPUs there.
  auto smallest = static_cast<std::size_t>(vmtemplates::kMaxAllocationThreads);
  for (const auto& cell : placement.cells) smallest = std::min(smallest, cell.host_cpus.size());
  return static_cast<int>(std::max<std::size_t>(smallest, 1));
}

}  // namespace hostagent::render
