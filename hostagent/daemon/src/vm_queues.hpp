// daemon/vm_queues (private): one FIFO per VM over a shared pool of operation threads. Commands for
// one VM run in arrival order, one at a time; commands for different VMs run in parallel. Operation
// threads may block on libvirt for seconds: that is what they are for, and why no network thread
// ever runs an operation.
#pragma once

#include <boost/asio/thread_pool.hpp>
#include <deque>
#include <functional>
#include <map>
#include <mutex>
#include <string>

namespace hostagent::daemon {

class VmQueues {
 public:
  explicit VmQueues(int threads) : pool_(static_cast<std::size_t>(threads)) {}
  ~VmQueues() { join(); }
  VmQueues(const VmQueues&) = delete;
  VmQueues& operator=(const VmQueues&) = delete;

  void post(const std::string& key, std::function<void()> task);
  // Operations queued or running, over all keys.
  int pending() const;
  // Waits for everything queued, then stops the threads.
  void join();

 private:
  void drain(const std::string& key);

  boost::asio::thread_pool pool_;
  mutable std::mutex mutex_;
  // The front task of each queue is the one running; the queue is erased when it empties.
  std::map<std::string, std::deque<std::function<void()>>> queues_;
};

}  // namespace hostagent::daemon
