// 200 creates at once on a host that fits N of them: exactly N succeed, every other one fails with
// "does not fit", and no CPU, device or hugepage is given twice.
#include <doctest/doctest.h>

#include <fstream>
#include <future>

#include "daemon_fixture.hpp"
#include "hostagent/numa/placement.hpp"
#include "hostagent/vmtemplates/shape_request.hpp"
#include "hostagent/vmtemplates/vm_template.hpp"
#include "simulated_hosts.hpp"

namespace hostagent::testing {
namespace {

constexpr int kRequests = 200;

// 2 vCPUs and 2 GiB of 1 GiB pages, with one GPU: GPUs run out first on Vela 2.
const char* const kSmallGpuVm = R"(name: small-gpu
vcpus: 2
memory: 2GiB
hugepage_size: 1G
gpus: {count: 1, model: H100}
machine: q35
firmware: efi
)";

// 2 vCPUs and 2 GiB of 1 GiB pages, no devices: CPUs run out first.
const char* const kSmallCpuVm = R"(name: small-cpu
vcpus: 2
memory: 2GiB
hugepage_size: 1G
machine: q35
firmware: efi
)";

// How many fit, by placing one after another with the placement function alone: the oracle the
// concurrent run is checked against.
int capacity(const numa::HostModel& host, const vmtemplates::VmTemplate& shape) {
  std::vector<numa::Allocation> held;
  for (;;) {
    auto placed = numa::place(host, held, numa::HostPolicy{}, placement_request(shape));
    if (!placed.ok()) {
      REQUIRE(placed.error().code == ErrorCode::does_not_fit);
      return static_cast<int>(held.size());
    }
    held.push_back(numa::allocation_of("vm" + std::to_string(held.size()), *placed, shape.hugepage_size_bytes));
  }
}

struct Outcome {
  int created = 0;
  std::vector<std::string> refusals;  // messages of the failures that were not does_not_fit
  std::vector<service::VmView> vms;
};

// Every create begun before any is waited for: they race for the host on the operation threads.
Outcome create_all_at_once(const DaemonFixture& fixture, service::VmService& service, const std::string& shape) {
  std::vector<service::OperationView> begun;
  for (int i = 0; i < kRequests; ++i) {
    auto operation = service.begin_create(fixture.request("many-" + std::to_string(i), shape));
    REQUIRE_MESSAGE(operation.ok(), operation.error().message);
    begun.push_back(*operation);
  }
  Outcome outcome;
  for (const auto& operation : begun) {
    const auto ended = service.wait(operation.id);
    REQUIRE_MESSAGE(ended.ok(), ended.error().message);
    if (!ended->error) {
      ++outcome.created;
      outcome.vms.push_back(service.get_vm(testing::vm_name(operation.vm)).value());
    } else if (ended->error->code != ErrorCode::does_not_fit) {
      outcome.refusals.push_back(ended->error->message);
    }
  }
  return outcome;
}

void create_concurrently(const std::string& name, const char* yaml) {
  DaemonFixture fixture;
  TempDir templates;
  std::ofstream(templates.path() / (name + ".yaml")) << yaml;
  fixture.add_template_dir(templates.path());
  const auto host = discover_shared("vela2");
  const auto shape = vmtemplates::load_template_file(templates.path() / (name + ".yaml"), {});
  REQUIRE(shape.ok());
  const int fits = capacity(host, *shape);
  REQUIRE(fits > 0);
  REQUIRE(fits < kRequests);
  MESSAGE("vela2 fits " << fits << " of " << kRequests << " concurrent creates of " << name);

  auto service = fixture.start();
  REQUIRE_MESSAGE(service.ok(), service.error().message);
  const auto outcome = create_all_at_once(fixture, **service, name);
  CHECK(outcome.created == fits);
  CHECK_MESSAGE(outcome.refusals.empty(), outcome.refusals.front());

  std::set<int> cpus;
  std::set<PciAddress> devices;
  std::map<int, uint64_t> pages;
  std::size_t cpu_count = 0;
  std::size_t device_count = 0;
  for (const auto& vm : outcome.vms) {
    const auto& held = vm.record->allocation;
    cpus.insert(held.cpus.begin(), held.cpus.end());
    devices.insert(held.devices.begin(), held.devices.end());
    cpu_count += held.cpus.size();
    device_count += held.devices.size();
    for (const auto& [node, count] : held.hugepages) pages[node] += count;
  }
  CHECK(cpus.size() == cpu_count);        // no CPU twice
  CHECK(devices.size() == device_count);  // no device twice
  for (const auto& node : host.numa_nodes) {
    for (const auto& pool : node.hugepages) {
      if (pool.page_size_bytes == shape->hugepage_size_bytes) CHECK(pages[node.id] <= pool.total);
    }
  }
  CHECK(test_driver_domains("many-").size() == static_cast<std::size_t>(fits));
  CHECK(fixture.journal_files().empty());
}

}  // namespace

TEST_CASE("200 concurrent creates of a 1-GPU shape: exactly the N that fit succeed, no GPU twice") {
  create_concurrently("small-gpu", kSmallGpuVm);
}

TEST_CASE("200 concurrent creates of a CPU-only shape: exactly the N that fit succeed, no CPU twice") {
  create_concurrently("small-cpu", kSmallCpuVm);
}

}  // namespace hostagent::testing
