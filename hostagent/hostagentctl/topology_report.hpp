// hostagentctl's human view of the host model: NUMA nodes, PCIe switches with their devices, and
// the GPU/NIC affinity matrix in the spirit of `nvidia-smi topo -m`.
#pragma once

#include <string>

#include "hostagent/numa/host_model.hpp"

namespace hostagent::ctl {

std::string render_topology_report(const numa::HostModel& model);

}  // namespace hostagent::ctl
