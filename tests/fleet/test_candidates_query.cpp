// fleet/candidates_query: a shape as Placement's allocation-candidates query, its groups bounded.
#include <doctest/doctest.h>

#include <string>

#include "hostagent/fleet/candidates_query.hpp"
#include "hostagent/fleet/provider_tree.hpp"
#include "test_support.hpp"

namespace hostagent::fleet {
namespace {

using hostagent::testing::kGiB;

numa::PlacementRequest gpus(int count, int vcpus, uint64_t memory_gib) {
  numa::PlacementRequest request;
  request.gpus = count;
  request.vfs_per_gpu = 1;
  request.vcpus = vcpus;
  request.memory_bytes = memory_gib * kGiB;
  request.gpu_ids = {{0x10de, 0x2330}};
  return request;
}

bool has(const std::string& target, const std::string& part) {
  return target.find(part) != std::string::npos;
}

TEST_CASE("eight GPUs: two NUMA groups, each with four GPU groups in its subtree, one slot each") {
  auto request = gpus(8, 160, 1792);
  request.nvme = 8;
  QueryOptions options;
  options.max_slots = 8;
  const auto query = candidates_query(request, options);
  REQUIRE(query.ok());
  const auto& t = query->target;
  CHECK(query->cells == 2);
  CHECK(query->gpu_groups == 8);
  CHECK(query->combinations_per_host == 1);
  CHECK(has(t, "/allocation_candidates?root_required=CUSTOM_HOSTAGENT,!COMPUTE_STATUS_DISABLED&"));
  CHECK(has(t, "resources_N0=VCPU:80,MEMORY_MB:917504,CUSTOM_HOSTAGENT_NVME:4&"));
  CHECK(has(t, "resources_N1=VCPU:80,MEMORY_MB:917504,CUSTOM_HOSTAGENT_NVME:4&"));
  CHECK(has(t,
            "resources_G7=PGPU:1,SRIOV_NET_VF:1&required_G7=CUSTOM_PCI_10DE_2330&"
            "required_G7=in:CUSTOM_HOSTAGENT_SLOT_7&"));
  CHECK(has(t, "same_subtree=_N0,_G0,_G1,_G2,_G3&"));
  CHECK(has(t, "same_subtree=_N1,_G4,_G5,_G6,_G7&"));
  CHECK(has(t, "group_policy=isolate"));
  CHECK(query->custom_traits.count("CUSTOM_PCI_10DE_2330") == 1);
  CHECK(query->custom_traits.count(slot_trait(7)) == 1);
  CHECK(query->custom_classes == std::set<std::string>{kNvme});
}

TEST_CASE("fewer GPUs: each group is held to one residue of the slots, which bounds the combinations") {
  QueryOptions options;
  options.max_slots = 8;
  auto two = candidates_query(gpus(2, 32, 256), options);
  REQUIRE(two.ok());
  CHECK(two->cells == 1);
  CHECK(has(two->target,
            "required_G0=in:CUSTOM_HOSTAGENT_SLOT_0,CUSTOM_HOSTAGENT_SLOT_2,CUSTOM_HOSTAGENT_SLOT_4,"
            "CUSTOM_HOSTAGENT_SLOT_6&"));
  CHECK(has(two->target,
            "required_G1=in:CUSTOM_HOSTAGENT_SLOT_1,CUSTOM_HOSTAGENT_SLOT_3,CUSTOM_HOSTAGENT_SLOT_5,"
            "CUSTOM_HOSTAGENT_SLOT_7&"));
  CHECK(two->combinations_per_host == 16);  // 4 x 4, where one group per GPU over 8 providers is 8^2
  auto three = candidates_query(gpus(3, 48, 384), options);
  REQUIRE(three.ok());
  CHECK(three->combinations_per_host == 3 * 3 * 2);
  auto one = candidates_query(gpus(1, 16, 128), options);
  REQUIRE(one.ok());
  CHECK_FALSE(has(one->target, "SLOT"));  // any GPU: one group over n providers costs n
  CHECK(has(one->target, "same_subtree=_N0,_G0&"));
}

TEST_CASE("VFs not tied to a GPU ride on the cell's GPU groups, where a GPU host counts its VFs") {
  auto request = gpus(8, 80, 1280);
  request.vfs_per_gpu = 0;
  request.extra_vfs = 2;
  auto query = candidates_query(request, {});
  REQUIRE(query.ok());
  CHECK(has(query->target, "resources_N0=VCPU:40,MEMORY_MB:655360&"));
  CHECK(has(query->target, "resources_G0=PGPU:1,SRIOV_NET_VF:1&"));
  CHECK(has(query->target, "resources_G1=PGPU:1&"));
  CHECK(has(query->target, "resources_G4=PGPU:1,SRIOV_NET_VF:1&"));
  numa::PlacementRequest cpu_only;
  cpu_only.vcpus = 4;
  cpu_only.memory_bytes = 4 * kGiB;
  cpu_only.extra_vfs = 1;
  auto no_gpu = candidates_query(cpu_only, {});
  REQUIRE(no_gpu.ok());
  CHECK(has(no_gpu->target, "resources_N0=VCPU:4,MEMORY_MB:4096,SRIOV_NET_VF:1&"));
}

TEST_CASE("a query for one host names its tree in every group") {
  QueryOptions options;
  options.in_tree = "6f1c2a9e-0b7d-4a55-9c3e-1d2e3f405162";
  auto query = candidates_query(gpus(2, 32, 256), options);
  REQUIRE(query.ok());
  for (const char* group : {"in_tree_N0=", "in_tree_G0=", "in_tree_G1="}) {
    CHECK(has(query->target, group + options.in_tree));
  }
  CHECK(has(query->target, "limit=50"));
}

TEST_CASE("small pages and CPU-only shapes ask for the 2 MiB pool on one node") {
  numa::PlacementRequest request;
  request.vcpus = 2;
  request.memory_bytes = kGiB;
  request.hugepage_size_bytes = 2ULL << 20;
  request.guest_cells = 1;
  auto query = candidates_query(request, {});
  REQUIRE(query.ok());
  CHECK(has(query->target, "resources_N0=VCPU:2,CUSTOM_HOSTAGENT_MEMORY_2M_MB:1024&limit=50"));
  CHECK_FALSE(has(query->target, "group_policy"));  // one group needs none
  CHECK(query->custom_classes.count(kMemory2M) == 1);
}

TEST_CASE("shapes Placement cannot express are refused with why") {
  auto uneven = candidates_query(gpus(8, 161, 1792), {});
  REQUIRE_FALSE(uneven.ok());
  CHECK(uneven.error().message.find("161 vCPUs do not split evenly over 2 NUMA nodes") != std::string::npos);
  auto request = gpus(1, 16, 128);
  request.hugepage_size_bytes = 16ULL << 30;
  auto pages = candidates_query(request, {});
  REQUIRE_FALSE(pages.ok());
  CHECK(pages.error().message.find("1 GiB and 2 MiB") != std::string::npos);
}

}  // namespace
}  // namespace hostagent::fleet
