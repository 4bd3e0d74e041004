#include "verify_fixture.hpp"

#include <doctest/doctest.h>

#include <sstream>

#include "test_support.hpp"

namespace hostagent::testing {

ctl::PlacedGuest placed_guest(const std::string& template_name, const std::string& simulated_host,
                              const std::string& housekeeping_cpus) {
  ctl::RenderArgs args;
  args.housekeeping_cpus = housekeeping_cpus;
  args.template_ref = template_name;
  args.host.simulated = simulated_host;
  args.name = "verify-test";
  args.template_dirs = {testing::shipped_templates_dir()};
  std::ostringstream notes;
  auto placed = ctl::place_and_render(args, notes);
  REQUIRE_MESSAGE(placed.ok(), placed.error().message);
  return std::move(*placed);
}

verify::StandInOptions stand_in_options() {
  verify::StandInOptions options;
  options.name = "verify-stand-in";
  options.image = verify::GuestImage{"/work/vmlinuz", "/work/initramfs.cpio", "console=ttyS0 quiet"};
  options.console_log = "/work/console.log";
  // The machine the recorded consoles were booted on: one node, two CPUs.
  options.machine.nodes = {verify::MachineNode{0, {0, 1}}};
  return options;
}

std::string recorded_console(const std::string& name) {
  return read_text_file(hostagent::testing::source_dir() / "tests/verify/consoles" / (name + ".log"));
}

}  // namespace hostagent::testing
