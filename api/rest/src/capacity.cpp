// api/rest: free capacity per NUMA node as JSON; numa/capacity counts it, by placement's rules.
#include "capacity.hpp"

namespace hostagent::api::detail {
namespace {

boost::json::object to_json(const numa::Count& c) {
  return {{"total", c.total}, {"free", c.free}, {"cleaning", c.cleaning}, {"quarantined", c.quarantined}};
}

boost::json::object to_json(const numa::NodeCapacity& node) {
  boost::json::array pages;
  for (const auto& pool : node.hugepages) {
    pages.push_back(
        boost::json::object{{"page_size_bytes", pool.page_size_bytes}, {"total", pool.total}, {"free", pool.free}});
  }
  return {{"cpus",
           {{"total", node.cpus.total},
            {"free", node.cpus.free},
            {"housekeeping", node.cpus.housekeeping},
            {"held", node.cpus.held},
            {"offline", node.cpus.offline}}},
          {"gpus", to_json(node.gpus)},
          {"vfs", to_json(node.vfs)},
          {"nvme", to_json(node.nvme)},
          {"hugepages", std::move(pages)}};
}

}  // namespace

boost::json::value capacity_json(const numa::Capacity& capacity) {
  boost::json::array nodes;
  for (const auto& node : capacity.nodes) {
    auto object = to_json(node);
    object.emplace("node", node.node);
    nodes.push_back(std::move(object));
  }
  return boost::json::object{{"nodes", std::move(nodes)}, {"totals", to_json(capacity.totals)}};
}

}  // namespace hostagent::api::detail
