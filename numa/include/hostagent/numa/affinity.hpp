// numa/affinity: how two PCI functions of the host reach each other, in the spirit of
// `nvidia-smi topo -m` and of NCCL's path types: through a PCIe switch they share (NCCL's PIX/PXB,
// no CPU in the path), within one NUMA node (PHB/NODE), or across the inter-socket link (SYS).
// hostagentctl's topology report prints it; the guest check (verify/) holds the booted
// guest to it.
#pragma once

#include "hostagent/numa/host_model.hpp"

namespace hostagent::numa {

enum class Affinity { self, same_switch, same_node, across_nodes, unknown };

// A shared switch is any switch upstream port in both bridge chains: two GPUs under different
// switches below one parent switch share that parent (NCCL's PXB), not only their nearest one.
Affinity affinity(const HostModel& model, const PciFunction& a, const PciFunction& b);

// "X", "SW", "NODE", "SYS", "?".
const char* affinity_label(Affinity affinity);

}  // namespace hostagent::numa
