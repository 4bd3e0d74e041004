// devices/program_run (private): an operator's program run to its end or its time limit, its argv
// given to execv as it is (no shell: nothing is parsed or expanded), its output kept for the
// evidence. The GPU memory scrubber (hygiene.gpu_scrub) is the one program hostagentd runs.
#pragma once

#include <chrono>
#include <string>
#include <vector>

#include "hostagent/common/result.hpp"

namespace hostagent::devices::detail {

struct ProgramRun {
  int exit_code = -1;      // the program's exit status; -1 when a signal ended it
  bool timed_out = false;  // the time limit passed: its process group was killed (SIGKILL)
  std::string output;      // stdout and stderr together, the last 2 KiB
  double seconds = 0;
};

// Runs argv (argv[0] an absolute path) in a process group of its own, stdin from /dev/null. An
// error only when it could not be started (the program is missing, not executable).
Result<ProgramRun> run_program(const std::vector<std::string>& argv, std::chrono::milliseconds limit);

}  // namespace hostagent::devices::detail
