// render/placement_checks: cells, vCPU pins, memory and CPU topology of a placement, checked.
#include "placement_checks.hpp"

#include "input_checks.hpp"

#include <algorithm>
#include <bit>
#include <set>
#include <string>

namespace hostagent::render::detail {
namespace {

bool host_has_node(const numa::HostModel& host, int node) {
  return std::any_of(host.numa_nodes.begin(), host.numa_nodes.end(), [&](const auto& n) { return n.id == node; });
}

bool host_has_cpu(const numa::HostModel& host, int cpu) {
  return std::any_of(host.cpus.begin(), host.cpus.end(), [&](const auto& c) { return c.id == cpu; });
}

Status check_cell_cpus(const numa::HostModel& host, const numa::GuestCell& cell, std::set<int>& vcpus,
                       std::set<int>& host_cpus) {
  const std::string where = "guest cell " + std::to_string(cell.id);
  if (cell.vcpus.empty()) return invalid_placement(where + " has no vCPUs");
  if (cell.vcpus.size() != cell.host_cpus.size()) {
    return invalid_placement(where + " pins " + std::to_string(cell.vcpus.size()) + " vCPUs to " +
                             std::to_string(cell.host_cpus.size()) + " host CPUs");
  }
  for (std::size_t i = 0; i < cell.vcpus.size(); ++i) {
    if (!vcpus.insert(cell.vcpus[i]).second)
      return invalid_placement("vCPU " + std::to_string(cell.vcpus[i]) + " is placed twice");
    if (!host_has_cpu(host, cell.host_cpus[i])) {
      return invalid_placement(where + " pins a vCPU to host CPU " + std::to_string(cell.host_cpus[i]) +
                               ", which the host lacks");
    }
    if (!host_cpus.insert(cell.host_cpus[i]).second) {
      return invalid_placement("host CPU " + std::to_string(cell.host_cpus[i]) + " is pinned to two vCPUs");
    }
  }
  return ok_status();
}

// QEMU backs each guest node with its own memory backend: a whole number of pages of the size asked.
Status check_cell_memory(const numa::GuestCell& cell, uint64_t page_size) {
  const std::string where = "guest cell " + std::to_string(cell.id);
  if (cell.memory_bytes == 0 || cell.memory_bytes % 1024 != 0) {
    return invalid_placement(where + " memory " + std::to_string(cell.memory_bytes) +
                             " bytes is not a positive number of KiB");
  }
  if (page_size == 0) return ok_status();
  if (cell.memory_bytes % page_size != 0) {
    return invalid_placement(where + " memory " + std::to_string(cell.memory_bytes) +
                             " bytes is not a whole number of " + std::to_string(page_size) + "-byte hugepages");
  }
  if (cell.hugepages != cell.memory_bytes / page_size) {
    return invalid_placement(where + " reserves " + std::to_string(cell.hugepages) + " hugepages for " +
                             std::to_string(cell.memory_bytes / page_size) + " pages of memory");
  }
  return ok_status();
}

Status check_cells(const numa::HostModel& host, const vmtemplates::VmTemplate& shape,
                   const numa::Placement& placement) {
  if (placement.cells.empty()) return invalid_placement("it has no guest cells");
  if (placement.cells.size() > static_cast<std::size_t>(kMaxGuestCells)) {
    return invalid_placement(std::to_string(placement.cells.size()) + " guest cells; at most " +
                             std::to_string(kMaxGuestCells) + " are supported");
  }
  std::set<int> vcpus, host_cpus;
  for (std::size_t i = 0; i < placement.cells.size(); ++i) {
    const auto& cell = placement.cells[i];
    if (cell.id != static_cast<int>(i))
      return invalid_placement("guest cell ids must be 0.." + std::to_string(placement.cells.size() - 1) + " in order");
    if (!host_has_node(host, cell.host_node)) {
      return invalid_placement("guest cell " + std::to_string(cell.id) + " is on host NUMA node " +
                               std::to_string(cell.host_node) + ", which the host lacks");
    }
    HA_TRY_STATUS(check_cell_cpus(host, cell, vcpus, host_cpus));
    HA_TRY_STATUS(check_cell_memory(cell, shape.hugepage_size_bytes));
  }
  const int count = static_cast<int>(vcpus.size());
  if (*vcpus.begin() != 0 || *vcpus.rbegin() != count - 1)
    return invalid_placement("vCPU ids must be 0.." + std::to_string(count - 1));
  if (count != shape.vcpus) {
    return invalid_placement(std::to_string(count) + " vCPUs placed; template " + shape.name + " asks for " +
                             std::to_string(shape.vcpus));
  }
  return ok_status();
}

Status check_topology(const numa::Placement& placement, int vcpus) {
  const auto& t = placement.topology;
  if (t.sockets < 1 || t.cores < 1 || t.threads < 1 || t.sockets * t.cores * t.threads != vcpus) {
    return invalid_placement("CPU topology " + std::to_string(t.sockets) + " sockets x " + std::to_string(t.cores) +
                             " cores x " + std::to_string(t.threads) + " threads does not make " +
                             std::to_string(vcpus) + " vCPUs");
  }
  return ok_status();
}

}  // namespace

Status check_placement(const numa::HostModel& host, const vmtemplates::VmTemplate& shape,
                       const numa::Placement& placement) {
  const uint64_t page = shape.hugepage_size_bytes;
  if (page != 0 && (!std::has_single_bit(page) || page < 4096)) {
    return Error{ErrorCode::invalid_argument,
                 "template " + shape.name + ": hugepage size " + std::to_string(page) + " is not a page size"};
  }
  HA_TRY_STATUS(check_cells(host, shape, placement));
  for (const int cpu : placement.emulator_cpus) {
    if (!host_has_cpu(host, cpu))
      return invalid_placement("emulator CPU " + std::to_string(cpu) + " is not on the host");
  }
  return check_topology(placement, shape.vcpus);
}

}  // namespace hostagent::render::detail
