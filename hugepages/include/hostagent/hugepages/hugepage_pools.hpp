// hugepages: the per-node hugepage pools the operator reserves for VMs (host.hugepages), written to
// each node's nr_hugepages at start and read back, so that a create never waits for the kernel to
// find and compact memory for its pages, and never fails for pages the host could have held.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "hostagent/common/result.hpp"
#include "hostagent/common/sysfs_root.hpp"
#include "hostagent/common/sysfs_writer.hpp"

namespace hostagent::hugepages {

// One pool to hold: `pages` pages of `page_size_bytes` on NUMA node `node`.
struct PoolRequest {
  int node = 0;
  uint64_t page_size_bytes = 0;
  uint64_t pages = 0;
};

struct PoolReservation {
  PoolRequest asked;
  uint64_t before = 0;   // nr_hugepages as found
  uint64_t now = 0;      // nr_hugepages read back after the write (before, when nothing was written)
  bool written = false;  // false: the pool already held at least what was asked, and is left as it is
  bool short_of_request() const { return now < asked.pages; }
};

// Raises each pool to what is asked; a pool that holds more is left alone (hostagent never frees
// pages someone else reserved, nor a VM's: the kernel would make in-use pages surplus). The kernel
// may give fewer than asked, when it cannot find the memory; that is reported, not an error. A pool
// the host lacks (no such node, or no such page size on this CPU) is ErrorCode::not_found, naming
// host.hugepages, and nothing after it is written.
Result<std::vector<PoolReservation>> reserve_pools(const SysfsRoot& sysfs, SysfsWriter& writer,
                                                   const std::vector<PoolRequest>& requests);

// "node 0: 800 of 800 1 GiB pages (was 0)", "node 1: 700 of 800 1 GiB pages (was 0): the kernel
// found memory for no more", "node 0: 900 2 MiB pages, more than the 800 asked: left as it is".
std::string describe(const PoolReservation& reservation);

}  // namespace hostagent::hugepages
