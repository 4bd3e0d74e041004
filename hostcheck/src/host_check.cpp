// hostcheck/host_check: the verdicts, from the facts, the host model and the templates. No I/O.
#include <algorithm>
#include <functional>
#include <sstream>

#include "hostagent/common/text.hpp"
#include "hostagent/hostcheck/host_check.hpp"
#include "hostagent/vmtemplates/shape_request.hpp"

namespace hostagent::hostcheck {
namespace {

constexpr uint64_t kGiB = 1ULL << 30;
constexpr int kCapSysResource = 24;  // linux/capability.h
// fwts' maxreadreq test: below 256 bytes is too low for throughput
// (https://wiki.ubuntu.com/FirmwareTestSuite/Reference/maxreadreq).
constexpr int kLowReadRequest = 256;

Check pass(std::string name, std::string found) {
  return {std::move(name), Verdict::pass, std::move(found), ""};
}
Check warn(std::string name, std::string found, std::string fix) {
  return {std::move(name), Verdict::warn, std::move(found), std::move(fix)};
}
Check fail(std::string name, std::string found, std::string fix) {
  return {std::move(name), Verdict::fail, std::move(found), std::move(fix)};
}

std::vector<std::string> words(const std::optional<std::string>& cmdline) {
  std::vector<std::string> out;
  if (!cmdline) return out;
  std::istringstream in(*cmdline);
  for (std::string word; in >> word;) out.push_back(word);
  return out;
}

bool has_word(const std::vector<std::string>& cmdline, std::string_view word) {
  return std::find(cmdline.begin(), cmdline.end(), word) != cmdline.end();
}

// "1 GPU", "8 GPUs".
std::string counted(int count, const std::string& one, const std::string& many = "") {
  return std::to_string(count) + " " + (count == 1 ? one : many.empty() ? one + "s" : many);
}

std::string joined(const std::vector<std::string>& items, std::size_t at_most = 8) {
  std::string out;
  for (std::size_t i = 0; i < items.size() && i < at_most; ++i) out += (i == 0 ? "" : ", ") + items[i];
  if (items.size() > at_most) out += " and " + std::to_string(items.size() - at_most) + " more";
  return out;
}

// A size as the kernel's memparse reads it: 1G, 1024M, 1048576K, bytes; nullopt otherwise.
std::optional<uint64_t> memparse(const std::string& text) {
  std::size_t used = 0;
  uint64_t value = 0;
  try {
    value = std::stoull(text, &used);
  } catch (const std::exception&) {
    return std::nullopt;
  }
  const std::string suffix = text.substr(used);
  if (suffix.empty()) return value;
  if (suffix.size() != 1) return std::nullopt;
  switch (std::toupper(static_cast<unsigned char>(suffix[0]))) {
    case 'K':
      return value << 10;
    case 'M':
      return value << 20;
    case 'G':
      return value << 30;
    default:
      return std::nullopt;
  }
}

// The `hugepages=` value the command line gives 1 GiB pages, "" when none: each hugepages= counts
// pages of the hugepagesz= before it, or of default_hugepagesz (2 MiB without one), as
// mm/hugetlb.c's hugepages_setup reads them.
std::string boot_1g_pages(const std::vector<std::string>& cmdline) {
  uint64_t default_size = 2ULL << 20;
  for (const auto& word : cmdline) {
    if (word.starts_with("default_hugepagesz=")) default_size = memparse(word.substr(19)).value_or(default_size);
  }
  std::optional<uint64_t> size;
  std::string pages;
  for (const auto& word : cmdline) {
    if (word.starts_with("hugepagesz=")) size = memparse(word.substr(11));
    if (word.starts_with("hugepages=") && size.value_or(default_size) == kGiB) pages = word.substr(10);
  }
  return pages;
}

Check iommu(const HostFacts& facts, const std::vector<std::string>& cmdline) {
  if (facts.iommu_groups > 0) {
    return pass("iommu", joined(facts.iommu_units) + "; " + std::to_string(facts.iommu_groups) + " groups");
  }
  std::string found = facts.iommu_units.empty() ? "no IOMMU: nothing in /sys/class/iommu and no IOMMU groups"
                                                : "IOMMU units " + joined(facts.iommu_units) + " but no groups";
  for (const char* off : {"intel_iommu=off", "amd_iommu=off"}) {
    if (has_word(cmdline, off)) found += std::string("; the kernel command line has ") + off;
  }
  return fail("iommu", found,
              "enable VT-d (Intel) or the IOMMU (AMD) in the firmware setup, and on Intel boot with intel_iommu=on "
              "(AMD's is on by default): without it VFIO cannot pass a device through");
}

Check passthrough(const HostFacts& facts, const std::vector<std::string>& cmdline) {
  const std::string name = "iommu passthrough";
  if (has_word(cmdline, "iommu=pt") || has_word(cmdline, "iommu.passthrough=1")) {
    return pass(name, "iommu=pt on the kernel command line");
  }
  if (facts.iommu_groups == 0) return warn(name, "no IOMMU groups to tell", "turn the IOMMU on first (iommu, above)");
  const auto identity = facts.group_types.find("identity");
  if (facts.iommu_groups > 0 && identity != facts.group_types.end() && identity->second == facts.iommu_groups) {
    return pass(name, "every group's default domain is identity (the kernel's own default)");
  }
  std::string types;
  for (const auto& [type, count] : facts.group_types) {
    types += (types.empty() ? "" : ", ") + type + " " + std::to_string(count);
  }
  return warn(name,
              "the host's own DMA is translated (groups' default domains: " + (types.empty() ? "none" : types) + ")",
              "add iommu=pt to the kernel command line: the host's own devices then skip translation and its "
              "IOTLB flushes; the VMs' devices are translated by VFIO either way");
}

Check kernel(const HostFacts& facts) {
  const std::string name = "kernel";
  int major = 0;
  int minor = 0;
  char dot = 0;
  std::istringstream release(facts.kernel_release.value_or(""));
  if (!(release >> major >> dot >> minor) || dot != '.') {
    return warn(name, "the kernel's release is unknown (no /proc/sys/kernel/osrelease)", "run on the host itself");
  }
  const std::string found = "Linux " + *facts.kernel_release;
  const std::string bars =
      "GPU BARs are DMA-mapped page by page before Linux 6.12 (huge pfnmap): about 1 s per 32 GB BAR at each start, "
      "half a minute for 8 H100";
  if (major < 5 || (major == 5 && minor < 13)) {
    return warn(name, found + ": VFIO pins guest memory one page at a time (batched from 5.13); " + bars,
                "a 6.12 or later kernel (Debian 12: bookworm-backports)");
  }
  if (major < 6 || (major == 6 && minor < 12)) {
    return warn(name, found + ": " + bars, "a 6.12 or later kernel (Debian 12: bookworm-backports)");
  }
  return pass(name, found + ": batched pinning and huge pfnmap BAR mapping");
}

Check vfio_pci(const HostFacts& facts) {
  if (facts.vfio_pci) return pass("vfio-pci", "the vfio-pci driver is registered");
  return fail("vfio-pci", "the vfio-pci driver is not loaded (no /sys/bus/pci/drivers/vfio-pci)",
              "modprobe vfio-pci, and list it in /etc/modules-load.d/ to load it at boot");
}

// libvirt raises each VFIO domain's QEMU RLIMIT_MEMLOCK itself, to about its memory plus 1 GiB
// (qemuDomainGetMemLockLimitBytes), with prlimit on the child: raising a hard limit takes
// CAP_SYS_RESOURCE.
Check memlock(const HostFacts& facts) {
  const std::string name = "qemu memlock";
  if (!facts.libvirt) {
    return warn(name,
                "neither libvirtd nor virtqemud runs: whether QEMU's locked-memory limit can be raised is unknown",
                "start libvirtd (systemctl start libvirtd)");
  }
  const auto& process = *facts.libvirt;
  const std::string who = process.name + " (pid " + std::to_string(process.pid) + ")";
  if ((process.effective_capabilities >> kCapSysResource) & 1U) {
    return pass(name, who +
                          " has CAP_SYS_RESOURCE: it raises each VFIO domain's locked-memory limit to its memory "
                          "plus 1 GiB");
  }
  return fail(name,
              who +
                  " runs without CAP_SYS_RESOURCE: QEMU keeps its own locked-memory limit, and VFIO's pinning of "
                  "guest memory fails with ENOMEM",
              "run libvirtd as root with its packaged unit (no CapabilityBoundingSet that drops CAP_SYS_RESOURCE)");
}

std::vector<std::string> templates_where(const std::vector<vmtemplates::VmTemplate>& templates,
                                         const std::function<bool(const vmtemplates::VmTemplate&)>& wanted) {
  std::vector<std::string> names;
  for (const auto& shape : templates) {
    if (!shape.abstract && wanted(shape)) names.push_back(shape.name);
  }
  return names;
}

Check gigantic_pages(const std::vector<std::string>& cmdline, const numa::HostModel& host,
                     const std::vector<vmtemplates::VmTemplate>& templates) {
  const std::string name = "1 GiB pages at boot";
  const auto users = templates_where(templates, [](const auto& t) { return t.hugepage_size_bytes == kGiB; });
  if (users.empty()) return pass(name, "no template uses 1 GiB pages");
  uint64_t total = 0;
  std::string per_node;
  for (const auto& node : host.numa_nodes) {
    for (const auto& pool : node.hugepages) {
      if (pool.page_size_bytes != kGiB) continue;
      total += pool.total;
      per_node +=
          (per_node.empty() ? "" : ", ") + ("node " + std::to_string(node.id) + ": " + std::to_string(pool.total));
    }
  }
  const std::string fix =
      "reserve them at boot: hugepagesz=1G hugepages=N on the kernel command line (per node: hugepages=0:N,1:N, "
      "Linux 5.16+); contiguous gigabytes are scarce once memory fragments";
  if (total == 0) return fail(name, "no 1 GiB pages reserved; " + joined(users) + " use them", fix);
  const std::string boot = boot_1g_pages(cmdline);
  if (boot.empty()) {
    return warn(name, std::to_string(total) + " pages (" + per_node + "), reserved after boot: not on the command line",
                fix);
  }
  return pass(name, "hugepagesz=1G hugepages=" + boot + " on the command line; " + std::to_string(total) + " pages (" +
                        per_node + ")");
}

// The NIC physical functions placement gives VFs of (a VF's ATS is its PF's).
std::vector<const numa::PciFunction*> nic_pfs(const numa::HostModel& host) {
  std::vector<const numa::PciFunction*> nics;
  for (const auto& function : host.pci_devices) {
    if (function.role == numa::PciRole::nic && !function.physfn && !function.host_use) nics.push_back(&function);
  }
  return nics;
}

Check nic_ats(const numa::HostModel& host, const std::vector<vmtemplates::VmTemplate>& templates) {
  const std::string name = "nic ats";
  if (templates_where(templates, [](const auto& t) { return t.peer_to_peer; }).empty()) {
    return pass(name, "no template asks for peer-to-peer");
  }
  std::vector<std::string> without;
  std::vector<std::string> unknown;
  int with = 0;
  for (const auto* nic : nic_pfs(host)) {
    if (!nic->config_space_known) {
      unknown.push_back(nic->address.to_string());
    } else if (nic->ats) {
      ++with;
    } else {
      without.push_back(nic->address.to_string());
    }
  }
  if (!without.empty()) {
    return warn(name, "no ATS capability on " + joined(without) + ": their firmware does not expose it",
                "enable ATS in the NICs' firmware (ConnectX: mlxconfig set ATS_ENABLED=true, then a cold reboot): "
                "without it, peer-to-peer between a VM's GPU and NIC turns at the root complex");
  }
  if (!unknown.empty()) {
    return warn(name, "config space not readable for " + joined(unknown), "run as root on the host itself");
  }
  if (with == 0) return pass(name, "no NIC physical function to give VFs of");
  return pass(name, counted(with, "NIC physical function") + " with the ATS capability");
}

Check read_request(const numa::HostModel& host) {
  const std::string name = "max read request";
  std::vector<std::string> low;
  int known = 0;
  int smallest = 0;
  int largest = 0;
  for (const auto& function : host.pci_devices) {
    const bool counted =
        function.role == numa::PciRole::gpu || (function.role == numa::PciRole::nic && !function.physfn);
    if (!counted || !function.max_read_request_bytes || function.host_use) continue;
    const int bytes = *function.max_read_request_bytes;
    smallest = known == 0 ? bytes : std::min(smallest, bytes);
    largest = std::max(largest, bytes);
    ++known;
    if (bytes < kLowReadRequest) low.push_back(function.address.to_string() + " " + std::to_string(bytes) + " bytes");
  }
  if (known == 0) {
    return warn(name, "no GPU or NIC with a readable PCI Express capability", "run as root on the host itself");
  }
  if (!low.empty()) {
    return warn(name, joined(low) + ": below 256 bytes, reads are split into many small requests",
                "raise Max_Read_Request_Size in the firmware's PCIe settings to 512 bytes or more");
  }
  const std::string range =
      smallest == largest ? std::to_string(smallest) : std::to_string(smallest) + " to " + std::to_string(largest);
  return pass(name, counted(known, "GPU or NIC", "GPUs and NICs") + ": " + range + " bytes");
}

std::string version_text(const StackVersion& v) {
  return std::to_string(v[0]) + "." + std::to_string(v[1]) + "." + std::to_string(v[2]);
}

// The libvirt and QEMU the host runs against the oldest hostagent runs on.
std::optional<Check> stack(const HostFacts& facts) {
  if (!facts.stack) return std::nullopt;
  const std::string name = "libvirt and qemu";
  const auto& s = *facts.stack;
  if (!s.unreachable.empty()) {
    return warn(
        name, "libvirtd did not answer: " + s.unreachable,
        "start libvirtd (libvirtd.service or virtqemud.socket); a template's needs are held against its versions");
  }
  const std::string found = "libvirt " + version_text(s.libvirt) + ", QEMU " + version_text(s.qemu);
  if (s.libvirt < kOldestLibvirt || s.qemu < kOldestQemu) {
    return fail(name,
                found + ": older than hostagent runs on (libvirt " + version_text(kOldestLibvirt) + ", QEMU " +
                    version_text(kOldestQemu) + ")",
                "libvirt 9.0 and QEMU 7.2 or later (Debian 12's own; bookworm-backports has libvirt 11 and QEMU 10)");
  }
  return pass(name, found);
}

std::string placed(const numa::Placement& placement, const vmtemplates::VmTemplate& shape) {
  std::string nodes;
  uint64_t pages = 0;
  for (const auto& cell : placement.cells) {
    nodes += (nodes.empty() ? "" : ",") + std::to_string(cell.host_node);
    pages += cell.hugepages;
  }
  return "fits this host when nothing else runs: " + counted(shape.vcpus, "vCPU") + " on node " + nodes + ", " +
         counted(static_cast<int>(placement.gpus.size()), "GPU") + ", " + counted(static_cast<int>(pages), "page") +
         " of " + text::binary_size(shape.hugepage_size_bytes);
}

// A template's fit, and what the running QEMU lacks of what it asks for: a VM of several cells
// starts faster on a QEMU that zeroes them at once.
Check fits(const HostFacts& facts, const numa::HostModel& host, const vmtemplates::VmTemplate& shape,
           const CheckOptions& options) {
  const std::string name = "template " + shape.name;
  const auto placement = numa::place(host, {}, options.policy, vmtemplates::placement_request(shape));
  if (placement.ok()) {
    const auto cells = placement->cells.size();
    if (facts.stack && facts.stack->unreachable.empty() && cells > 1 && facts.stack->qemu < kQemuParallelCells) {
      return warn(name,
                  placed(*placement, shape) + "; QEMU " + version_text(facts.stack->qemu) + " zeroes its " +
                      std::to_string(cells) + " cells' memory one after another (" + version_text(kQemuParallelCells) +
                      " and later: at once)",
                  "QEMU 9.0 or later (Debian 12: bookworm-backports' QEMU 10) to start it faster");
    }
    return pass(name, placed(*placement, shape));
  }
  return fail(name, "never fits this host: " + placement.error().message,
              "give the host what the message names (hugepages: host.hugepages or the kernel command line), or do "
              "not offer this template on it");
}

}  // namespace

std::string_view to_string(Verdict verdict) noexcept {
  switch (verdict) {
    case Verdict::pass:
      return "pass";
    case Verdict::warn:
      return "warn";
    case Verdict::fail:
      return "fail";
  }
  return "fail";
}

std::vector<Check> check_host(const HostFacts& facts, const numa::HostModel& host,
                              const std::vector<vmtemplates::VmTemplate>& templates, const CheckOptions& options) {
  const auto cmdline = words(facts.cmdline);
  std::vector<Check> checks = {iommu(facts, cmdline),
                               passthrough(facts, cmdline),
                               kernel(facts),
                               vfio_pci(facts),
                               memlock(facts),
                               gigantic_pages(cmdline, host, templates),
                               nic_ats(host, templates),
                               read_request(host)};
  if (auto versions = stack(facts)) checks.push_back(std::move(*versions));
  std::vector<const vmtemplates::VmTemplate*> offered;
  for (const auto& shape : templates) {
    if (!shape.abstract) offered.push_back(&shape);
  }
  std::sort(offered.begin(), offered.end(), [](const auto* a, const auto* b) { return a->name < b->name; });
  for (const auto* shape : offered) checks.push_back(fits(facts, host, *shape, options));
  return checks;
}

}  // namespace hostagent::hostcheck
