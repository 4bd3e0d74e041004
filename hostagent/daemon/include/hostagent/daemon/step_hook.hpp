// hostagent/daemon/step_hook: a seam at every step boundary of every operation, and of every
// device's cleaning (operation "clean", the device's address for the VM). Production runs without one; the crash tests
// install pause_at_step, which stops the daemon right before a named step so the test can SIGKILL it there and check
// what a restart makes of the half-done operation.
#pragma once

#include <filesystem>
#include <memory>
#include <string>

namespace hostagent::daemon {

class StepHook {
 public:
  virtual ~StepHook() = default;
  // Called on the operation's thread before `step` of `operation` ("create", "delete", ...) on vm.
  virtual void before_step(const std::string& operation, const std::string& vm, const std::string& step) = 0;
};

// Before step `operation:step` ("create:define"), or `operation:step:vm` for one VM or one device's
// cleaning only ("clean:reset:0000:45:00.1"), writes `marker` (so a test knows it got there) and
// blocks that operation forever. Other operations go on. A cleaning's hook runs inside its step's
// time, so its deadline ends the pause as it would a step that never returns.
std::shared_ptr<StepHook> pause_at_step(const std::string& operation_step, const std::filesystem::path& marker);

}  // namespace hostagent::daemon
