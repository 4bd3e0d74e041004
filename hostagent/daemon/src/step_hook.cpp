// daemon/step_hook: the crash tests' pause point.
#include "hostagent/daemon/step_hook.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <condition_variable>
#include <mutex>

namespace hostagent::daemon {
namespace {

class PauseAtStep final : public StepHook {
 public:
  PauseAtStep(std::string operation_step, std::filesystem::path marker)
      : operation_step_(std::move(operation_step)), marker_(std::move(marker)) {}

  void before_step(const std::string& operation, const std::string& vm, const std::string& step) override {
    const std::string at = operation + ":" + step;
    if (at != operation_step_ && at + ":" + vm != operation_step_) return;
    write_marker(vm);
    // Block only this operation's thread: the test kills the process while it waits here.
    std::unique_lock lock(mutex_);
    never_.wait(lock, [] { return false; });
  }

 private:
  void write_marker(const std::string& vm) const {
    const int fd = ::open(marker_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0) return;
    const std::string text = operation_step_ + " " + vm + "\n";
    [[maybe_unused]] const auto written = ::write(fd, text.data(), text.size());
    ::close(fd);
  }

  std::string operation_step_;
  std::filesystem::path marker_;
  std::mutex mutex_;
  std::condition_variable never_;
};

}  // namespace

std::shared_ptr<StepHook> pause_at_step(const std::string& operation_step, const std::filesystem::path& marker) {
  return std::make_shared<PauseAtStep>(operation_step, marker);
}

}  // namespace hostagent::daemon
