// vmtemplates/shape_request: a shape's request to placement.
#include "hostagent/vmtemplates/shape_request.hpp"

namespace hostagent::vmtemplates {

numa::PlacementRequest placement_request(const VmTemplate& shape) {
  numa::PlacementRequest request;
  request.vcpus = shape.vcpus;
  request.memory_bytes = shape.memory_bytes;
  request.hugepage_size_bytes = shape.hugepage_size_bytes;
  request.gpus = shape.gpus.count;
  for (const auto& id : shape.gpus.ids) request.gpu_ids.push_back(numa::DeviceId{id.vendor_id, id.device_id});
  request.vfs_per_gpu = shape.nics.vfs_per_gpu;
  const bool whole = shape.nics.mode == NicMode::pf;
  request.extra_vfs = whole ? 0 : shape.nics.count;
  request.whole_nics = whole ? shape.nics.count : 0;
  request.nic_strict = shape.nics.placement == NicPlacement::strict;
  request.nvme = shape.nvme;
  request.peer_to_peer = shape.peer_to_peer;
  if (!shape.guest_numa.mirror) request.guest_cells = shape.guest_numa.cells;
  return request;
}

int vf_count(const VmTemplate& shape) {
  const auto request = placement_request(shape);
  return request.gpus * request.vfs_per_gpu + request.extra_vfs;
}

}  // namespace hostagent::vmtemplates
