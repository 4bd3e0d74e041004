// --version of both binaries: version, git commit, build type and compiler, and the libraries
// (libvirt as loaded now, compared with what this test process loads; Boost as both were built with).
#include <doctest/doctest.h>

#include <libvirt/libvirt.h>

#include <boost/version.hpp>
#include <regex>

#include "systemd_fixture.hpp"
#include "test_support.hpp"

namespace hostagent::testing {
namespace {

std::string libvirt_version() {
  unsigned long version = 0;
  REQUIRE(virGetVersion(&version, nullptr, nullptr) == 0);
  return std::to_string(version / 1000000) + "." + std::to_string(version / 1000 % 1000) + "." +
         std::to_string(version % 1000);
}

TEST_CASE("version: both binaries print version, commit, build type, compiler and library versions") {
  const std::string boost = std::to_string(BOOST_VERSION / 100000) + "." + std::to_string(BOOST_VERSION / 100 % 1000) +
                            "." + std::to_string(BOOST_VERSION % 100);
  for (const std::string binary : {"hostagentd", "hostagentctl"}) {
    CAPTURE(binary);
    const auto run = run_command({hostagent_binary(binary), "--version"});
    CAPTURE(run.output);
    REQUIRE(run.exit_code == 0);
    // "hostagentd 0.1.0 (commit 151ff6e1a2b3, RelWithDebInfo build, GNU 12.2.0)"
    const std::regex first(binary +
                           R"( \d+\.\d+\.\d+ \(commit ([0-9a-f]{12}|unknown), \w+ build, [\w.]+ \d+\.\d+[\d.]*\)\n)");
    CHECK(std::regex_search(run.output, first));
    CHECK(run.output.find("\nlibraries: libvirt " + libvirt_version() + ", Boost " + boost + ", ") !=
          std::string::npos);
    CHECK(std::regex_search(run.output, std::regex(R"(, yaml-cpp \d+\.\d+)")));
    CHECK(std::regex_search(run.output, std::regex(R"(, hwloc \d+\.\d+)")));
    CHECK(std::regex_search(run.output, std::regex(R"(, libsystemd \d+)")));
  }
}

}  // namespace
}  // namespace hostagent::testing
