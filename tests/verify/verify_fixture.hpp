// Test fixture for verify: a shipped template placed on a simulated host and rendered, as
// `hostagentctl verify-guest` does it (ctl::place_and_render), and the stand-in options the tests use.
#pragma once

#include <string>

#include "hostagent/verify/stand_in.hpp"
#include "render_command.hpp"

namespace hostagent::testing {

// housekeeping_cpus: a cpulist the emulator is pinned to, "" for none (as verify-guest's option).
ctl::PlacedGuest placed_guest(const std::string& template_name, const std::string& simulated_host,
                              const std::string& housekeeping_cpus = "");

// Fixed paths: the stand-in is only written, never booted, in the tests that use these. The machine
// is the recorded consoles' (one node, CPUs 0-1).
verify::StandInOptions stand_in_options();

// A recorded console of a real boot (tests/verify/consoles/NAME.log).
std::string recorded_console(const std::string& name);

}  // namespace hostagent::testing
