// simhost: synthetic GPU hosts written out as sysfs/procfs trees. Tests, benchmarks and the embedded
// default (a daemon that runs on any machine) discover these trees exactly as they would discover a
// real host. The trees are meant to fool the real tools too: config space carries real capability
// chains, so `lspci -A linux-sysfs -O sysfs.path=ROOT/sys/bus/pci` and `lstopo -i ROOT` decode them.
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "hostagent/common/result.hpp"

namespace hostagent::simhost {

struct SimNumaNode {
  int id = 0;
  int cores = 0;             // physical cores; 0 makes a CPU-less node
  int threads_per_core = 2;  // SMT siblings per core
  int package = 0;
  uint64_t memory_bytes = 0;
  uint64_t memory_free_bytes = 0;
  // page size in bytes -> {total, free}
  std::map<uint64_t, std::pair<uint64_t, uint64_t>> hugepages;
  std::vector<int> distances;  // one per node, in node order
};

enum class SimPortType { endpoint, root_port, upstream, downstream };

struct SimBar {
  int index = 0;
  uint64_t size_bytes = 0;
  bool is_64bit = true;
  bool prefetchable = true;
};

struct SimFunction {
  std::string address;  // "0000:1b:00.0"
  std::string parent;   // bridge above it; "" for a device on a host bridge's root bus
  uint16_t vendor = 0;
  uint16_t device = 0;
  uint16_t subsystem_vendor = 0;
  uint16_t subsystem_device = 0;
  uint32_t class_code = 0;  // 24-bit
  uint8_t revision = 0;
  SimPortType port_type = SimPortType::endpoint;
  int numa_node = -1;  // as the kernel writes it in numa_node; -1 is legal
  std::optional<int> iommu_group;
  std::string driver;    // "" = unbound
  int link_cap_gen = 4;  // 1..6 -> 2.5, 5, 8, 16, 32, 64 GT/s
  int link_cap_width = 16;
  int link_sta_gen = 4;
  int link_sta_width = 16;
  std::vector<SimBar> bars;
  bool acs = false;  // ACS extended capability (ports)
  uint16_t acs_control = 0;
  bool ats = false;  // ATS extended capability (endpoints)
  bool ats_enabled = false;
  // SR-IOV (PF): capability with TotalVFs/NumVFs; the VFs themselves are separate SimFunctions
  // whose physfn names this PF.
  int sriov_total_vfs = 0;
  int sriov_num_vfs = 0;
  uint16_t sriov_vf_device = 0;
  // VF n has routing ID PF + offset + n * stride (PCIe Base Spec 6.0 §9.3.3.10-11).
  int sriov_vf_offset = 1;
  int sriov_vf_stride = 1;
  // The BARs of one VF as the PF's SR-IOV capability declares them (§9.3.3.14). A VF's own `bars`
  // are ignored: on hardware its BAR registers read zero and the PF's VF BARs place it.
  std::vector<SimBar> sriov_vf_bars;
  std::string physfn;  // on a VF: the PF's address
  std::vector<std::string> net_interfaces;
  std::vector<std::string> rdma_devices;
};

// A filesystem the host mounted from one of its own disks. NVMe functions bound to nvme are the
// disks: controller N is the Nth in address order, its namespace nvme<N>n1, and each partition a
// mount or swap names (nvme0n1p2) is written under it.
struct SimMount {
  std::string device;  // "nvme0n1p2", or the whole namespace "nvme1n1"
  std::string mount_point;
  std::string fstype = "ext4";
};

struct HostSpec {
  std::string name;
  std::string description;
  std::vector<SimNumaNode> nodes;
  std::vector<SimFunction> functions;  // parents before children
  // What the host itself uses, as /proc shows it: mounts (/proc/self/mountinfo), swap partitions
  // (/proc/swaps), and the interface of the default route (/proc/net/route, with its subnet).
  std::vector<SimMount> mounts;
  std::vector<std::string> swaps;  // "nvme0n1p3"
  std::string default_route;       // an interface of some function; "" for none
};

// The built-in hosts: "vela1", "vela2", "workstation", "quirks". See sim_host.cpp for each layout.
std::vector<std::string> builtin_host_names();
Result<HostSpec> builtin_host(const std::string& name);

// Writes the tree under root (created if missing, must be empty). Fails on an inconsistent spec
// (a parent that does not exist, a VF without its PF) with a message naming the function.
Status write_sysfs_tree(const HostSpec& spec, const std::filesystem::path& root);

// What write_sysfs_tree would write for spec, as a SHA-256 (64 hex digits): any change to the spec
// or to the writers changes it. Nothing is written.
Result<std::string> tree_digest(const HostSpec& spec);

// The tree under root as write_sysfs_tree writes it, kept when root already holds it (the name and
// digest it was written with, in root/.simhost-tree): a simulated host's kernel state (a pool
// raised, a link retrained) outlives a daemon restart, as a real host's does. Anything else at
// root is removed first. True when it wrote the tree.
Result<bool> ensure_sysfs_tree(const HostSpec& spec, const std::filesystem::path& root);

}  // namespace hostagent::simhost
