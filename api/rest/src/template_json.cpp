// api/rest: templates as JSON.
#include "hostagent/api/template_json.hpp"

#include <cstdio>

namespace hostagent::api {
namespace {

std::string hex4(uint16_t value) {
  char text[8];
  std::snprintf(text, sizeof(text), "0x%04x", value);
  return text;
}

boost::json::value optional_int(const std::optional<int>& value) {
  if (!value) return nullptr;
  return *value;
}

boost::json::object gpus_json(const vmtemplates::GpuSpec& gpus) {
  boost::json::array ids;
  for (const auto& id : gpus.ids) ids.push_back({{"vendor_id", hex4(id.vendor_id)}, {"device_id", hex4(id.device_id)}});
  return {{"count", gpus.count}, {"model", gpus.model}, {"ids", std::move(ids)}};
}

boost::json::object nics_json(const vmtemplates::NicSpec& nics) {
  const auto& vf = nics.vf;
  return {{"mode", nics.mode == vmtemplates::NicMode::pf ? "pf" : "vf"},
          {"vfs_per_gpu", nics.vfs_per_gpu},
          {"count", nics.count},
          {"placement", nics.placement == vmtemplates::NicPlacement::strict ? "strict" : "prefer"},
          {"vf",
           {{"mac", vf.mac == vmtemplates::MacPolicy::automatic ? "auto" : "request"},
            {"vlan", optional_int(vf.vlan)},
            {"trust", vf.trust ? boost::json::value(*vf.trust) : nullptr},
            {"spoofchk", vf.spoofchk ? boost::json::value(*vf.spoofchk) : nullptr},
            {"mtu", optional_int(vf.mtu)}}}};
}

boost::json::object boot_json(const vmtemplates::BootSpec& boot) {
  return {{"image", boot.image},
          {"cloud_init", boot.cloud_init},
          {"kernel", boot.kernel},
          {"initrd", boot.initrd},
          {"cmdline", boot.cmdline},
          {"from_nvme", boot.from_nvme},
          {"watch",
           {{"kernel_marker", boot.watch.kernel_marker},
            {"agent", boot.watch.agent},
            {"up_marker", boot.watch.up_marker},
            {"seconds", boot.watch.seconds}}}};
}

}  // namespace

boost::json::value to_json(const vmtemplates::VmTemplate& shape) {
  boost::json::object metadata;
  for (const auto& [key, value] : shape.metadata) metadata[key] = value;
  return boost::json::object{{"name", shape.name},
                             {"description", shape.description},
                             {"abstract", shape.abstract},
                             {"vcpus", shape.vcpus},
                             {"memory_bytes", shape.memory_bytes},
                             {"hugepage_size_bytes", shape.hugepage_size_bytes},
                             {"allocation_threads", shape.allocation_threads},
                             {"guest_numa", {{"mirror", shape.guest_numa.mirror}, {"cells", shape.guest_numa.cells}}},
                             {"gpus", gpus_json(shape.gpus)},
                             {"nics", nics_json(shape.nics)},
                             {"nvme", shape.nvme},
                             {"peer_to_peer", shape.peer_to_peer},
                             {"machine", shape.machine},
                             {"firmware", shape.firmware == vmtemplates::Firmware::efi ? "efi" : "bios"},
                             {"boot", boot_json(shape.boot)},
                             {"metadata", std::move(metadata)}};
}

}  // namespace hostagent::api
