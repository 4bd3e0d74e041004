// render/mmio_window: how large the guest's 64-bit PCI MMIO window must be for the devices it gets.
//
// The rule: window = next power of two >= 2 x (sum of the 64-bit prefetchable BARs of every function
// passed through), never below QEMU's q35 default of 32 GiB; no window is set when there are none.
//  - Only 64-bit prefetchable BARs count: a PCI bridge's non-prefetchable window is 32-bit, so
//    64-bit non-prefetchable BARs (NVMe) land below 4 GiB, and the expansion ROM is 32-bit too.
//  - x2: guest firmware (OVMF's PciBusDxe, SeaBIOS alike) aligns each bridge window to its largest
//    BAR and rounds it up; a bridge holding one 128 GiB BAR and a 32 MiB one needs a 256 GiB slot in
//    its parent. With one GPU per downstream port, root port and expander bus, the tree needs up to
//    about twice the raw sum (8 A100 or H100 on vela1/vela2: 1 TiB of BARs laid out in ~1.9 TiB).
//  - power of two: OVMF aligns its 64-bit aperture to the aperture size ("naturally aligned", see
//    OvmfPkg PlatformInitLib), so anything else wastes the difference anyway.
// Without it, 8 large-BAR GPUs do not fit the default window and the firmware leaves BARs
// unassigned (the guest driver then fails to map the framebuffer).
#pragma once

#include <cstdint>
#include <vector>

#include "hostagent/numa/host_model.hpp"

namespace hostagent::render::detail {

struct MmioWindow {
  uint64_t prefetchable_bar_bytes = 0;  // the sum of the 64-bit prefetchable BARs
  uint64_t window_bytes = 0;            // 0: leave QEMU's default
};

MmioWindow size_mmio_window(const std::vector<const numa::PciFunction*>& functions);

}  // namespace hostagent::render::detail
