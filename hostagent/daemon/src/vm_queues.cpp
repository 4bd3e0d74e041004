// daemon/vm_queues: per-VM ordering over a thread pool.
#include "vm_queues.hpp"

#include <boost/asio/post.hpp>

namespace hostagent::daemon {

void VmQueues::post(const std::string& key, std::function<void()> task) {
  bool idle = false;
  {
    std::lock_guard lock(mutex_);
    auto& queue = queues_[key];
    queue.push_back(std::move(task));
    idle = queue.size() == 1;
  }
  // Only an idle queue needs a thread: a busy one's drain() picks the new task up.
  if (idle) boost::asio::post(pool_, [this, key] { drain(key); });
}

void VmQueues::drain(const std::string& key) {
  for (;;) {
    std::function<void()> task;
    {
      std::lock_guard lock(mutex_);
      task = queues_.at(key).front();
    }
    task();
    std::lock_guard lock(mutex_);
    auto& queue = queues_.at(key);
    queue.pop_front();
    if (queue.empty()) {
      queues_.erase(key);
      return;
    }
  }
}

int VmQueues::pending() const {
  std::lock_guard lock(mutex_);
  std::size_t count = 0;
  for (const auto& [key, queue] : queues_) count += queue.size();
  return static_cast<int>(count);
}

void VmQueues::join() {
  pool_.wait();
}

}  // namespace hostagent::daemon
