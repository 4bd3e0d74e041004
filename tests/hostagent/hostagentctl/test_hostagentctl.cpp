// hostagentctl as an operator runs it: the real binary, its exit codes and what it prints.
#include <doctest/doctest.h>

#include <algorithm>

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <boost/json.hpp>
#include <chrono>
#include <cstdlib>
#include <fstream>
#include <map>
#include <thread>

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

TEST_CASE("both binaries answer help for a command they have, and an error for one they do not") {
  for (const std::vector<std::string>& args :
       {std::vector<std::string>{"--help"}, {"topology", "--help"}, {"template", "validate", "--help"}}) {
    CAPTURE(args.front());
    std::vector<std::string> argv{ctl()};
    argv.insert(argv.end(), args.begin(), args.end());
    const auto help = testing::run_command(argv);
    CHECK(help.exit_code == 0);
    CHECK(testing::contains(help.output, "Usage:"));
  }
  for (const std::vector<std::string>& args :
       {std::vector<std::string>{"UNKNOWN", "--help"}, {"template", "UNKNOWN", "--help"}, {"UNKNOWN"}}) {
    CAPTURE(args);
    std::vector<std::string> argv{ctl()};
    argv.insert(argv.end(), args.begin(), args.end());
    const auto refused = testing::run_command(argv);
    CHECK(refused.exit_code != 0);
    CHECK_MESSAGE(testing::contains(refused.output, "UNKNOWN"), refused.output);
  }
  const auto daemon = (fs::path(std::getenv("HOSTAGENT_BINARY_DIR")) / "hostagent" / "hostagentd").string();
  CHECK(testing::run_command({daemon, "--help"}).exit_code == 0);
  const auto daemon_refused = testing::run_command({daemon, "UNKNOWN", "--help"});
  CHECK(daemon_refused.exit_code != 0);
  CHECK_MESSAGE(testing::contains(daemon_refused.output, "UNKNOWN"), daemon_refused.output);
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
  const fs::path& shipped = hostagent::testing::shipped_templates_dir();
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

// The line of the table whose first column is `check`.
std::string check_line(const std::string& output, const std::string& check) {
  const auto at = output.find("\n" + check + "  ");
  if (at == std::string::npos) return "";
  return output.substr(at + 1, output.find('\n', at + 1) - at - 1);
}

// vela2 is written prepared (IOMMU in passthrough, 1 GiB pages on the command line); Debian 12's
// kernel warns, and the shipped CI and A100 shapes can never be placed there: exit 1.
TEST_CASE("hostagentctl host check: verdicts with what was found, the fixes, and exit 1 on a failure") {
  const auto run = testing::run_command({ctl(), "host", "check", "--simulated", "vela2"});
  CHECK_MESSAGE(run.exit_code == 1, run.output);
  CHECK(run.output.starts_with("CHECK "));
  CHECK(check_line(run.output, "iommu passthrough").find(" pass ") != std::string::npos);
  CHECK(check_line(run.output, "kernel").find(" warn ") != std::string::npos);
  CHECK(check_line(run.output, "template gx3d-160x1792x8h100").find(" pass ") != std::string::npos);
  CHECK(check_line(run.output, "template cx-2x1").find(" fail ") != std::string::npos);
  CHECK(run.output.find("\nto fix:\n  kernel: a 6.12 or later kernel") != std::string::npos);

  const auto json = testing::run_command({ctl(), "host", "check", "--simulated", "vela2", "--json"});
  CHECK(json.exit_code == 1);
  const auto checks = boost::json::parse(json.output).at("checks").as_array();
  std::map<std::string, std::string> results;
  for (const auto& check : checks) {
    results[std::string(check.at("check").as_string())] = std::string(check.at("result").as_string());
  }
  CHECK(results.at("iommu") == "pass");
  CHECK(results.at("template gx2-80x1280x8a100") == "fail");

  const auto unreadable = testing::run_command({ctl(), "host", "check", "--hwloc-xml", "x.xml"});
  CHECK(unreadable.exit_code == 2);
  CHECK(unreadable.output.find("an hwloc capture holds no kernel state") != std::string::npos);
}

// hostagentd --simulated vela2 serving its API on a unix socket in a scratch directory, for as
// long as the test holds this; its log is kept to show when it does not come up.
class Daemon {
 public:
  explicit Daemon(const fs::path& dir) : socket_((dir / "api.sock").string()), log_(dir / "hostagentd.log") {
    const auto binary = (fs::path(std::getenv("HOSTAGENT_BINARY_DIR")) / "hostagent" / "hostagentd").string();
    const std::vector<std::string> argv = {
        binary, "--simulated", "vela2", "--state-dir", (dir / "state").string(), "--listen", "unix:" + socket_};
    fs::create_directories(dir / "state");
    pid_ = fork();
    REQUIRE(pid_ >= 0);
    if (pid_ == 0) {
      const int fd = ::open(log_.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
      dup2(fd, STDOUT_FILENO);
      dup2(fd, STDERR_FILENO);
      std::vector<char*> args;
      args.reserve(argv.size() + 1);
      for (const auto& arg : argv) args.push_back(const_cast<char*>(arg.c_str()));
      args.push_back(nullptr);
      execv(args[0], args.data());
      _exit(127);
    }
  }
  ~Daemon() {
    ::kill(pid_, SIGTERM);
    int status = 0;
    waitpid(pid_, &status, 0);
  }
  Daemon(const Daemon&) = delete;
  Daemon& operator=(const Daemon&) = delete;

  // Until `hostagentctl health` says ready (reconciled, libvirt connected), the daemon exits, or
  // two minutes pass (a loaded CI machine; on the test:/// driver it takes a second or two).
  bool ready() {
    for (int i = 0; i < 1200; ++i) {
      int status = 0;
      if (waitpid(pid_, &status, WNOHANG) == pid_) return false;
      if (fs::exists(socket_) && run({"health"}).exit_code == 0) return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    return false;
  }
  testing::CommandResult run(std::vector<std::string> args) const {
    args.insert(args.begin(), {ctl(), "--socket", socket_});
    return testing::run_command(args);
  }
  std::string log() const { return testing::read_text_file(log_); }

 private:
  std::string socket_;
  fs::path log_;
  pid_t pid_ = -1;
};

TEST_CASE("hostagentctl vm create, list, show and delete against hostagentd's API") {
  testing::TempDir dir;
  Daemon daemon(dir.path());
  REQUIRE_MESSAGE(daemon.ready(), daemon.log());
  const auto boot = dir.path() / "state" / "images" / "boot.raw";  // hostagentd made images/ under --state-dir
  std::ofstream(boot) << std::string(1 << 16, '\0');

  const auto created = daemon.run({"vm", "create", "--template", "gx3d-160x1792x8h100", "--name", "train-0",
                                   "--boot-image", boot.string(), "--request-id", "r-1"});
  REQUIRE_MESSAGE(created.exit_code == 0, (created.output + daemon.log()));
  CHECK(created.output.find("create train-0: ") != std::string::npos);  // plain progress: not a terminal
  CHECK(created.output.find("NAME") != std::string::npos);
  CHECK(created.output.find("train-0") != std::string::npos);
  CHECK(created.output.find("running") != std::string::npos);
  CHECK(created.output.find("gx3d-160x1792x8h100") != std::string::npos);

  // Two reads 5 s apart (the daemon's cache age): libvirt's test driver reports the state alone.
  const auto top = daemon.run({"vm", "top", "--interval", "5"});
  REQUIRE_MESSAGE(top.exit_code == 0, top.output);
  CHECK(top.output.rfind("VM", 0) == 0);
  CHECK_MESSAGE(top.output.find("train-0  running  -") != std::string::npos, top.output);

  const auto listed = daemon.run({"vm", "list"});
  REQUIRE_MESSAGE(listed.exit_code == 0, listed.output);
  CHECK(listed.output.rfind("NAME", 0) == 0);
  CHECK(listed.output.find("train-0") != std::string::npos);

  const auto shown = daemon.run({"vm", "show", "train-0", "--json"});
  REQUIRE_MESSAGE(shown.exit_code == 0, shown.output);
  const auto vm = boost::json::parse(shown.output);
  CHECK(vm.at("name").as_string() == "train-0");
  CHECK(vm.at("managed").as_bool());
  CHECK(vm.at("record").at("template").as_string() == "gx3d-160x1792x8h100");
  CHECK(vm.at("record").at("request_id").as_string() == "r-1");
  CHECK(vm.at("record").at("holds").at("devices").as_array().size() >= 8);
  // Every GPU of the baseboard: the NVSwitches go with them, and the record says what that gives.
  CHECK(vm.at("record").at("nvlink").as_string() ==
        "all 8 GPUs with the host's 4 NVSwitches: Fabric Manager in the guest trains the fabric");
  const auto& holds = vm.at("record").at("holds").at("devices").as_array();
  CHECK(std::count(holds.begin(), holds.end(), boost::json::value("0000:03:00.0")) == 1);
  // vela2's VFs are on mlx5_core: each has its RDMA side recorded, and `vm show` lists them.
  const auto& rdma = vm.at("record").at("rdma").as_array();
  REQUIRE(rdma.size() == 8);
  const auto table = daemon.run({"vm", "show", "train-0"});
  REQUIRE_MESSAGE(table.exit_code == 0, table.output);
  for (const auto& vf : rdma) {
    const std::string entry = std::string(vf.at("vf").as_string()) + " " +
                              std::string(vf.at("host_device").as_string()) + " ACTIVE RoCE v2 GID " +
                              std::to_string(vf.at("roce_v2_gid_index").as_int64());
    CHECK_MESSAGE(table.output.find(entry) != std::string::npos, entry << " in\n" << table.output);
  }
  // Where its create's time went, phase by phase, from the operation the daemon keeps.
  CHECK_MESSAGE(table.output.find("\nlast start: op-") != std::string::npos, table.output);
  for (const char* phase : {"\nplacement ", "\nrender ", "\nprepare_devices ", "\ndefine ", "\nlaunch "}) {
    CHECK_MESSAGE(table.output.find(phase) != std::string::npos, phase << " in\n" << table.output);
  }

  // The host's own boot disk shows who holds it, and why: the table a 3 a.m. operator reads.
  const auto devices = daemon.run({"devices"});
  REQUIRE_MESSAGE(devices.exit_code == 0, devices.output);
  REQUIRE(devices.output.find("0000:07:00.0") != std::string::npos);
  const auto boot_row = devices.output.substr(devices.output.find("0000:07:00.0"));
  CHECK_MESSAGE(
      boot_row.substr(0, boot_row.find('\n')).find("host: nvme0n1p1 mounted at /boot/efi") != std::string::npos,
      devices.output);

  const auto operations = daemon.run({"operation", "list", "--json"});
  REQUIRE_MESSAGE(operations.exit_code == 0, operations.output);
  const auto ops = boost::json::parse(operations.output).at("operations").as_array();
  REQUIRE_FALSE(ops.empty());
  CHECK(ops.front().at("kind").as_string() == "create");
  CHECK(ops.front().at("state").as_string() == "succeeded");

  // The console, through a real hostagentd: libvirt's test driver has none, and the operator is
  // told so (501), not left waiting; the terminal is never put in raw mode for it.
  const auto console = daemon.run({"vm", "console", "train-0"});
  CHECK(console.exit_code == 1);
  CHECK_MESSAGE(console.output.find("virDomainOpenConsole") != std::string::npos, console.output);

  const auto deleted = daemon.run({"vm", "delete", "train-0"});
  REQUIRE_MESSAGE(deleted.exit_code == 0, deleted.output);
  CHECK(deleted.output.find("deleted train-0") != std::string::npos);
  const auto after = daemon.run({"vm", "list", "--json"});
  REQUIRE(after.exit_code == 0);
  const auto remaining_vms = boost::json::parse(after.output);
  for (const auto& remaining : remaining_vms.at("vms").as_array()) {
    CHECK(remaining.at("name").as_string() != "train-0");  // test:///default's own domain "test" stays
  }
}

TEST_CASE("hostagentctl host cordon keeps creates out, drain stops the VMs and waits, uncordon takes VMs again") {
  testing::TempDir dir;
  Daemon daemon(dir.path());
  REQUIRE_MESSAGE(daemon.ready(), daemon.log());
  const auto boot = dir.path() / "state" / "images" / "boot.raw";
  std::ofstream(boot) << std::string(1 << 16, '\0');
  const std::vector<std::string> create{"vm",     "create",  "--template",   "gx3-16x128x1h100",
                                        "--name", "train-0", "--boot-image", boot.string()};
  const auto created = daemon.run(create);
  REQUIRE_MESSAGE(created.exit_code == 0, (created.output + daemon.log()));

  const auto cordoned = daemon.run({"host", "cordon", "--reason", "PSU swap, INC-4411"});
  REQUIRE_MESSAGE(cordoned.exit_code == 0, cordoned.output);
  CHECK(cordoned.output.find("cordoned") != std::string::npos);
  auto refused_create = create;
  refused_create[5] = "train-1";
  const auto refused = daemon.run(refused_create);
  CHECK(refused.exit_code == 1);
  CHECK_MESSAGE(refused.output.find("PSU swap, INC-4411") != std::string::npos, refused.output);
  const auto shown = daemon.run({"host", "maintenance"});
  REQUIRE(shown.exit_code == 0);
  CHECK(shown.output.find("cordoned") != std::string::npos);
  CHECK(shown.output.find("PSU swap, INC-4411") != std::string::npos);

  // The drain waits until the host is drained, each VM named as its stop ends.
  const auto drained = daemon.run({"host", "drain", "--reason", "chassis swap", "--grace", "30"});
  REQUIRE_MESSAGE(drained.exit_code == 0, drained.output);
  CHECK_MESSAGE(drained.output.find("drain train-0: stopped") != std::string::npos, drained.output);
  CHECK(drained.output.find("drained") != std::string::npos);
  const auto vm = boost::json::parse(daemon.run({"vm", "show", "train-0", "--json"}).output);
  CHECK(vm.at("state").as_string() == "shut_off");
  const auto start = daemon.run({"vm", "start", "train-0"});
  CHECK(start.exit_code == 1);
  CHECK_MESSAGE(start.output.find("drained") != std::string::npos, start.output);

  const auto back = daemon.run({"host", "uncordon", "--json"});
  REQUIRE_MESSAGE(back.exit_code == 0, back.output);
  CHECK(boost::json::parse(back.output).at("mode").as_string() == "in_service");
  CHECK(daemon.run({"vm", "start", "train-0"}).exit_code == 0);
  CHECK(daemon.run(refused_create).exit_code == 0);
}

TEST_CASE("hostagentctl quarantine lists what an earlier run quarantined, devices shows it, clear puts it back") {
  testing::TempDir dir;
  // What the daemon wrote before it stopped: a GPU whose bind failed (the simulated host's daemon
  // keeps its state in state/ under --state-dir).
  fs::create_directories(dir.path() / "state" / "state");
  std::ofstream(dir.path() / "state" / "state" / "device_states.json")
      << R"({"devices":[{"address":"0000:18:00.0","state":"quarantined","step":"bind to vfio-pci",)"
      << R"("reason":"did not bind: see dmesg","vm":"train-0","since":"2026-12-04T17:20:00Z"}]})";
  Daemon daemon(dir.path());
  REQUIRE_MESSAGE(daemon.ready(), daemon.log());

  const auto listed = daemon.run({"quarantine", "list"});
  REQUIRE_MESSAGE(listed.exit_code == 0, listed.output);
  CHECK(listed.output.rfind("ADDRESS", 0) == 0);
  CHECK_MESSAGE(listed.output.find("0000:18:00.0  2026-12-04T17:20:00Z  bind to vfio-pci  train-0  did not bind") !=
                    std::string::npos,
                listed.output);
  const auto devices = daemon.run({"devices", "--role", "gpu"});
  REQUIRE_MESSAGE(devices.exit_code == 0, devices.output);
  const auto row = devices.output.substr(devices.output.find("0000:18:00.0"));
  CHECK_MESSAGE(row.substr(0, row.find('\n')).find("QUARANTINED: bind to vfio-pci failed") != std::string::npos,
                devices.output);

  const auto cleared = daemon.run({"quarantine", "clear", "0000:18:00.0"});
  REQUIRE_MESSAGE(cleared.exit_code == 0, cleared.output);
  CHECK(cleared.output.find("cleared 0000:18:00.0") != std::string::npos);
  CHECK(daemon.run({"quarantine", "list", "--json"}).output.find("0000:18:00.0") == std::string::npos);
  const auto again = daemon.run({"quarantine", "clear", "0000:18:00.0"});
  CHECK(again.exit_code == 1);
  CHECK_MESSAGE(again.output.find("0000:18:00.0 is not quarantined") != std::string::npos, again.output);
  CHECK(daemon.log().find("quarantine: 0000:18:00.0 cleared by uid:") != std::string::npos);
}

// `devices history ADDRESS --json` until it holds a cleaning, or 30 s pass.
boost::json::value history_with_a_cleaning(const Daemon& daemon, const std::string& address) {
  boost::json::value history;
  for (int i = 0; i < 300; ++i) {
    const auto run = daemon.run({"devices", "history", address, "--json"});
    REQUIRE_MESSAGE(run.exit_code == 0, run.output);
    history = boost::json::parse(run.output);
    if (!history.at("cleanings").as_array().empty()) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  return history;
}

TEST_CASE("hostagentctl devices clean cleans a device again, cleaning list and devices history show it") {
  testing::TempDir dir;
  Daemon daemon(dir.path());
  REQUIRE_MESSAGE(daemon.ready(), daemon.log());
  const auto waiting = daemon.run({"cleaning", "list"});
  REQUIRE_MESSAGE(waiting.exit_code == 0, waiting.output);
  CHECK(waiting.output.rfind("ADDRESS  SINCE  VM  HELD BY  STEP", 0) == 0);

  const auto cleaned = daemon.run({"devices", "clean", "0000:18:00.0"});
  REQUIRE_MESSAGE(cleaned.exit_code == 0, (cleaned.output + daemon.log()));
  CHECK(cleaned.output.rfind("cleaning 0000:18:00.0 (follow it: hostagentctl events", 0) == 0);
  const auto history = history_with_a_cleaning(daemon, "0000:18:00.0");
  const auto& cleanings = history.at("cleanings").as_array();
  REQUIRE_MESSAGE(cleanings.size() == 1, boost::json::serialize(history));
  CHECK(history.at("chain").at("whole").as_bool());
  const auto sequence = std::to_string(cleanings[0].at("sequence").as_int64());
  const std::string outcome(cleanings[0].at("outcome").as_string());

  const auto shown = daemon.run({"devices", "history", "0000:18:00.0"});
  REQUIRE_MESSAGE(shown.exit_code == 0, shown.output);
  CHECK_MESSAGE(shown.output.rfind("0000:18:00.0: 1 cleaning on record\n", 0) == 0, shown.output);
  CHECK(shown.output.find("#" + sequence + " " + outcome) != std::string::npos);
  CHECK(shown.output.find("STEP") != std::string::npos);
  CHECK(shown.output.find("BROKEN") == std::string::npos);
  // The device's row says how its last cleaning ended.
  const auto devices = daemon.run({"devices", "--role", "gpu"});
  REQUIRE_MESSAGE(devices.exit_code == 0, devices.output);
  const auto row = devices.output.substr(devices.output.find("0000:18:00.0"));
  CHECK_MESSAGE(row.substr(0, row.find('\n')).find("#" + sequence + " " + outcome) != std::string::npos,
                devices.output);

  const auto unknown = daemon.run({"devices", "clean", "0000:ff:1f.7"});
  CHECK(unknown.exit_code == 1);
  CHECK_MESSAGE(unknown.output.find("hostagentctl: not_found: ") != std::string::npos, unknown.output);
  const auto malformed = daemon.run({"devices", "history", "18:00.0"});
  CHECK(malformed.exit_code == 1);
  CHECK_MESSAGE(malformed.output.find("invalid_argument") != std::string::npos, malformed.output);
}

TEST_CASE("hostagentctl exits 1 with the server's problem detail for a VM that does not exist") {
  testing::TempDir dir;
  Daemon daemon(dir.path());
  REQUIRE_MESSAGE(daemon.ready(), daemon.log());
  for (const std::vector<std::string>& args : std::vector<std::vector<std::string>>{
           {"vm", "show", "ghost"}, {"vm", "delete", "ghost"}, {"vm", "xml", "ghost"}}) {
    const auto run = daemon.run(args);
    CAPTURE(run.output);
    CHECK(run.exit_code == 1);
    CHECK(run.output.find("hostagentctl: not_found: ") != std::string::npos);
    CHECK(run.output.find("ghost") != std::string::npos);
  }
  const auto bad_template = daemon.run({"vm", "create", "--template", "no-such-shape", "--name", "x"});
  CHECK(bad_template.exit_code == 1);
  CHECK(bad_template.output.find("no-such-shape") != std::string::npos);
}

TEST_CASE("hostagentctl without a daemon names the socket and asks whether hostagentd runs") {
  testing::TempDir dir;
  const auto socket = (dir.path() / "none.sock").string();
  const auto run = testing::run_command({ctl(), "vm", "list", "--socket", socket});
  CHECK(run.exit_code == 1);
  CHECK(run.output.find("cannot connect to unix:" + socket + ": No such file or directory; is hostagentd running?") !=
        std::string::npos);
  const auto env = testing::run_command({ctl(), "status"}, {"HOSTAGENT_URL=unix:" + socket});
  CHECK(env.exit_code == 1);
  CHECK(env.output.find("unix:" + socket) != std::string::npos);
}

TEST_CASE("hostagentctl completion scripts come from the command tree") {
  const auto bash = testing::run_command({ctl(), "completion", "bash"});
  REQUIRE(bash.exit_code == 0);
  CHECK(bash.output.find("complete -o default -F _hostagentctl hostagentctl") != std::string::npos);
  CHECK(bash.output.find("\"vm:create\") cmdpath=\"vm create\"") != std::string::npos);
  CHECK(bash.output.find("--ssh-key-file") != std::string::npos);
  CHECK(bash.output.find("\"template:validate\")") != std::string::npos);
  CHECK(bash.output.find("\"devices:clean\") cmdpath=\"devices clean\"") != std::string::npos);
  CHECK(bash.output.find("\"devices:history\") cmdpath=\"devices history\"") != std::string::npos);
  CHECK(bash.output.find("\"cleaning:list\") cmdpath=\"cleaning list\"") != std::string::npos);
  if (const auto shell = testing::find_program("bash")) {
    testing::TempDir dir;
    const auto script = dir.path() / "completion.bash";
    std::ofstream(script) << bash.output;
    const auto syntax = testing::run_command({shell->string(), "-n", script.string()});
    CHECK_MESSAGE(syntax.exit_code == 0, syntax.output);
    // What bash offers after "hostagentctl --json vm cr" and after "hostagentctl vm create --tem".
    const auto offered = testing::run_command(
        {shell->string(), "-c",
         "source " + script.string() +
             "; COMP_WORDS=(hostagentctl --json vm cr); COMP_CWORD=3; _hostagentctl; echo \"[${COMPREPLY[*]}]\""
             "; COMP_WORDS=(hostagentctl vm create --tem); COMP_CWORD=3; _hostagentctl; echo \"[${COMPREPLY[*]}]\""});
    CHECK_MESSAGE(offered.output == "[create]\n[--template]\n", offered.output);
  }
  const auto zsh = testing::run_command({ctl(), "completion", "zsh"});
  REQUIRE(zsh.exit_code == 0);
  CHECK(zsh.output.rfind("#compdef hostagentctl", 0) == 0);
  CHECK(zsh.output.find("\"vm:create\")") != std::string::npos);
  CHECK(testing::run_command({ctl(), "completion", "fish"}).exit_code != 0);
}

}  // namespace
}  // namespace hostagent
