// fabric/fm_sdk against the fake Fabric Manager library (fake_nvfm.cpp): opened at run time as the
// real libnvfm.so.1 would be, each SDK call made as FM documents it, each answer read.
#include <doctest/doctest.h>

#include <algorithm>

#include "fake_fm.hpp"
#include "hostagent/fabric/fabric_manager.hpp"
#include "test_support.hpp"

namespace hostagent::testing {
namespace {

using fabric::FabricManager;
using fabric::FmEndpoint;
using numa::FabricPartition;
using numa::FabricReport;

// An HGX 8-GPU baseboard whose module IDs are not in PCI order, as on real boards.
constexpr const char* kBaseboard =
    "1=0000:ba:00.0;2=0000:cc:00.0;3=0000:9a:00.0;4=0000:aa:00.0;"
    "5=0000:2a:00.0;6=0000:3d:00.0;7=0000:18:00.0;8=10000:4e:00.0";

FmEndpoint endpoint() {
  FmEndpoint endpoint;
  endpoint.library = FakeFm::path();
  endpoint.address = "127.0.0.1";
  return endpoint;
}

std::unique_ptr<FabricManager> open_fm() {
  auto fm = fabric::open_fabric_manager(endpoint());
  REQUIRE_MESSAGE(fm.ok(), fm.error().message);
  return std::move(fm).value();
}

FabricReport read_report(FabricManager& fm) {
  auto report = fm.report();
  REQUIRE_MESSAGE(report.ok(), report.error().message);
  return std::move(report).value();
}

const FabricPartition& partition(const FabricReport& report, numa::PartitionId id) {
  const auto it = std::find_if(report.partitions.begin(), report.partitions.end(),
                               [&](const FabricPartition& p) { return p.id == id; });
  REQUIRE(it != report.partitions.end());
  return *it;
}

}  // namespace

TEST_CASE("the 15 partitions of an 8-GPU baseboard are read by module ID, each GPU with its PCI address") {
  FakeFm fake;
  fake.start("127.0.0.1", false, kBaseboard);
  auto fm = open_fm();
  const FabricReport report = read_report(*fm);
  CHECK(report.ready);
  CHECK(report.failures_read);
  CHECK(report.unsupported.empty());
  REQUIRE(report.partitions.size() == 15);
  CHECK(numa::free_partitions_by_size(report) == std::map<size_t, size_t>{{1, 8}, {2, 4}, {4, 2}, {8, 1}});
  // FM's bus IDs are NVML's ("00000000:BA:00.0", "00010000:4E:00.0" behind a VMD domain); the GPUs
  // are named in the kernel's form.
  CHECK(numa::describe(partition(report, 3)) == "partition 3 (modules 1,2: 0000:ba:00.0, 0000:cc:00.0)");
  CHECK(numa::describe(partition(report, 6)) == "partition 6 (modules 7,8: 0000:18:00.0, 10000:4e:00.0)");
  CHECK(numa::describe(partition(report, 13)) == "partition 13 (module 7: 0000:18:00.0)");
  CHECK(partition(report, 0).gpus.size() == 8);
  CHECK(partition(report, 3).gpus[0].nvlinks_available == 18);
  CHECK(fake.calls("fmConnect") == 1);
}

TEST_CASE("a partition is activated once, and another sharing its GPUs is refused as a conflict naming FM's answer") {
  FakeFm fake;
  fake.start("127.0.0.1", false, kBaseboard);
  auto fm = open_fm();
  REQUIRE(fm->activate(3).ok());
  CHECK(fake.active() == std::vector<unsigned>{3});
  const FabricReport report = read_report(*fm);
  CHECK(partition(report, 3).active);
  // Partition 3 holds modules 1 and 2: the 8-GPU partition, the 4-GPU one of modules 1-4 and two
  // single-GPU ones are no longer free.
  CHECK(numa::free_partitions_by_size(report) == std::map<size_t, size_t>{{1, 6}, {2, 3}, {4, 1}});

  const auto overlapping = fm->activate(1);
  REQUIRE_FALSE(overlapping.ok());
  CHECK(overlapping.error().code == ErrorCode::conflict);
  CHECK(contains(overlapping.error().message, "activating fabric partition 1"));
  CHECK(contains(overlapping.error().message, "FM_ST_IN_USE"));
  const auto again = fm->activate(3);
  REQUIRE_FALSE(again.ok());
  CHECK(again.error().code == ErrorCode::conflict);
  CHECK(fake.active() == std::vector<unsigned>{3});
}

TEST_CASE("deactivating a partition twice succeeds twice, and an unknown partition is not found") {
  FakeFm fake;
  fake.start("127.0.0.1", false, kBaseboard);
  auto fm = open_fm();
  REQUIRE(fm->activate(5).ok());
  CHECK(fm->deactivate(5).ok());
  CHECK(fake.active().empty());
  // FM answers FM_ST_UNINITIALIZED for a partition that is not active: an undo run again.
  CHECK(fm->deactivate(5).ok());
  CHECK(fake.calls("fmDeactivateFabricPartition") == 2);
  const auto unknown = fm->deactivate(99);
  REQUIRE_FALSE(unknown.ok());
  CHECK(unknown.error().code == ErrorCode::not_found);
  CHECK(contains(unknown.error().message, "FM_ST_BADPARAM"));
}

TEST_CASE("FM restarted forgets its active partitions: not ready until they are declared, then as before") {
  FakeFm fake;
  fake.start("127.0.0.1", false, kBaseboard);
  auto fm = open_fm();
  REQUIRE(fm->activate(4).ok());
  REQUIRE(fm->activate(5).ok());
  fake.restart();
  CHECK(fake.active().empty());

  // The old connection is invalid: the adapter connects again and finds FM waiting.
  FabricReport waiting = read_report(*fm);
  CHECK_FALSE(waiting.ready);
  CHECK(waiting.partitions.empty());
  CHECK(fake.calls("fmConnect") == 2);
  const auto refused = fm->activate(6);
  REQUIRE_FALSE(refused.ok());
  CHECK(refused.error().code == ErrorCode::unavailable);
  CHECK(contains(refused.error().message, "FM_ST_NOT_CONFIGURED"));

  REQUIRE(fm->declare_active({4, 5}).ok());
  CHECK(fake.active() == std::vector<unsigned>{4, 5});
  const FabricReport after = read_report(*fm);
  CHECK(after.ready);
  CHECK(partition(after, 4).active);
  CHECK(partition(after, 5).active);
  // In its resiliency mode FM no longer says which NVLinks failed: unknown, not none.
  CHECK_FALSE(after.failures_read);
  // Declared once, FM takes no second declaration (the fake's reading of the SDK's "after its restart").
  CHECK_FALSE(fm->declare_active({4, 5}).ok());
}

TEST_CASE("FM stopped: every call is unavailable and says what to check, and with FM back the adapter reconnects") {
  FakeFm fake;
  fake.start("127.0.0.1", false, kBaseboard);
  auto fm = open_fm();
  REQUIRE(fm->report().ok());
  fake.stop();
  const auto report = fm->report();
  REQUIRE_FALSE(report.ok());
  CHECK(report.error().code == ErrorCode::unavailable);
  CHECK(contains(report.error().message, "FM_ST_CONNECTION_NOT_VALID"));
  CHECK(contains(report.error().message, "nvidia-fabricmanager running"));
  CHECK(fm->activate(3).error().code == ErrorCode::unavailable);

  fake.start("127.0.0.1", false, kBaseboard);
  CHECK(read_report(*fm).partitions.size() == 15);
}

TEST_CASE("FM at another address or socket than configured cannot be reached, and at its unix socket it can") {
  FakeFm fake;
  fake.start("/run/nvidia-fabricmanager/fm.sock", true, kBaseboard);
  auto tcp = open_fm();
  CHECK(tcp->report().error().code == ErrorCode::unavailable);

  FmEndpoint socket = endpoint();
  socket.address = "/run/nvidia-fabricmanager/fm.sock";
  socket.unix_socket = true;
  auto fm = fabric::open_fabric_manager(socket);
  REQUIRE(fm.ok());
  CHECK((*fm)->report().ok());

  fake.start("127.0.0.1:6667", false, kBaseboard);
  CHECK(tcp->report().error().code == ErrorCode::unavailable);  // the default port, 6666
}

TEST_CASE("NVLink failures: FM's failed devices are reported and the failed GPU's partitions gated with why") {
  FakeFm fake;
  fake.start("127.0.0.1", false, kBaseboard);
  fake.fail_nvlinks("0000:2a:00.0");  // module 5
  fake.fail_nvlinks("0000:05:00.0", true);
  auto fm = open_fm();
  const FabricReport report = read_report(*fm);
  CHECK(report.failed_gpus == std::vector<PciAddress>{*PciAddress::parse("0000:2a:00.0")});
  CHECK(report.failed_nvswitches == std::vector<PciAddress>{*PciAddress::parse("0000:05:00.0")});
  // Modules 1-8, 5-8, 5-6 and 5 alone.
  auto unsupported = report.unsupported;
  std::sort(unsupported.begin(), unsupported.end());
  CHECK(unsupported == std::vector<numa::PartitionId>{0, 2, 5, 11});
  const auto gate = numa::partition_gate(report, partition(report, 5));
  REQUIRE(gate.has_value());
  CHECK(contains(*gate, "unsupported"));
  CHECK(numa::free_partitions_by_size(report) == std::map<size_t, size_t>{{1, 7}, {2, 3}, {4, 1}});
  CHECK(partition(report, 11).gpus[0].nvlinks_available == 0);
  CHECK(fm->activate(11).error().code == ErrorCode::not_found);
}

TEST_CASE("FM in another mode than shared NVSwitch answers not supported, and says which setting") {
  FakeFm fake;
  fake.start("127.0.0.1", false, kBaseboard);
  fake.set_shared_mode(false);
  auto fm = open_fm();
  const auto report = fm->report();
  REQUIRE_FALSE(report.ok());
  CHECK(report.error().code == ErrorCode::unsupported);
  CHECK(contains(report.error().message, "FABRIC_MODE=1"));
}

TEST_CASE("the SDK library is initialised while the adapter lives, and one missing or foreign is refused by name") {
  FakeFm fake;
  fake.start("127.0.0.1", false, kBaseboard);
  {
    auto fm = open_fm();
    CHECK(fake.initialised());
  }
  CHECK_FALSE(fake.initialised());

  FmEndpoint missing = endpoint();
  missing.library = "/nonexistent/libnvfm.so.1";
  const auto absent = fabric::open_fabric_manager(missing);
  REQUIRE_FALSE(absent.ok());
  CHECK(absent.error().code == ErrorCode::not_found);
  CHECK(contains(absent.error().message, "/nonexistent/libnvfm.so.1"));
  CHECK(contains(absent.error().message, "fabric.library"));

  FmEndpoint foreign = endpoint();
  foreign.library = "libm.so.6";
  const auto other = fabric::open_fabric_manager(foreign);
  REQUIRE_FALSE(other.ok());
  CHECK(other.error().code == ErrorCode::unsupported);
  CHECK(contains(other.error().message, "has no fmLibInit"));

  FmEndpoint empty = endpoint();
  empty.address = "";
  const auto no_address = fabric::open_fabric_manager(empty);
  REQUIRE_FALSE(no_address.ok());
  CHECK(no_address.error().field == "fabric.address");
}

}  // namespace hostagent::testing
