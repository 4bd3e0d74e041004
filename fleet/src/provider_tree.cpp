// fleet/provider_tree: root, NUMA nodes, GPUs; each device counted on one provider.
#include "hostagent/fleet/provider_tree.hpp"

#include <algorithm>
#include <cstdio>

#include "hostagent/common/sha256.hpp"

namespace hostagent::fleet {
namespace {

constexpr int64_t kMiB = 1LL << 20;

std::string hex4(uint16_t value) {
  char text[5];
  std::snprintf(text, sizeof text, "%04X", value);
  return text;
}

// The pools Placement sees, by page size: 1 GiB pages are the VMs' memory (MEMORY_MB), 2 MiB pages
// the small test shapes'. Another size is not published.
const char* memory_class(uint64_t page_size_bytes) {
  if (page_size_bytes == (1ULL << 30)) return kMemory1G;
  if (page_size_bytes == (2ULL << 20)) return kMemory2M;
  return nullptr;
}

class TreeBuilder {
 public:
  explicit TreeBuilder(const TreeInput& input)
      : in_(input), housekeeping_(input.housekeeping_cpus.begin(), input.housekeeping_cpus.end()) {
    for (const auto& [vm, uuid] : in_.managed) managed_.insert(vm);
  }

  ProviderTree build() {
    add_root();
    for (const auto& node : in_.capacity->nodes) add_node(node);
    assign_devices();
    count_devices();
    count_managed();
    for (auto& provider : tree_.providers) drop_empty(provider);
    drop_zero(tree_.host_holds);
    return std::move(tree_);
  }

 private:
  Provider& add(const std::string& element, const std::string& name, const std::string& parent) {
    Provider provider;
    provider.uuid = provider_uuid(in_.host_name, element);
    provider.name = name;
    provider.parent_uuid = parent;
    tree_.providers.push_back(std::move(provider));
    index_[tree_.providers.back().uuid] = tree_.providers.size() - 1;
    return tree_.providers.back();
  }
  Provider& at(const std::string& uuid) { return tree_.providers[index_.at(uuid)]; }

  void add_root() {
    Provider& root = add("root", in_.host_name, "");
    root.traits.insert(kHostTrait);
    if (in_.in_maintenance) root.traits.insert(kMaintenanceTrait);
  }

  // VCPU: the node's CPUs placement may pin (online, not housekeeping). Those a foreign domain
  // holds are the host's; a managed VM's are its allocation. Memory likewise, per hugepage pool;
  // pages gone from the pool outside hostagent are the host's too.
  void add_node(const numa::NodeCapacity& node) {
    const std::string root = tree_.root_uuid();
    Provider& provider =
        add("numa" + std::to_string(node.node), in_.host_name + "_numa" + std::to_string(node.node), root);
    provider.traits.insert(kNumaTrait);
    tree_.node_provider[node.node] = provider.uuid;
    const int64_t cpus = node.cpus.free + node.cpus.held;
    provider.inventories[kVcpu] = {cpus, 0, cpus, 1};
    for (const auto& pool : node.hugepages) {
      const char* rc = memory_class(pool.page_size_bytes);
      if (rc == nullptr) continue;
      const auto page_mib = static_cast<int64_t>(pool.page_size_bytes / kMiB);
      const auto total = static_cast<int64_t>(pool.total) * page_mib;
      // Free as placement counts it; the managed VMs' pages move to their allocations below.
      provider.inventories[rc] = {total, 0, total, page_mib};
      tree_.host_holds[provider.uuid][rc] = total - static_cast<int64_t>(pool.free) * page_mib;
    }
  }

  const std::string& node_or_root(int node) const {
    const auto it = tree_.node_provider.find(node);
    return it == tree_.node_provider.end() ? tree_.providers.front().uuid : it->second;
  }

  // GPUs get a provider each, under their node. A VF counts on a GPU under the same nearest switch
  // (the VFs of a switch dealt out in address order), as placement pairs them with `strict`;
  // other VFs, NVMe and whole NICs count on their node.
  void assign_devices() {
    int slot = 0;
    std::map<PciAddress, std::vector<std::string>> gpus_by_switch;
    for (const auto& device : in_.capacity->devices) {
      if (device.kind != numa::DeviceKind::gpu) continue;
      const numa::PciFunction* f = in_.host->find(device.address);
      const std::string address = device.address.to_string();
      Provider& gpu = add("gpu/" + address, in_.host_name + "_gpu_" + address, node_or_root(device.node));
      gpu.inventories[kGpu] = {1, 0, 1, 1};
      gpu.traits.insert(slot_trait(slot++));
      if (f != nullptr) gpu.traits.insert(model_trait(f->vendor_id, f->device_id));
      if (f != nullptr && f->pcie_switch) {
        gpu.traits.insert(kSwitchTrait);
        gpus_by_switch[*f->pcie_switch].push_back(gpu.uuid);
      }
      tree_.devices[device.address] = {gpu.uuid, kGpu};
    }
    std::map<PciAddress, std::size_t> dealt;
    for (const auto& device : in_.capacity->devices) {
      if (device.kind == numa::DeviceKind::gpu) continue;
      const numa::PciFunction* f = in_.host->find(device.address);
      std::string provider = node_or_root(device.node);
      if (device.kind == numa::DeviceKind::vf && f != nullptr && f->pcie_switch) {
        const auto gpus = gpus_by_switch.find(*f->pcie_switch);
        if (gpus != gpus_by_switch.end()) {
          provider = gpus->second[dealt[*f->pcie_switch]++ % gpus->second.size()];
          if (rdma_capable(*f)) at(provider).traits.insert(kRdmaTrait);
        }
      }
      tree_.devices[device.address] = {provider, device_class(device.kind)};
    }
  }

  bool rdma_capable(const numa::PciFunction& vf) const {
    const numa::PciFunction* pf = vf.physfn ? in_.host->find(*vf.physfn) : nullptr;
    return !vf.rdma_devices.empty() || (pf != nullptr && !pf->rdma_devices.empty());
  }

  static const char* device_class(numa::DeviceKind kind) {
    switch (kind) {
      case numa::DeviceKind::gpu:
        return kGpu;
      case numa::DeviceKind::vf:
        return kVf;
      case numa::DeviceKind::nvme:
        return kNvme;
      case numa::DeviceKind::whole_nic:
        return kWholeNic;
    }
    return kGpu;
  }

  // Totals, and the host's holding of what is neither free nor a managed VM's.
  void count_devices() {
    for (const auto& device : in_.capacity->devices) {
      const DeviceCount& count = tree_.devices.at(device.address);
      Provider& provider = at(count.provider);
      const std::string& rc = count.resource_class;
      if (device.kind != numa::DeviceKind::gpu) {
        auto& record = provider.inventories[rc];
        ++record.total;
        record.max_unit = record.total;
      }
      const bool managed = device.use == numa::DeviceUse::held && managed_.count(device.holder) != 0;
      if (device.use != numa::DeviceUse::free && !managed) ++tree_.host_holds[provider.uuid][rc];
    }
  }

  // Each managed VM's holdings as its allocation; CPUs held by a foreign domain are the host's.
  void count_managed() {
    std::map<int, int> node_of_cpu;
    for (const auto& node : in_.host->numa_nodes) {
      for (const int cpu : node.cpus) node_of_cpu[cpu] = node.id;
    }
    for (const auto& allocation : *in_.held) {
      const bool managed = managed_.count(allocation.vm) != 0;
      ProviderResources usage;
      for (const int cpu : allocation.cpus) {
        const auto node = node_of_cpu.find(cpu);
        if (housekeeping_.count(cpu) != 0 || node == node_of_cpu.end()) continue;
        const auto provider = tree_.node_provider.find(node->second);
        if (provider == tree_.node_provider.end()) continue;
        if (managed) {
          ++usage[provider->second][kVcpu];
        } else {
          ++tree_.host_holds[provider->second][kVcpu];
        }
      }
      if (!managed) continue;
      for (const auto& device : allocation.devices) {
        const auto count = tree_.devices.find(device);  // companions and NVSwitches count nowhere
        if (count != tree_.devices.end()) ++usage[count->second.provider][count->second.resource_class];
      }
      add_pages(allocation, usage);
      tree_.allocations[in_.managed.at(allocation.vm)] = std::move(usage);
    }
  }

  // A managed VM's pages: its allocation, taken back out of what add_node gave the host.
  void add_pages(const numa::Allocation& allocation, ProviderResources& usage) {
    const char* rc = memory_class(allocation.hugepage_size_bytes);
    if (rc == nullptr) return;
    const auto page_mib = static_cast<int64_t>(allocation.hugepage_size_bytes / kMiB);
    for (const auto& [node, pages] : allocation.hugepages) {
      const auto provider = tree_.node_provider.find(node);
      if (provider == tree_.node_provider.end() || pages == 0) continue;
      const auto mib = static_cast<int64_t>(pages) * page_mib;
      usage[provider->second][rc] += mib;
      auto& host = tree_.host_holds[provider->second][rc];
      host = std::max<int64_t>(0, host - mib);
    }
  }

  // Placement refuses an amount below 1 in an allocation: nothing of a class is no entry.
  static void drop_zero(ProviderResources& resources) {
    for (auto it = resources.begin(); it != resources.end();) {
      std::erase_if(it->second, [](const auto& entry) { return entry.second < 1; });
      it = it->second.empty() ? resources.erase(it) : std::next(it);
    }
  }

  // Placement refuses a total below 1: a class with none is left out.
  static void drop_empty(Provider& provider) {
    for (auto it = provider.inventories.begin(); it != provider.inventories.end();) {
      it = it->second.total < 1 ? provider.inventories.erase(it) : std::next(it);
    }
  }

  const TreeInput& in_;
  std::set<int> housekeeping_;
  std::set<std::string> managed_;
  ProviderTree tree_;
  std::map<std::string, std::size_t> index_;
};

}  // namespace

bool is_placement_name(std::string_view text) {
  return !text.empty() && text.size() <= 255 && std::all_of(text.begin(), text.end(), [](char c) {
    return (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_';
  });
}

bool is_managed_trait(std::string_view trait) {
  return trait == kHostTrait || trait.starts_with("CUSTOM_HOSTAGENT_") || trait.starts_with("CUSTOM_PCI_") ||
         trait == kNumaTrait;
}

std::set<std::string> merged_traits(const std::set<std::string>& current, const std::set<std::string>& wanted) {
  std::set<std::string> out = wanted;
  for (const auto& trait : current) {
    if (!is_managed_trait(trait)) out.insert(trait);
  }
  const bool marked = current.count(kMaintenanceTrait) != 0;
  if (wanted.count(kMaintenanceTrait) != 0) {
    if (current.count(kDisabledTrait) != 0 && !marked) {
      out.erase(kMaintenanceTrait);
    } else {
      out.insert(kDisabledTrait);
    }
  } else if (marked) {
    out.erase(kDisabledTrait);
  }
  return out;
}

std::map<std::string, InventoryRecord> merged_inventories(const std::map<std::string, InventoryRecord>& current,
                                                          const std::map<std::string, InventoryRecord>& wanted) {
  auto out = wanted;
  for (auto& [rc, record] : out) {
    const auto now = current.find(rc);
    if (now != current.end()) record.reserved = std::min(now->second.reserved, record.total);
  }
  return out;
}

std::string model_trait(uint16_t vendor_id, uint16_t device_id) {
  return "CUSTOM_PCI_" + hex4(vendor_id) + "_" + hex4(device_id);
}

std::string slot_trait(int slot) {
  return "CUSTOM_HOSTAGENT_SLOT_" + std::to_string(slot);
}

const Provider* ProviderTree::find(const std::string& uuid) const {
  const auto it = std::find_if(providers.begin(), providers.end(), [&](const Provider& p) { return p.uuid == uuid; });
  return it == providers.end() ? nullptr : &*it;
}

std::string provider_uuid(const std::string& host_name, const std::string& element) {
  std::string hex = sha256_hex("hostagent-placement\n" + host_name + "\n" + element).substr(0, 32);
  hex[12] = '8';  // version 8
  static constexpr const char* kVariant = "89ab";
  hex[16] = kVariant[std::stoi(hex.substr(16, 1), nullptr, 16) & 3];  // variant 10xx
  return hex.substr(0, 8) + "-" + hex.substr(8, 4) + "-" + hex.substr(12, 4) + "-" + hex.substr(16, 4) + "-" +
         hex.substr(20);
}

std::string host_consumer_uuid(const std::string& host_name) {
  return provider_uuid(host_name, "consumer/host");
}

ProviderTree provider_tree(const TreeInput& input) {
  HA_ASSERT(input.host != nullptr && input.capacity != nullptr && input.held != nullptr);
  return TreeBuilder(input).build();
}

Result<ClaimLimits> claim_limits(const ProviderTree& tree, const numa::Capacity& capacity,
                                 const ProviderResources& claim) {
  const auto refuse = [](const std::string& why) {
    return Error{ErrorCode::invalid_argument,
                 why + "; send the allocations Placement granted for this host, as `hostagentctl fleet create` does",
                 "placement.allocations"};
  };
  std::map<std::pair<std::string, std::string>, int64_t> wanted;
  for (const auto& [uuid, resources] : claim) {
    const Provider* provider = tree.find(uuid);
    if (provider == nullptr) return refuse("resource provider " + uuid + " is not one of this host's");
    for (const auto& [rc, amount] : resources) {
      if (provider->inventories.count(rc) == 0) return refuse("resource provider " + provider->name + " has no " + rc);
      if (amount < 1) return refuse(rc + " on " + provider->name + " is " + std::to_string(amount) + ", below 1");
      wanted[{uuid, rc}] = amount;
    }
  }
  ClaimLimits limits;
  for (const auto& device : capacity.devices) {  // address order within each kind
    if (device.use != numa::DeviceUse::free) continue;
    const auto count = tree.devices.find(device.address);
    if (count == tree.devices.end()) continue;
    const auto it = wanted.find({count->second.provider, count->second.resource_class});
    if (it == wanted.end() || it->second == 0) continue;
    --it->second;
    limits.devices.insert(device.address);
  }
  for (const auto& [key, left] : wanted) {
    const bool device_class = key.second == kGpu || key.second == kVf || key.second == kNvme || key.second == kWholeNic;
    if (device_class && left > 0) {
      return Error{ErrorCode::conflict,
                   "the claim takes " + std::to_string(left) + " " + key.second + " more on " +
                       tree.find(key.first)->name +
                       " than the host has free: Placement is "
                       "behind the host; claim again once the host's sync has caught up",
                   "placement.allocations"};
    }
  }
  for (const auto& [node, uuid] : tree.node_provider) {
    if (wanted.count({uuid, kVcpu}) != 0) limits.nodes.insert(node);
  }
  return limits;
}

numa::Allocation outside_claim(const numa::HostModel& host, const numa::Capacity& capacity, const ClaimLimits& limits) {
  numa::Allocation out;
  out.vm = kOutsideClaim;
  for (const auto& node : host.numa_nodes) {
    if (limits.nodes.count(node.id) == 0) out.cpus.insert(out.cpus.end(), node.cpus.begin(), node.cpus.end());
  }
  for (const auto& device : capacity.devices) {
    if (limits.devices.count(device.address) == 0) out.devices.push_back(device.address);
  }
  out.hugepages.clear();
  return out;
}

}  // namespace hostagent::fleet
