// Real-kernel harness: what the guest reports, and how the host reads it back. The guest's /init runs
// each test case of the guest program in a process of its own and writes, on its second serial
// port, the lines below around each one's output; the host parses that log into one result per test
// case, which CTest then reports one by one (kernel_result.cpp).
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace hostagent::testing::kernel {

// The marker lines, each on a line of its own:
//   hostagent-kernel-guest: tests N          (N test cases listed)
//   hostagent-kernel-guest: begin NAME
//   ...the test case's output...
//   hostagent-kernel-guest: end RC NAME      (RC: its exit status)
//   hostagent-kernel-guest: done             (after the last one, before power-off)
inline constexpr std::string_view kGuestMarker = "hostagent-kernel-guest: ";

struct GuestTestResult {
  std::string name;
  std::optional<int> exit_code;  // nullopt: it began and never ended (the guest died or timed out)
  std::string output;
};

struct GuestRun {
  std::optional<int> listed;  // how many test cases the guest program listed
  std::vector<GuestTestResult> tests;
  bool done = false;
};

// Parses the results log; carriage returns (a tty's ONLCR) are dropped.
GuestRun parse_guest_run(std::string_view log);

// The result of the test case called name, or nullptr when it never began.
const GuestTestResult* find_result(const GuestRun& run, std::string_view name);

// The files of a run directory, written by the boot fixture (kernel_boot.cpp).
inline constexpr const char* kConsoleLog = "console.log";  // the guest's ttyS0: kernel and /init
inline constexpr const char* kResultsLog = "results.log";  // the guest's ttyS1: the markers above
// "ran" once QEMU has exited, or "skipped: WHY" when a prerequisite is missing. Absent: no boot ran.
inline constexpr const char* kStatusFile = "status";

// The last `lines` lines of text, for a failure message.
std::string tail_lines(std::string_view text, int lines);

}  // namespace hostagent::testing::kernel
