// hostagentctl as an operator runs it: the real binary, its exit codes and what it prints.
#include <doctest/doctest.h>

#include <boost/json.hpp>
#include <cstdlib>
#include <fstream>

#include "hostagent/simhost/sim_host.hpp"
#include "test_support.hpp"

namespace hostagent {
namespace {

namespace fs = std::filesystem;

std::string ctl() {
  const char* dir = std::getenv("HOSTAGENT_BINARY_DIR");
  REQUIRE_MESSAGE(dir != nullptr, "HOSTAGENT_BINARY_DIR is set by CTest");
  return (fs::path(dir) / "hostagent" / "hostagentctl").string();
}

TEST_CASE("hostagentctl topology on the live machine succeeds") {
  const auto text = testing::run_command({ctl(), "topology"});
  CHECK_MESSAGE(text.exit_code == 0, text.output);
  CHECK(text.output.find("NUMA node 0: CPUs") != std::string::npos);

  const auto json = testing::run_command({ctl(), "topology", "--json", "--sysfs-root", "/"});
  REQUIRE_MESSAGE(json.exit_code == 0, json.output);
  const auto value = boost::json::parse(json.output);
  CHECK(value.at("numa_nodes").as_array().size() >= 1);
  CHECK(value.at("source").as_string() == "sysfs:/");
}

TEST_CASE("hostagentctl topology --simulated vela2 shows switches pairing each GPU with its NIC") {
  const auto run = testing::run_command({ctl(), "topology", "--simulated", "vela2"});
  REQUIRE_MESSAGE(run.exit_code == 0, run.output);
  CHECK(run.output.find("9 PCIe switches") != std::string::npos);  // 8 GPU switches and the NVSwitch one
  CHECK(run.output.find("GPU/NIC affinity") != std::string::npos);
  const auto diff = testing::compare_golden("topology/vela2.txt", run.output);
  CHECK_MESSAGE(diff.empty(), diff);
}

TEST_CASE("hostagentctl topology on a broken root fails with the path and a non-zero exit") {
  const auto missing = testing::run_command({ctl(), "topology", "--sysfs-root", "/nonexistent/root"});
  CHECK(missing.exit_code == 1);
  CHECK(missing.output.find("/nonexistent/root") != std::string::npos);

  testing::TempDir dir;
  REQUIRE(simhost::write_sysfs_tree(simhost::builtin_host("workstation").value(), dir.path()).ok());
  const fs::path devices = dir.path() / "sys/bus/pci/devices";
  const auto first = fs::directory_iterator(devices)->path() / "numa_node";
  fs::remove(first);
  std::ofstream(first) << "\x01\x02garbage";
  const auto garbage = testing::run_command({ctl(), "topology", "--sysfs-root", dir.path().string()});
  CHECK(garbage.exit_code == 1);
  CHECK(garbage.output.find(first.string()) != std::string::npos);
}

TEST_CASE("hostagentctl refuses conflicting sources and unknown simulated hosts") {
  const auto both = testing::run_command({ctl(), "topology", "--sysfs-root", "/", "--hwloc-xml", "x.xml"});
  CHECK(both.exit_code != 0);
  CHECK(both.output.find("excludes") != std::string::npos);
  const auto unknown = testing::run_command({ctl(), "topology", "--simulated", "dgx9"});
  CHECK(unknown.exit_code == 1);
  CHECK(unknown.output.find("vela2") != std::string::npos);  // the message lists the known hosts
}

TEST_CASE("both binaries report version and build information") {
  for (const char* binary : {"hostagentctl", "hostagentd"}) {
    CAPTURE(binary);
    const auto path = (fs::path(std::getenv("HOSTAGENT_BINARY_DIR")) / "hostagent" / binary).string();
    const auto run = testing::run_command({path, "--version"});
    CHECK(run.exit_code == 0);
    CHECK(run.output.find(std::string(binary) + " 0.1.0 (commit ") != std::string::npos);
    CHECK(run.output.find("hwloc 2.") != std::string::npos);
  }
}

TEST_CASE("hostagentctl template validate: shipped templates pass, a broken one names file, line and column") {
  const fs::path shipped = fs::path(HOSTAGENT_SOURCE_DIR) / "vmtemplates/templates";
  const auto good =
      testing::run_command({ctl(), "template", "validate", (shipped / "gx3d-160x1792x8h100.yaml").string(),
                            (shipped / "cx-2x1.yaml").string()});
  CHECK_MESSAGE(good.exit_code == 0, good.output);
  CHECK(good.output.find("gx3d-160x1792x8h100.yaml: ok") != std::string::npos);

  testing::TempDir dir;
  const auto broken = dir.path() / "broken.yaml";
  std::ofstream(broken) << "name: broken\nvcpus: eight\nmemory: 8GiB\n";
  const auto bad = testing::run_command({ctl(), "template", "validate", broken.string()});
  CHECK(bad.exit_code == 1);
  CHECK(bad.output.find(broken.string() + ":2:8: vcpus") != std::string::npos);
}

}  // namespace
}  // namespace hostagent
