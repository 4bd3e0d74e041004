// render/mmio_window: sizing of the 64-bit MMIO window (rule in mmio_window.hpp).
#include "mmio_window.hpp"

#include <algorithm>
#include <bit>

namespace hostagent::render::detail {
namespace {

constexpr uint64_t kQemuQ35DefaultHole64 = 32ULL << 30;  // Q35_PCI_HOST_HOLE64_SIZE_DEFAULT
constexpr int kExpansionRomBar = 6;

}  // namespace

MmioWindow size_mmio_window(const std::vector<const numa::PciFunction*>& functions) {
  MmioWindow window;
  for (const auto* function : functions) {
    for (const auto& bar : function->bars) {
      if (bar.index < kExpansionRomBar && bar.is_64bit && bar.prefetchable) {
        window.prefetchable_bar_bytes += bar.size_bytes;
      }
    }
  }
  if (window.prefetchable_bar_bytes == 0) return window;
  window.window_bytes = std::max(std::bit_ceil(2 * window.prefetchable_bar_bytes), kQemuQ35DefaultHole64);
  return window;
}

}  // namespace hostagent::render::detail
