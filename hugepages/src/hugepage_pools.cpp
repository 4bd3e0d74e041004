// hugepages/hugepage_pools: per-node pools raised through sysfs and read back.
#include "hostagent/hugepages/hugepage_pools.hpp"

#include "hostagent/common/text.hpp"
#include "hostagent/discovery/hugepage_reader.hpp"

namespace hostagent::hugepages {
namespace {

Result<uint64_t> pool_size(const SysfsRoot& sysfs, const std::string& file, const PoolRequest& request) {
  HA_TRY(const auto pages, sysfs.read_optional_int(file));
  if (!pages) {
    return Error{ErrorCode::not_found, "host.hugepages: node " + std::to_string(request.node) + " has no pool of " +
                                           text::binary_size(request.page_size_bytes) + " pages (" + file +
                                           " is absent): no such node, or no such page size on this CPU"};
  }
  return static_cast<uint64_t>(*pages);
}

Result<PoolReservation> reserve(const SysfsRoot& sysfs, SysfsWriter& writer, const PoolRequest& request) {
  const std::string file = discovery::hugepage_pool_dir(request.node, request.page_size_bytes) + "/nr_hugepages";
  PoolReservation reservation{request};
  HA_TRY(reservation.before, pool_size(sysfs, file, request));
  reservation.now = reservation.before;
  if (reservation.before >= request.pages) return reservation;
  // The kernel allocates what it can and keeps that as the pool's size; asking is never refused
  // for want of memory: the count read back says what it gave (Documentation/admin-guide/mm/
  // hugetlbpage.rst, "the result ... should be verified by reading nr_hugepages").
  HA_TRY_STATUS(writer.write(file, std::to_string(request.pages) + "\n"));
  reservation.written = true;
  HA_TRY(reservation.now, pool_size(sysfs, file, request));
  return reservation;
}

}  // namespace

Result<std::vector<PoolReservation>> reserve_pools(const SysfsRoot& sysfs, SysfsWriter& writer,
                                                   const std::vector<PoolRequest>& requests) {
  std::vector<PoolReservation> reservations;
  for (const auto& request : requests) {
    HA_TRY(auto reservation, reserve(sysfs, writer, request));
    reservations.push_back(reservation);
  }
  return reservations;
}

std::string describe(const PoolReservation& r) {
  const std::string node = "node " + std::to_string(r.asked.node) + ": ";
  const std::string pages = text::binary_size(r.asked.page_size_bytes) + " pages";
  if (!r.written) {
    if (r.now == r.asked.pages) return node + std::to_string(r.now) + " " + pages + ", as asked";
    return node + std::to_string(r.now) + " " + pages + ", more than the " + std::to_string(r.asked.pages) +
           " asked: left as it is";
  }
  std::string text = node + std::to_string(r.now) + " of " + std::to_string(r.asked.pages) + " " + pages + " (was " +
                     std::to_string(r.before) + ")";
  if (r.short_of_request()) text += ": the kernel found memory for no more";
  return text;
}

}  // namespace hostagent::hugepages
