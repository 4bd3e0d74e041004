// daemon/timeline: phases measured as they end.
#include "timeline.hpp"

#include <utility>

#include "daemon_log.hpp"
#include "guest_watch.hpp"
#include "hostagent/common/text.hpp"
#include "hostagent/render/guest_renderer.hpp"

namespace hostagent::daemon {
namespace {

constexpr std::chrono::milliseconds kStartEventsWait{10000};

}  // namespace

Timeline::Timeline(Recording& recording, std::string vm)
    : recording_(recording), vm_(std::move(vm)), last_(recording.clock.steady_now()) {}

void Timeline::mark(std::string_view phase, std::string detail) {
  const auto now = recording_.clock.steady_now();
  const double seconds = std::chrono::duration<double>(now - last_).count();
  last_ = now;
  ++marks_;
  recording_.operations.phase(
      vm_, service::TimelinePhase{std::string(phase), rfc3339_ms(recording_.clock.now()), seconds, std::move(detail)});
}

Status resume_watched(VmWork& work, Timeline& timeline, const std::string& vm, const vmtemplates::BootWatch& watch) {
  GuestWatchRequest request;
  request.vm = vm;
  request.watch = watch;
  request.console = console_log_path(work.facts.config, vm);
  if (request.console) {
    // Appended across boots: this boot's output is what comes after the size now, with the vCPUs
    // not yet run.
    std::error_code ec;
    const auto size = std::filesystem::file_size(*request.console, ec);
    request.console_from = ec ? 0 : size;
  }
  const auto resumed_before = work.effects.ledger.resumed_events(vm);
  HA_TRY_STATUS(work.effects.hypervisor.resume(vm));
  timeline.mark(kResumePhase);
  // The start ends once libvirt's events of it are in: a late suspended event would show the VM
  // paused after its start succeeded. Events lost with the connection cannot hold it for long.
  if (!work.effects.ledger.wait_resumed(vm, resumed_before, kStartEventsWait)) {
    log(LogLevel::warning,
        vm + ": libvirt's resumed event did not come within " + std::to_string(kStartEventsWait.count()) +
            " ms of the resume; its state is read from libvirt instead",
        {.vm = vm});
  }
  const auto operation = work.recording.operations.running_id(vm);
  if (!request.console || !operation) return ok_status();
  request.operation = *operation;
  request.resumed = timeline.last_mark();
  work.guest_watch.watch(std::move(request));
  return ok_status();
}

std::string launch_detail(const vmtemplates::VmTemplate& shape, const numa::Placement& placement) {
  const auto cells = placement.cells.size();
  const int threads = render::allocation_threads(shape, placement);
  return text::binary_size(shape.memory_bytes) + " in " + text::binary_size(shape.hugepage_size_bytes) + " pages, " +
         std::to_string(cells) + (cells == 1 ? " cell, " : " cells, ") + std::to_string(threads) +
         (threads == 1 ? " allocation thread per cell" : " allocation threads per cell");
}

}  // namespace hostagent::daemon
