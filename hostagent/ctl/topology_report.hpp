// hostagentctl's human view of the host model: NUMA nodes, PCIe switches with their devices, and
// the GPU/NIC affinity matrix in the spirit of `nvidia-smi topo -m`.
#pragma once

#include <string>

#include "hostagent/numa/host_model.hpp"

namespace hostagent::ctl {

// How two devices reach each other: through a PCIe switch they share, within one NUMA node, or
// across the inter-socket link.
enum class Affinity { self, same_switch, same_node, across_nodes, unknown };
Affinity affinity(const numa::HostModel& model, const numa::PciFunction& a, const numa::PciFunction& b);
const char* affinity_label(Affinity affinity);

std::string render_topology_report(const numa::HostModel& model);

}  // namespace hostagent::ctl
