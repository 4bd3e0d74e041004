// hugepages: per-node pools raised through sysfs, over a fixture tree whose nr_hugepages behaves as
// the kernel's does on each write (mm/hugetlb.c, set_max_huge_pages): it allocates what memory it
// finds up to the count written and keeps that as the pool's size; a lower count frees only free
// pages; free_hugepages follows.
#include <doctest/doctest.h>

#include <algorithm>
#include <cerrno>
#include <filesystem>
#include <fstream>
#include <map>

#include "fake_kernel.hpp"
#include "hostagent/hugepages/hugepage_pools.hpp"
#include "test_support.hpp"

namespace hostagent::testing {
namespace {

namespace fs = std::filesystem;
constexpr uint64_t k2M = 2ULL << 20;
constexpr uint64_t k1G = 1ULL << 30;

std::string pool_dir(int node, uint64_t size) {
  return "/sys/devices/system/node/node" + std::to_string(node) + "/hugepages/hugepages-" + std::to_string(size >> 10) +
         "kB";
}

// A host of two nodes with 2 MiB and 1 GiB pools, and, per pool, how many pages its node's memory
// can give at most.
class PoolHost {
 public:
  PoolHost() : kernel_(dir_.path()) {
    for (const int node : {0, 1}) {
      for (const uint64_t size : {k2M, k1G}) set(node, size, 0, 0);
    }
    kernel_.model(".*/nr_hugepages", [this](FakeKernel& kernel, const std::string& path, std::string_view value) {
      uint64_t asked = 0;
      const std::string text(value);
      if (text.empty() || text.find_first_not_of("0123456789\n") != std::string::npos) {
        return Status(kernel.refuse(EINVAL, path, value));
      }
      asked = std::stoull(text);
      const auto dir = path.substr(0, path.rfind('/'));
      const uint64_t total = read(dir + "/nr_hugepages");
      const uint64_t free = read(dir + "/free_hugepages");
      const uint64_t in_use = total - free;
      // Up: what memory allows. Down: never below the pages in use.
      const uint64_t now = asked >= total ? std::min(asked, limits_[dir]) : std::max(asked, in_use);
      kernel.store(dir + "/nr_hugepages", std::to_string(now) + "\n");
      kernel.store(dir + "/free_hugepages", std::to_string(now - in_use) + "\n");
      return ok_status();
    });
  }

  void set(int node, uint64_t size, uint64_t total, uint64_t free, uint64_t limit = 100000) {
    const fs::path dir = dir_.path() / pool_dir(node, size).substr(1);
    fs::create_directories(dir);
    std::ofstream(dir / "nr_hugepages") << total << "\n";
    std::ofstream(dir / "free_hugepages") << free << "\n";
    limits_[pool_dir(node, size)] = limit;
  }
  uint64_t read(const std::string& kernel_path) const {
    return std::stoull(read_text_file(dir_.path() / kernel_path.substr(1)));
  }
  Result<std::vector<hugepages::PoolReservation>> reserve(const std::vector<hugepages::PoolRequest>& requests) {
    return hugepages::reserve_pools(SysfsRoot::open(dir_.path()).value(), kernel_, requests);
  }
  FakeKernel& kernel() { return kernel_; }

 private:
  TempDir dir_;
  FakeKernel kernel_;
  std::map<std::string, uint64_t> limits_;
};

TEST_CASE("pools are raised to what is asked, per node and page size, and read back") {
  PoolHost host;
  const auto reserved = host.reserve({{0, k1G, 8}, {1, k1G, 8}, {0, k2M, 512}});
  REQUIRE_MESSAGE(reserved.ok(), reserved.error().message);
  REQUIRE(reserved->size() == 3);
  for (const auto& pool : *reserved) {
    CHECK(pool.written);
    CHECK(pool.before == 0);
    CHECK(pool.now == pool.asked.pages);
    CHECK_FALSE(pool.short_of_request());
  }
  CHECK(host.read(pool_dir(1, k1G) + "/nr_hugepages") == 8);
  CHECK(host.read(pool_dir(1, k1G) + "/free_hugepages") == 8);
  CHECK(host.read(pool_dir(1, k2M) + "/nr_hugepages") == 0);  // not asked: untouched
  CHECK(hugepages::describe((*reserved)[0]) == "node 0: 8 of 8 1 GiB pages (was 0)");
  CHECK(hugepages::describe((*reserved)[2]) == "node 0: 512 of 512 2 MiB pages (was 0)");
}

TEST_CASE("what the kernel could not find is reported, not an error") {
  PoolHost host;
  host.set(1, k1G, 0, 0, 5);  // node 1's memory holds five 1 GiB pages at most
  const auto reserved = host.reserve({{1, k1G, 8}});
  REQUIRE_MESSAGE(reserved.ok(), reserved.error().message);
  const auto& pool = reserved->front();
  CHECK(pool.now == 5);
  CHECK(pool.short_of_request());
  CHECK(hugepages::describe(pool) == "node 1: 5 of 8 1 GiB pages (was 0): the kernel found memory for no more");
}

TEST_CASE("a pool that already holds as many or more is left as it is: a restart writes nothing") {
  PoolHost host;
  host.set(0, k1G, 8, 2);  // six of its pages held by running VMs
  host.set(1, k1G, 12, 12);
  const auto reserved = host.reserve({{0, k1G, 8}, {1, k1G, 8}});
  REQUIRE(reserved.ok());
  CHECK(host.kernel().writes().empty());
  CHECK_FALSE((*reserved)[0].written);
  CHECK(hugepages::describe((*reserved)[0]) == "node 0: 8 1 GiB pages, as asked");
  CHECK(hugepages::describe((*reserved)[1]) == "node 1: 12 1 GiB pages, more than the 8 asked: left as it is");
  CHECK(host.read(pool_dir(1, k1G) + "/nr_hugepages") == 12);
  CHECK(host.read(pool_dir(0, k1G) + "/free_hugepages") == 2);  // the VMs' pages untouched
}

TEST_CASE("a pool the host lacks is not_found naming host.hugepages, and nothing after it is written") {
  PoolHost host;
  const auto refused = host.reserve({{2, k1G, 8}, {0, k1G, 8}});
  REQUIRE_FALSE(refused.ok());
  CHECK(refused.error().code == ErrorCode::not_found);
  CHECK_MESSAGE(refused.error().message.find("host.hugepages: node 2 has no pool of 1 GiB pages") == 0,
                refused.error().message);
  CHECK(host.kernel().writes().empty());
}

TEST_CASE("the kernel's refusal of a write is the error") {
  PoolHost host;
  host.kernel().fail_write(".*/node0/hugepages/hugepages-1048576kB/nr_hugepages", EBUSY);
  const auto refused = host.reserve({{0, k1G, 8}});
  REQUIRE_FALSE(refused.ok());
  CHECK(refused.error().code == ErrorCode::conflict);
  CHECK(host.read(pool_dir(0, k1G) + "/nr_hugepages") == 0);
}

}  // namespace
}  // namespace hostagent::testing
