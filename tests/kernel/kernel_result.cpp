// Real-kernel harness, one guest test case as a CTest test: `kernel_result RUN_DIR NAME` prints what
// the case printed inside the guest and exits with its exit status, from the log the boot fixture
// (kernel_boot.cpp) left in RUN_DIR. A case that never ran or never ended is a failure that shows
// the end of the guest's console; a skipped boot is a skip ("SKIPPED: ...").
#include <fstream>
#include <iostream>
#include <optional>
#include <sstream>
#include <string>

#include "harness/guest_results.hpp"

namespace {

using namespace hostagent::testing::kernel;

std::optional<std::string> read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return std::nullopt;
  std::ostringstream out;
  out << in.rdbuf();
  return out.str();
}

int fail(const std::string& run_dir, const std::string& why) {
  std::cout << "FAILED: " << why << "\n";
  const auto console = read_file(run_dir + "/" + kConsoleLog);
  if (console)
    std::cout << "the guest's console (" << run_dir << "/" << kConsoleLog << "), last lines:\n"
              << tail_lines(*console, 30) << "\n";
  return 1;
}

int report(const std::string& run_dir, const std::string& name) {
  const auto status = read_file(run_dir + "/" + kStatusFile);
  if (!status) return fail(run_dir, "the emulated GPU host was not booted: run the fixture test kernel:boot first");
  if (status->starts_with("skipped: ")) {
    std::cout << "SKIPPED: " << status->substr(9);
    return 0;
  }
  const GuestRun run = parse_guest_run(read_file(run_dir + "/" + kResultsLog).value_or(""));
  const GuestTestResult* result = find_result(run, name);
  if (result == nullptr) return fail(run_dir, "the guest never ran \"" + name + "\"");
  std::cout << result->output;
  if (!result->exit_code) return fail(run_dir, "\"" + name + "\" never ended in the guest (a hang or a panic)");
  if (*result->exit_code >= 128) {
    std::cout << "FAILED: the guest killed it with signal " << *result->exit_code - 128 << " (a timeout is SIGTERM)\n";
  } else if (*result->exit_code != 0) {
    std::cout << "FAILED: it exited with " << *result->exit_code << " in the guest\n";
  }
  return *result->exit_code == 0 ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 3) {
    std::cerr << "usage: kernel_result RUN_DIR TEST_CASE_NAME\n";
    return 2;
  }
  return report(argv[1], argv[2]);
}
