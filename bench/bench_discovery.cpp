// Discovery speed on the largest simulated host, against hwloc on the same root in the same run:
// `lstopo-no-graphics --of xml` as a process (what an operator would run), and hwloc's load plus
// XML export in this process (the same work without process start-up). Medians of several runs;
// the machine is shared, so only ratios measured side by side mean anything.
#include <hwloc.h>
#include <sys/wait.h>
#include <unistd.h>

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

namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

double median_ms(int runs, const std::function<void()>& work) {
  std::vector<double> samples;
  work();  // warm the page cache and hwloc's component registry
  for (int i = 0; i < runs; ++i) {
    const auto start = Clock::now();
    work();
    samples.push_back(std::chrono::duration<double, std::milli>(Clock::now() - start).count());
  }
  std::sort(samples.begin(), samples.end());
  return samples[samples.size() / 2];
}

void run_lstopo(const fs::path& root) {
  const pid_t pid = fork();
  if (pid == 0) {
    // stdout is the XML; stderr is lstopo's note that Debian's hwloc has no libpci plugin. A child
    // that cannot silence them does not run lstopo: the parent sees the exit status and says so.
    if (std::freopen("/dev/null", "w", stdout) == nullptr || std::freopen("/dev/null", "w", stderr) == nullptr) {
      _exit(126);
    }
    execlp("lstopo-no-graphics", "lstopo-no-graphics", "-i", root.c_str(), "--whole-io", "--of", "xml", "-",
           static_cast<char*>(nullptr));
    _exit(127);
  }
  int status = 0;
  waitpid(pid, &status, 0);
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    std::fprintf(stderr, "lstopo-no-graphics failed (is the hwloc package installed?)\n");
    std::exit(1);
  }
}

void hwloc_load_and_export(const fs::path& root) {
  hwloc_topology_t topology = nullptr;
  hwloc_topology_init(&topology);
  hwloc_topology_set_io_types_filter(topology, HWLOC_TYPE_FILTER_KEEP_ALL);
  // As lstopo -i and hostagent do for a foreign root: no CPUID of the machine we run on.
  hwloc_topology_set_components(topology, HWLOC_TOPOLOGY_COMPONENTS_FLAG_BLACKLIST, "x86");
  setenv("HWLOC_FSROOT", root.c_str(), 1);
  hwloc_topology_load(topology);
  unsetenv("HWLOC_FSROOT");
  char* xml = nullptr;
  int length = 0;
  hwloc_topology_export_xmlbuffer(topology, &xml, &length, 0);
  hwloc_free_xmlbuffer(topology, xml);
  hwloc_topology_destroy(topology);
}

}  // namespace

int main(int argc, char** argv) {
  const int runs = argc > 1 ? std::atoi(argv[1]) : 15;
  char templ[] = "/tmp/hostagent-bench-XXXXXX";
  const fs::path root = mkdtemp(templ);
  const auto spec = hostagent::simhost::builtin_host("vela2");
  if (!spec.ok() || !hostagent::simhost::write_sysfs_tree(*spec, root).ok()) {
    std::fprintf(stderr, "could not write the vela2 fixture\n");
    return 1;
  }
  size_t functions = 0;
  const double ours = median_ms(runs, [&] {
    const auto model = hostagent::discovery::discover_from_sysfs(root);
    if (!model.ok()) {
      std::fprintf(stderr, "discovery failed: %s\n", model.error().message.c_str());
      std::exit(1);
    }
    functions = model->pci_devices.size();
  });
  const double lstopo = median_ms(runs, [&] { run_lstopo(root); });
  const double hwloc = median_ms(runs, [&] { hwloc_load_and_export(root); });
  fs::remove_all(root);

  std::printf("discovery of simulated vela2 (%zu PCI functions), median of %d runs\n", functions, runs);
  std::printf("  %-44s %8.2f ms\n", "hostagent discover_from_sysfs", ours);
  std::printf("  %-44s %8.2f ms\n", "lstopo-no-graphics --whole-io --of xml", lstopo);
  std::printf("  %-44s %8.2f ms\n", "hwloc load + XML export, in process", hwloc);
  std::printf("  ratio hostagent / lstopo          = %.2f\n", ours / lstopo);
  std::printf("  ratio hostagent / hwloc in process = %.2f\n", ours / hwloc);
  return 0;
}
