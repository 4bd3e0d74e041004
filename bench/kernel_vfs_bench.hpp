// Shared by bench_kernel_vfs (this machine) and kernel_vfs_guest (inside the emulated host): the
// statistics both print, the calibration both run (so the host can say how much slower the guest
// under TCG is than this machine), and the file that carries the round count into the guest.
#pragma once

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

namespace hostagent::bench::kernel_vfs {

// The guest reads its round count here (the host puts it into the initramfs): /init runs the guest
// program without arguments (tests/kernel/harness/initramfs.cpp).
inline constexpr const char* kRoundsFile = "/hostagent/kernel_vfs_rounds";
inline constexpr int kDefaultRounds = 11;

// The line the guest's calibration prints and the host reads back.
inline constexpr const char* kCalibrationPrefix = "kvf-calibration ";

struct Summary {
  double median_ms = 0;
  double p90_ms = 0;
  std::size_t n = 0;
};

// Nearest-rank median and 90th percentile; with few rounds the p90 is the slowest or next slowest.
inline Summary summarize(std::vector<double> samples_ms) {
  Summary s;
  s.n = samples_ms.size();
  if (samples_ms.empty()) return s;
  std::sort(samples_ms.begin(), samples_ms.end());
  s.median_ms = samples_ms[samples_ms.size() / 2];
  const auto rank = static_cast<std::size_t>(0.9 * static_cast<double>(samples_ms.size()) + 0.5);
  s.p90_ms = samples_ms[std::min(samples_ms.size() - 1, rank == 0 ? 0 : rank - 1)];
  return s;
}

inline double ms_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
}

struct Calibration {
  double cpu_ms = 0;      // a fixed integer loop
  double syscall_ms = 0;  // a fixed number of getppid(2) calls
};

// The same code on both sides, medians of 5: their ratio is how much slower the emulated CPU is at
// plain computation and at entering the kernel (TCG translates both; the guest's sysfs and netlink
// work is mostly the latter).
inline Calibration calibrate() {
  std::vector<double> cpu, sys;
  for (int run = 0; run < 5; ++run) {
    auto start = std::chrono::steady_clock::now();
    volatile uint64_t x = 1;
    for (int i = 0; i < 20'000'000; ++i) x = x * 6364136223846793005ULL + 1442695040888963407ULL;
    cpu.push_back(ms_since(start));
    start = std::chrono::steady_clock::now();
    for (int i = 0; i < 100'000; ++i) (void)getppid();
    sys.push_back(ms_since(start));
  }
  return {summarize(cpu).median_ms, summarize(sys).median_ms};
}

}  // namespace hostagent::bench::kernel_vfs
