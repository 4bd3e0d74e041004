// fleet/provider_tree: a host as OpenStack Placement sees it (docs/placement.md), and what each
// VM uses of it. Pure: the host model and its capacity in, providers and allocations out. The one
// owner of the tree's shape, its names, resource classes and traits, and of which provider each
// device counts on; the daemon's sync publishes it, and a create's claim is read back through it.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "hostagent/common/pci_address.hpp"
#include "hostagent/common/result.hpp"
#include "hostagent/numa/capacity.hpp"
#include "hostagent/numa/host_model.hpp"
#include "hostagent/numa/placement.hpp"

namespace hostagent::fleet {

// Resource classes. Standard ones where Placement has them (os-resource-classes), CUSTOM_ otherwise.
inline constexpr const char* kVcpu = "VCPU";
inline constexpr const char* kMemory1G = "MEMORY_MB";  // 1 GiB pages, in MiB, step 1024
inline constexpr const char* kMemory2M = "CUSTOM_HOSTAGENT_MEMORY_2M_MB";
inline constexpr const char* kGpu = "PGPU";
inline constexpr const char* kVf = "SRIOV_NET_VF";
inline constexpr const char* kNvme = "CUSTOM_HOSTAGENT_NVME";
inline constexpr const char* kWholeNic = "CUSTOM_HOSTAGENT_NIC_PF";
// Traits.
inline constexpr const char* kHostTrait = "CUSTOM_HOSTAGENT";  // on every root hostagent publishes
inline constexpr const char* kNumaTrait = "HW_NUMA_ROOT";
inline constexpr const char* kSwitchTrait = "CUSTOM_HOSTAGENT_PCIE_SWITCH";  // a GPU under a switch: peer-to-peer
inline constexpr const char* kRdmaTrait = "CUSTOM_HOSTAGENT_RDMA";  // its VFs' NIC has an RDMA device (RoCE, IB)
// Nova's mark of a compute host that takes no instances (os-traits): its scheduler, and this
// project's candidates query, forbid it on the root.
inline constexpr const char* kDisabledTrait = "COMPUTE_STATUS_DISABLED";
// On a root in maintenance, beside kDisabledTrait when hostagent put that there: what lets the
// sync take away, at the uncordon, the disabled mark it set and no other (merged_traits).
inline constexpr const char* kMaintenanceTrait = "CUSTOM_HOSTAGENT_MAINTENANCE";
// Consumer types: what the host wrote for one of its VMs, and what a control plane claims first.
inline constexpr const char* kVmConsumer = "HOSTAGENT_VM";
inline constexpr const char* kClaimConsumer = "HOSTAGENT_CLAIM";
// What the host holds outside its managed VMs, as one consumer per host (host_consumer_uuid).
inline constexpr const char* kHostConsumer = "HOSTAGENT_HOST";

// Placement's rule for a resource class or trait: upper-case letters, digits and '_', at most 255.
bool is_placement_name(std::string_view text);

// True for a trait hostagent decides on its own providers: those it writes (CUSTOM_HOSTAGENT and
// CUSTOM_HOSTAGENT_*, the model traits CUSTOM_PCI_*, HW_NUMA_ROOT). Any other trait there (an
// operator's, Nova's COMPUTE_STATUS_DISABLED) is someone else's, and a sync pass keeps it.
bool is_managed_trait(std::string_view trait);
// The traits a provider is to carry: `current` (what Placement holds) less the managed traits
// `wanted` lacks, plus `wanted`; and kDisabledTrait, which is not managed, as maintenance has it:
// - wanted holds kMaintenanceTrait: kDisabledTrait is added with it, unless current has
//   kDisabledTrait without it (an operator disabled the host first: the mark stays theirs, and
//   kMaintenanceTrait is left off);
// - current holds kMaintenanceTrait and wanted does not (the uncordon): kDisabledTrait goes with it.
std::set<std::string> merged_traits(const std::set<std::string>& current, const std::set<std::string>& wanted);

// "CUSTOM_PCI_10DE_2330": a GPU's model, as Nova names a PCI device's class.
std::string model_trait(uint16_t vendor_id, uint16_t device_id);
// "CUSTOM_HOSTAGENT_SLOT_3": the GPU's position among its host's GPUs (address order).
std::string slot_trait(int slot);

struct InventoryRecord {
  int64_t total = 0;
  int64_t reserved = 0;
  int64_t max_unit = 0;
  int64_t step_size = 1;
  bool operator==(const InventoryRecord&) const = default;
};

using Resources = std::map<std::string, int64_t>;            // resource class -> amount
using ProviderResources = std::map<std::string, Resources>;  // provider uuid -> resources

struct Provider {
  std::string uuid;
  std::string name;
  std::string parent_uuid;  // "" for the root
  std::map<std::string, InventoryRecord> inventories;
  std::set<std::string> traits;
};

// The inventories a provider is to have: `wanted` (totals, units, steps), each with the `reserved`
// Placement holds for it (`current`), lowered to the total where the total fell below it. Reserved
// is the operator's: hostagent never sets it (ProviderTree::host_holds).
std::map<std::string, InventoryRecord> merged_inventories(const std::map<std::string, InventoryRecord>& current,
                                                          const std::map<std::string, InventoryRecord>& wanted);

// Where one device counts: a unit of `resource_class` on `provider`.
struct DeviceCount {
  std::string provider;
  std::string resource_class;
};

// Where each device counts, and the CPUs and pools of each node.
struct ProviderTree {
  std::vector<Provider> providers;                       // parents before their children
  std::map<PciAddress, DeviceCount> devices;             // every device listed in the capacity
  std::map<int, std::string> node_provider;              // NUMA node with CPUs -> its provider
  std::map<std::string, ProviderResources> allocations;  // managed VM's UUID (the consumer) -> what it uses
  // What is neither free nor a managed VM's: the host's own devices and the groups they share, a
  // foreign domain's CPUs and devices, devices cleaning or quarantined, and pages gone from the
  // pools outside hostagent. The allocation of the host's own consumer (host_consumer_uuid), not
  // `reserved`: Placement's `reserved` is the operator's, and a sync pass never writes it.
  ProviderResources host_holds;

  const Provider* find(const std::string& uuid) const;
  const std::string& root_uuid() const { return providers.front().uuid; }
};

struct TreeInput {
  std::string host_name;  // the root's name; every provider's uuid derives from it
  const numa::HostModel* host = nullptr;
  const numa::Capacity* capacity = nullptr;
  const std::vector<numa::Allocation>* held = nullptr;  // every holder, managed VMs and foreign domains
  std::vector<int> housekeeping_cpus;
  std::map<std::string, std::string> managed;  // VM name -> UUID: their holdings are allocations
  bool in_maintenance = false;                 // cordoned, draining or drained: the root carries kMaintenanceTrait
};

// The tree, the allocations of the managed VMs, and what the host holds outside them (host_holds).
// Every inventory's `reserved` is 0 here: the sync keeps whatever Placement has there.
ProviderTree provider_tree(const TreeInput& input);

// The consumer whose allocation is a host's host_holds: a UUID like provider_uuid's, from the
// host's name.
std::string host_consumer_uuid(const std::string& host_name);

// The stable UUID of one provider: RFC 9562 version 8 (a name-based UUID from SHA-256, since the
// project's one digest is SHA-256), from "hostagent-placement" and the host's name and `element`.
std::string provider_uuid(const std::string& host_name, const std::string& element);

// What a create's claim lets placement take (docs/placement.md, "Claims"): for each device class
// claimed on a provider, that many of the free devices counting there (address order), and the nodes
// whose CPUs it claimed. So what the host gives is what Placement granted, unit for unit.
struct ClaimLimits {
  std::set<PciAddress> devices;
  std::set<int> nodes;
};

// invalid_argument (field "placement.allocations") for a provider not in this host's tree, a
// resource class it does not have there, or an amount below 1; conflict when fewer devices are free
// there than the claim names (Placement and the host disagree until the sync has run).
Result<ClaimLimits> claim_limits(const ProviderTree& tree, const numa::Capacity& capacity,
                                 const ProviderResources& claim);

// What a claimed create may not take, as one more holder for placement: every device the claim
// does not cover, and the CPUs of every node it does not name. Placement then chooses within the
// claim by its own rules, and refuses, naming this holder, what the claim cannot hold.
inline constexpr const char* kOutsideClaim = "(outside this create's Placement claim)";
numa::Allocation outside_claim(const numa::HostModel& host, const numa::Capacity& capacity, const ClaimLimits& limits);

}  // namespace hostagent::fleet
