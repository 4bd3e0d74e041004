// daemon/timeline: phases measured as they end.
#include "timeline.hpp"

#include <utility>

#include "hostagent/common/text.hpp"
#include "hostagent/render/guest_renderer.hpp"

namespace hostagent::daemon {

Timeline::Timeline(Context& context, std::string vm)
    : context_(context), vm_(std::move(vm)), last_(context.clock->steady_now()) {}

void Timeline::mark(std::string_view phase, std::string detail) {
  const auto now = context_.clock->steady_now();
  const double seconds = std::chrono::duration<double>(now - last_).count();
  last_ = now;
  ++marks_;
  context_.operations.phase(
      vm_, TimelinePhase{std::string(phase), rfc3339_ms(context_.clock->now()), seconds, std::move(detail)});
}

std::string launch_detail(const vmtemplates::VmTemplate& shape, const numa::Placement& placement) {
  const auto cells = placement.cells.size();
  const int threads = render::allocation_threads(shape, placement);
  return text::binary_size(shape.memory_bytes) + " in " + text::binary_size(shape.hugepage_size_bytes) + " pages, " +
         std::to_string(cells) + (cells == 1 ? " cell, " : " cells, ") + std::to_string(threads) +
         (threads == 1 ? " allocation thread per cell" : " allocation threads per cell");
}

}  // namespace hostagent::daemon
