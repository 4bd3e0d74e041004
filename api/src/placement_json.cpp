#include "hostagent/api/placement_json.hpp"

#include <boost/json.hpp>

#include "hostagent/common/sysfs_root.hpp"
#include "hostagent/numa/affinity.hpp"

namespace hostagent::api {
namespace json = boost::json;
namespace {

json::value optional_node(const std::optional<int>& node) {
  return node ? json::value(*node) : json::value(nullptr);
}

json::object device_json(const numa::PlacedDevice& device) {
  json::object out{
      {"address", device.address.to_string()},
      {"host_node", optional_node(device.host_node)},
      {"host_switch", device.host_switch ? json::value(device.host_switch->to_string()) : json::value(nullptr)},
      {"guest_cell", device.guest_cell}};
  if (device.affinity) out["affinity"] = numa::affinity_label(*device.affinity);
  return out;
}

json::array devices_json(const std::vector<numa::PlacedDevice>& devices) {
  json::array out;
  for (const auto& d : devices) out.emplace_back(device_json(d));
  return out;
}

json::object gpu_json(const numa::PlacedGpu& gpu) {
  auto out = device_json(gpu.gpu);
  json::array companions;
  for (const auto& c : gpu.companions) companions.emplace_back(c.to_string());
  out["companions"] = std::move(companions);
  out["vfs"] = devices_json(gpu.vfs);
  out["clique"] = gpu.clique;
  if (gpu.nic) {
    out["nic"] = json::object{{"address", gpu.nic->to_string()},
                              {"affinity", gpu.nic_affinity ? numa::affinity_label(*gpu.nic_affinity) : "?"}};
  }
  return out;
}

json::object cell_json(const numa::GuestCell& cell) {
  json::array pins;
  for (size_t i = 0; i < cell.vcpus.size(); ++i) {
    pins.emplace_back(json::object{{"vcpu", cell.vcpus[i]}, {"host_cpu", cell.host_cpus.at(i)}});
  }
  return json::object{{"id", cell.id},
                      {"host_node", cell.host_node},
                      {"vcpus", format_cpu_list(cell.vcpus)},
                      {"host_cpus", format_cpu_list(cell.host_cpus)},
                      {"pins", std::move(pins)},
                      {"memory_bytes", cell.memory_bytes},
                      {"hugepages", cell.hugepages}};
}

}  // namespace

json::value to_json(const numa::Placement& placement) {
  json::array cells, gpus;
  for (const auto& cell : placement.cells) cells.emplace_back(cell_json(cell));
  for (const auto& gpu : placement.gpus) gpus.emplace_back(gpu_json(gpu));
  return json::object{{"cells", std::move(cells)},
                      {"gpus", std::move(gpus)},
                      {"extra_vfs", devices_json(placement.extra_vfs)},
                      {"whole_nics", devices_json(placement.whole_nics)},
                      {"nvme", devices_json(placement.nvme)},
                      {"nvswitches", devices_json(placement.nvswitches)},
                      {"emulator_cpus", format_cpu_list(placement.emulator_cpus)},
                      {"topology", json::object{{"sockets", placement.topology.sockets},
                                                {"cores", placement.topology.cores},
                                                {"threads", placement.topology.threads}}}};
}

}  // namespace hostagent::api
