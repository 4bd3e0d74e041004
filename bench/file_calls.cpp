// bench/file_calls: the --wrap'd file system calls, counted and timed.
#include "file_calls.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <stdarg.h>
#include <atomic>
#include <chrono>
#include <cstdio>

namespace hostagent::bench {
namespace {

using Clock = std::chrono::steady_clock;

std::atomic<int64_t> g_fsyncs{0};
std::atomic<int64_t> g_fsync_ns{0};
std::atomic<int64_t> g_creates{0};
std::atomic<int64_t> g_renames{0};
std::atomic<int64_t> g_unlinks{0};
std::atomic<int64_t> g_file_ops_ns{0};

int64_t ns_since(Clock::time_point start) {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now() - start).count();
}

}  // namespace

FileCalls file_calls_now() {
  return {g_fsyncs, g_fsync_ns, g_creates, g_renames, g_unlinks, g_file_ops_ns};
}

}  // namespace hostagent::bench

using hostagent::bench::g_creates;
using hostagent::bench::g_file_ops_ns;
using hostagent::bench::g_fsync_ns;
using hostagent::bench::g_fsyncs;
using hostagent::bench::g_renames;
using hostagent::bench::g_unlinks;
using hostagent::bench::ns_since;
using Clock = std::chrono::steady_clock;

// NOLINTBEGIN(bugprone-reserved-identifier): the names --wrap gives
extern "C" int __real_fsync(int fd);
extern "C" int __real_open(const char* path, int flags, ...);
extern "C" int __real_rename(const char* from, const char* to);
extern "C" int __real_unlink(const char* path);

extern "C" int __wrap_fsync(int fd) {
  const auto start = Clock::now();
  const int rc = __real_fsync(fd);
  g_fsync_ns += ns_since(start);
  ++g_fsyncs;
  return rc;
}

extern "C" int __wrap_open(const char* path, int flags, ...) {
  mode_t mode = 0;
  if ((flags & O_CREAT) != 0 || (flags & O_TMPFILE) == O_TMPFILE) {
    va_list args;
    va_start(args, flags);
    mode = va_arg(args, mode_t);
    va_end(args);
  }
  // Reads (a backing image's header, a record read back) are not what durability costs.
  if ((flags & O_CREAT) == 0) return __real_open(path, flags, mode);
  const auto start = Clock::now();
  const int fd = __real_open(path, flags, mode);
  g_file_ops_ns += ns_since(start);
  ++g_creates;
  return fd;
}

extern "C" int __wrap_rename(const char* from, const char* to) {
  const auto start = Clock::now();
  const int rc = __real_rename(from, to);
  g_file_ops_ns += ns_since(start);
  ++g_renames;
  return rc;
}

extern "C" int __wrap_unlink(const char* path) {
  const auto start = Clock::now();
  const int rc = __real_unlink(path);
  g_file_ops_ns += ns_since(start);
  ++g_unlinks;
  return rc;
}
// NOLINTEND(bugprone-reserved-identifier)
