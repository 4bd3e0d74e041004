// simhost/system_writer: /sys/devices/system/{cpu,node}, /sys/kernel/mm/hugepages, /proc/cpuinfo,
// /proc/meminfo and the DMI product name: everything hwloc's Linux backend reads to build the CPU
// and NUMA part of a topology; and the kernel's command line, release and IOMMU units, which
// hostcheck reads.
#include <algorithm>
#include <cstdio>
#include <set>
#include <string>

#include "kernel_format.hpp"
#include "writers.hpp"

namespace hostagent::simhost::detail {
namespace {

const std::string kCpuDir = "/sys/devices/system/cpu";
const std::string kNodeDir = "/sys/devices/system/node";
constexpr uint64_t k2M = 2ull << 20;
constexpr uint64_t k1G = 1ull << 30;

uint64_t kib(uint64_t bytes) {
  return bytes / 1024;
}

std::pair<uint64_t, uint64_t> hugepages_of(const SimNumaNode& node, uint64_t size) {
  const auto found = node.hugepages.find(size);
  return found == node.hugepages.end() ? std::pair<uint64_t, uint64_t>{0, 0} : found->second;
}

// x86 always offers 2 MiB and, with pdpe1gb, 1 GiB pages; a spec may add others.
std::set<uint64_t> hugepage_sizes(const HostSpec& spec) {
  std::set<uint64_t> sizes{k2M, k1G};
  for (const auto& node : spec.nodes) {
    for (const auto& entry : node.hugepages) sizes.insert(entry.first);
  }
  return sizes;
}

std::string hugepage_dir_name(uint64_t size) {
  return "hugepages-" + std::to_string(kib(size)) + "kB";
}

void write_cpu(TreeWriter& w, const CpuLayout& layout, const CpuSlot& cpu, const HostSpec& spec) {
  const int nr = static_cast<int>(layout.cpus.size());
  const std::string dir = kCpuDir + "/cpu" + std::to_string(cpu.id);
  // x86 cannot offline the boot CPU, so the kernel gives cpu0 no `online` attribute.
  if (cpu.id != 0) w.file(dir + "/online", "1\n");
  const std::string topo = dir + "/topology";
  const auto core = layout.core_cpus(cpu);
  const auto package = layout.package_cpus(cpu.package);
  w.file(topo + "/core_id", decimal_attr(cpu.core_id));
  w.file(topo + "/physical_package_id", decimal_attr(cpu.package));
  w.file(topo + "/die_id", "0\n");
  for (const char* name : {"thread_siblings", "core_cpus"}) {
    w.file(topo + "/" + name, cpumask(core, nr));
    w.file(topo + "/" + name + "_list", cpulist_attr(core));
  }
  for (const char* name : {"core_siblings", "package_cpus", "die_cpus"}) {
    w.file(topo + "/" + name, cpumask(package, nr));
    w.file(topo + "/" + name + "_list", cpulist_attr(package));
  }
  const int node_id = spec.nodes[static_cast<std::size_t>(cpu.node_index)].id;
  w.link(dir + "/node" + std::to_string(node_id), kNodeDir + "/node" + std::to_string(node_id));
}

void write_cpus(TreeWriter& w, const HostSpec& spec, const CpuLayout& layout) {
  const std::string all = cpulist_attr(layout.all_cpus());
  w.file(kCpuDir + "/online", all);
  w.file(kCpuDir + "/possible", all);
  w.file(kCpuDir + "/present", all);
  w.file(kCpuDir + "/offline", "\n");
  w.file(kCpuDir + "/kernel_max", "8191\n");
  for (const auto& cpu : layout.cpus) write_cpu(w, layout, cpu, spec);
}

std::string distance_attr(const SimNumaNode& node, std::size_t index, std::size_t count) {
  std::string out;
  for (std::size_t j = 0; j < count; ++j) {
    const int d = j < node.distances.size() ? node.distances[j] : (j == index ? 10 : 20);
    out += (j == 0 ? "" : " ") + std::to_string(d);
  }
  return out + "\n";
}

// drivers/base/node.c node_read_meminfo: "Node %d MemTotal:       %8lu kB"; the hugetlb lines
// (mm/hugetlb.c hugetlb_report_node_meminfo) count default-size (2 MiB) pages.
std::string node_meminfo(const SimNumaNode& node) {
  std::string out;
  char line[96];
  const auto kb_line = [&](const char* label, uint64_t value) {
    std::snprintf(line, sizeof(line), "Node %d %-16s%8llu kB\n", node.id, label,
                  static_cast<unsigned long long>(value));
    out += line;
  };
  const auto count_line = [&](const char* label, uint64_t value) {
    std::snprintf(line, sizeof(line), "Node %d %-17s%5llu\n", node.id, label, static_cast<unsigned long long>(value));
    out += line;
  };
  const uint64_t total = kib(node.memory_bytes);
  const uint64_t free = kib(node.memory_free_bytes);
  kb_line("MemTotal:", total);
  kb_line("MemFree:", free);
  kb_line("MemUsed:", total > free ? total - free : 0);
  for (const char* zero :
       {"SwapCached:", "Active:", "Inactive:", "Unevictable:", "Mlocked:", "Dirty:", "Writeback:", "FilePages:",
        "Mapped:", "AnonPages:", "Shmem:", "KernelStack:", "PageTables:", "Slab:", "SReclaimable:", "SUnreclaim:"}) {
    kb_line(zero, 0);
  }
  const auto pages = hugepages_of(node, k2M);
  count_line("HugePages_Total:", pages.first);
  count_line("HugePages_Free:", pages.second);
  count_line("HugePages_Surp:", 0);
  return out;
}

void write_hugepage_counts(TreeWriter& w, const std::string& dir, std::pair<uint64_t, uint64_t> pages, bool global) {
  w.file(dir + "/nr_hugepages", decimal_attr(static_cast<int64_t>(pages.first)));
  w.file(dir + "/free_hugepages", decimal_attr(static_cast<int64_t>(pages.second)));
  w.file(dir + "/surplus_hugepages", "0\n");
  if (global) {
    w.file(dir + "/resv_hugepages", "0\n");
    w.file(dir + "/nr_overcommit_hugepages", "0\n");
  }
}

void write_node(TreeWriter& w, const HostSpec& spec, const CpuLayout& layout, std::size_t index) {
  const auto& node = spec.nodes[index];
  const std::string dir = kNodeDir + "/node" + std::to_string(node.id);
  const auto& cpus = layout.node_cpus[index];
  w.file(dir + "/cpulist", cpulist_attr(cpus));
  w.file(dir + "/cpumap", cpumask(cpus, static_cast<int>(layout.cpus.size())));
  w.file(dir + "/distance", distance_attr(node, index, spec.nodes.size()));
  w.file(dir + "/meminfo", node_meminfo(node));
  for (const uint64_t size : hugepage_sizes(spec)) {
    write_hugepage_counts(w, dir + "/hugepages/" + hugepage_dir_name(size), hugepages_of(node, size), false);
  }
  for (const int cpu : cpus) {
    w.link(dir + "/cpu" + std::to_string(cpu), kCpuDir + "/cpu" + std::to_string(cpu));
  }
}

void write_nodes(TreeWriter& w, const HostSpec& spec, const CpuLayout& layout) {
  std::vector<int> all, with_cpu, with_memory;
  for (const auto& node : spec.nodes) {
    all.push_back(node.id);
    if (node.cores > 0) with_cpu.push_back(node.id);
    if (node.memory_bytes > 0) with_memory.push_back(node.id);
  }
  std::sort(all.begin(), all.end());
  w.file(kNodeDir + "/online", cpulist_attr(all));
  w.file(kNodeDir + "/possible", cpulist_attr(all));
  w.file(kNodeDir + "/has_cpu", cpulist_attr(with_cpu));
  w.file(kNodeDir + "/has_normal_memory", cpulist_attr(with_memory));
  w.file(kNodeDir + "/has_memory", cpulist_attr(with_memory));
  for (std::size_t i = 0; i < spec.nodes.size(); ++i) write_node(w, spec, layout, i);
}

void write_global_hugepages(TreeWriter& w, const HostSpec& spec) {
  for (const uint64_t size : hugepage_sizes(spec)) {
    std::pair<uint64_t, uint64_t> sum{0, 0};
    for (const auto& node : spec.nodes) {
      sum.first += hugepages_of(node, size).first;
      sum.second += hugepages_of(node, size).second;
    }
    write_hugepage_counts(w, "/sys/kernel/mm/hugepages/" + hugepage_dir_name(size), sum, true);
  }
}

// fs/proc/meminfo.c: labels padded to 16 columns, values "%8lu kB"; the HugePages_ counts describe
// the default (2 MiB) size, Hugetlb all sizes together.
std::string proc_meminfo(const HostSpec& spec) {
  uint64_t total = 0, free = 0, hugetlb = 0;
  for (const auto& node : spec.nodes) {
    total += node.memory_bytes;
    free += node.memory_free_bytes;
    for (const auto& [size, pages] : node.hugepages) hugetlb += size * pages.first;
  }
  std::pair<uint64_t, uint64_t> small{0, 0};
  for (const auto& node : spec.nodes) {
    small.first += hugepages_of(node, k2M).first;
    small.second += hugepages_of(node, k2M).second;
  }
  std::string out;
  char line[96];
  const auto kb_line = [&](const char* label, uint64_t bytes) {
    std::snprintf(line, sizeof(line), "%-16s%8llu kB\n", label, static_cast<unsigned long long>(kib(bytes)));
    out += line;
  };
  const auto count_line = [&](const char* label, uint64_t value) {
    std::snprintf(line, sizeof(line), "%-19s%5llu\n", label, static_cast<unsigned long long>(value));
    out += line;
  };
  kb_line("MemTotal:", total);
  kb_line("MemFree:", free);
  kb_line("MemAvailable:", free);
  for (const char* zero : {"Buffers:", "Cached:", "SwapCached:", "Active:", "Inactive:", "SwapTotal:", "SwapFree:",
                           "Dirty:", "AnonPages:", "Mapped:", "Shmem:", "Slab:", "PageTables:"}) {
    kb_line(zero, 0);
  }
  count_line("HugePages_Total:", small.first);
  count_line("HugePages_Free:", small.second);
  count_line("HugePages_Rsvd:", 0);
  count_line("HugePages_Surp:", 0);
  kb_line("Hugepagesize:", k2M);
  kb_line("Hugetlb:", hugetlb);
  return out;
}

// arch/x86/kernel/cpu/proc.c show_cpuinfo, trimmed to what readers use. The model is generic on
// purpose: nothing in hostagent should depend on a CPU model name.
std::string proc_cpuinfo(const HostSpec& spec, const CpuLayout& layout) {
  std::string out;
  char block[1024];
  for (const auto& cpu : layout.cpus) {
    const auto& node = spec.nodes[static_cast<std::size_t>(cpu.node_index)];
    const int package_threads = static_cast<int>(layout.package_cpus(cpu.package).size());
    const int package_cores = package_threads / std::max(node.threads_per_core, 1);
    const int apicid = cpu.package * 256 + cpu.core_id * 2 + cpu.thread;
    std::snprintf(block, sizeof(block),
                  "processor\t: %d\nvendor_id\t: GenuineIntel\ncpu family\t: 6\nmodel\t\t: 106\n"
                  "model name\t: Intel(R) Xeon(R) CPU @ 2.40GHz\nstepping\t: 6\n"
                  "cpu MHz\t\t: 2400.000\ncache size\t: 36864 KB\nphysical id\t: %d\n"
                  "siblings\t: %d\ncore id\t\t: %d\ncpu cores\t: %d\napicid\t\t: %d\n"
                  "initial apicid\t: %d\nfpu\t\t: yes\nfpu_exception\t: yes\ncpuid level\t: 27\n"
                  "wp\t\t: yes\nflags\t\t: fpu vme de pse tsc msr pae mce cx8 apic sep mtrr pge mca "
                  "cmov pat pse36 clflush mmx fxsr sse sse2 ss ht syscall nx pdpe1gb rdtscp lm "
                  "constant_tsc nopl xtopology pni pclmulqdq vmx ssse3 fma cx16 pcid sse4_1 sse4_2 "
                  "x2apic movbe popcnt aes xsave avx f16c rdrand avx2 avx512f\n"
                  "bogomips\t: 4800.00\nclflush size\t: 64\ncache_alignment\t: 64\n"
                  "address sizes\t: 46 bits physical, 57 bits virtual\npower management:\n\n",
                  cpu.id, cpu.package, package_threads, cpu.core_id, package_cores, apicid, apicid);
    out += block;
  }
  return out;
}

// A GPU host prepared as docs/operations.md says: Debian 12's kernel booted with the IOMMU on, in
// passthrough for the host's own devices, and its 1 GiB pages reserved per node on the command line
// (hugepages=0:N,1:M, Linux 5.16+), as many as the nodes' pools hold. hostcheck reads these.
std::string kernel_cmdline(const HostSpec& spec) {
  std::string cmdline = "BOOT_IMAGE=/boot/vmlinuz-6.1.0-57-amd64 root=/dev/mapper/vg0-root ro intel_iommu=on iommu=pt";
  std::string gigantic;
  for (const auto& node : spec.nodes) {
    const auto pages = hugepages_of(node, 1ULL << 30).first;
    if (pages > 0) gigantic += (gigantic.empty() ? "" : ",") + std::to_string(node.id) + ":" + std::to_string(pages);
  }
  if (!gigantic.empty()) cmdline += " hugepagesz=1G hugepages=" + gigantic;
  return cmdline + "\n";
}

// One Intel IOMMU (DMAR unit) per node's root complexes, as drivers/iommu/intel/dmar.c registers
// them: /sys/class/iommu/dmarN links to the virtual device.
void write_kernel(TreeWriter& w, const HostSpec& spec) {
  w.file("/proc/cmdline", kernel_cmdline(spec));
  w.file("/proc/sys/kernel/osrelease", "6.1.0-57-amd64\n");
  for (std::size_t unit = 0; unit < spec.nodes.size(); ++unit) {
    const std::string device = "/sys/devices/virtual/iommu/dmar" + std::to_string(unit);
    w.file(device + "/intel-iommu/version", "1:0\n");
    w.link("/sys/class/iommu/dmar" + std::to_string(unit), device);
  }
}

}  // namespace

void write_system(TreeWriter& w, const HostSpec& spec, const CpuLayout& cpus) {
  write_kernel(w, spec);
  write_cpus(w, spec, cpus);
  write_nodes(w, spec, cpus);
  write_global_hugepages(w, spec);
  w.file("/proc/meminfo", proc_meminfo(spec));
  w.file("/proc/cpuinfo", proc_cpuinfo(spec, cpus));
  w.file("/sys/class/dmi/id/sys_vendor", "simhost\n");
  w.file("/sys/class/dmi/id/product_name", spec.name + "\n");
}

}  // namespace hostagent::simhost::detail
