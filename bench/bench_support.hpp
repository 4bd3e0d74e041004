// Shared by the benchmarks: medians of repeated timings, and the simulated vela2 host.
#pragma once

#include <stdlib.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <string>
#include <vector>

#include "hostagent/discovery/discovery.hpp"
#include "hostagent/simhost/sim_host.hpp"

namespace hostagent::bench {

// Median over `runs` samples of the mean time of `repeats` calls, in microseconds; one call first
// to warm caches. Repeats lift short work well above the clock's resolution.
inline double median_us(int runs, int repeats, const std::function<void()>& work) {
  using Clock = std::chrono::steady_clock;
  std::vector<double> samples;
  work();
  for (int i = 0; i < runs; ++i) {
    const auto start = Clock::now();
    for (int r = 0; r < repeats; ++r) work();
    samples.push_back(std::chrono::duration<double, std::micro>(Clock::now() - start).count() / repeats);
  }
  std::sort(samples.begin(), samples.end());
  return samples[samples.size() / 2];
}

[[noreturn]] inline void fail(const char* bench, const std::string& what) {
  std::fprintf(stderr, "%s: %s\n", bench, what.c_str());
  std::exit(1);
}

// Writes a built-in simulated host to a scratch directory, discovers it, and removes the directory.
inline numa::HostModel discover_builtin(const std::string& name) {
  char templ[] = "/tmp/hostagent-bench-XXXXXX";
  const std::filesystem::path root = mkdtemp(templ);
  const auto spec = simhost::builtin_host(name);
  if (!spec.ok() || !simhost::write_sysfs_tree(*spec, root).ok()) fail("bench", "could not write " + name);
  auto model = discovery::discover_from_sysfs(root);
  std::filesystem::remove_all(root);
  if (!model.ok()) fail("bench", model.error().message);
  return std::move(model).value();
}

}  // namespace hostagent::bench
