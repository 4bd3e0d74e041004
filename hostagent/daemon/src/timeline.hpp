// daemon/timeline (private): where a create's or start's time goes. Each phase is marked as it
// ends, measured on the steady clock from the end of the one before, and added to the running
// operation's view (OperationTracker::phase), which keeps it with the operation's record.
#pragma once

#include <chrono>
#include <string>
#include <string_view>

#include "hostagent/numa/placement.hpp"
#include "hostagent/vmtemplates/vm_template.hpp"
#include "vm_work.hpp"

namespace hostagent::daemon {

// The phase of virDomainCreateWithFlags(START_PAUSED): libvirt's preparation, and QEMU started
// with the guest's memory allocated (zeroed) and pinned for its devices, its vCPUs not yet run.
inline constexpr std::string_view kLaunchPhase = "launch";
// virDomainResume: the vCPUs run the guest's firmware from here.
inline constexpr std::string_view kResumePhase = "resume";

// What the launch phase's time depends on: "64 GiB in 2 MiB pages on 2 host nodes, 2 allocation
// threads per cell".
std::string launch_detail(const vmtemplates::VmTemplate& shape, const numa::Placement& placement);

class Timeline;

// Runs the VM QEMU started paused and marks kResumePhase; from there its guest's own phases are
// watched (daemon/guest_watch) as `watch` says, for the operation `vm` runs now. No watch on the
// test driver, which runs no guest.
Status resume_watched(VmWork& work, Timeline& timeline, const std::string& vm, const vmtemplates::BootWatch& watch);

class Timeline {
 public:
  // Begins now: the first phase is measured from here.
  Timeline(Recording& recording, std::string vm);

  void mark(std::string_view phase, std::string detail = "");
  // How many phases have been marked: a step that marks its own phases is not marked again.
  int marks() const { return marks_; }
  // When the last phase ended (or the timeline began).
  std::chrono::steady_clock::time_point last_mark() const { return last_; }

 private:
  Recording& recording_;
  std::string vm_;
  std::chrono::steady_clock::time_point last_;
  int marks_ = 0;
};

}  // namespace hostagent::daemon
