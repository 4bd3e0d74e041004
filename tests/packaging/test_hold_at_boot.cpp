// packaging/boot/hold-at-boot, the script modprobe runs before the nvme driver loads: run as it is,
// by the shells that run it at boot (the root file system's /bin/sh, and busybox's in an
// initramfs), over a sysfs tree of directories standing for /sys (HOSTAGENT_SYSFS): each listed
// controller that is on the bus and unbound gets "vfio-pci" in driver_override; nothing else is
// written, whatever the list holds; and it exits 0 so that nvme loads after it.
#include <doctest/doctest.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "test_support.hpp"

namespace hostagent::testing {
namespace {

namespace fs = std::filesystem;

const fs::path kScript = fs::path(HOSTAGENT_SOURCE_DIR) / "packaging/boot/hold-at-boot";

std::string read_all(const fs::path& path) {
  std::ifstream in(path);
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

// A PCI function as sysfs shows it to the script: its directory with an empty driver_override
// (the kernel shows "(null)"; the script only writes it), and a driver link when bound.
void add_function(const fs::path& sysfs, const std::string& address, const std::string& driver = "") {
  const fs::path dir = sysfs / "bus/pci/devices" / address;
  fs::create_directories(dir);
  std::ofstream(dir / "driver_override") << "";
  if (!driver.empty()) {
    fs::create_directories(sysfs / "bus/pci/drivers" / driver);
    fs::create_directory_symlink(sysfs / "bus/pci/drivers" / driver, dir / "driver");
  }
}

std::string override_of(const fs::path& sysfs, const std::string& address) {
  return read_all(sysfs / "bus/pci/devices" / address / "driver_override");
}

// The shells that run it: dash as /bin/sh on the root file system, and busybox's ash in an
// initramfs, where it is found (busybox-static, which the kernel harness installs too).
std::vector<std::vector<std::string>> shells() {
  std::vector<std::vector<std::string>> found = {{"/bin/sh"}};
  for (const char* busybox : {"/bin/busybox", "/usr/bin/busybox"}) {
    if (fs::exists(busybox)) {
      found.push_back({busybox, "sh"});
      break;
    }
  }
  return found;
}

TEST_CASE("hold-at-boot gives each listed, unbound tenant controller to vfio-pci, and writes nothing else") {
  if (shells().size() == 1) MESSAGE("SKIPPED (busybox): no busybox here; only /bin/sh runs the script");
  for (const auto& shell : shells()) {
    CAPTURE(shell.front());
    const TempDir dir;
    const fs::path sysfs = dir.path() / "sys";
    add_function(sysfs, "0000:1a:00.0");          // a tenant's, listed: held
    add_function(sysfs, "10000:e1:00.0");         // behind a VMD domain, listed: held
    add_function(sysfs, "0000:2b:00.0", "nvme");  // listed but bound already: left
    add_function(sysfs, "0000:3c:00.0");          // the host's own, not listed: left
    fs::create_directories(dir.path() / "escape");
    std::ofstream(dir.path() / "escape/driver_override") << "";
    const fs::path list = dir.path() / "held-at-boot";
    std::ofstream(list) << "# Written by hostagentd\n"
                        << "0000:1a:00.0\n"
                        << "\n"
                        << "0000:2b:00.0\n"
                        << "0000:99:00.0\n"           // not on the bus
                        << "../../../escape\n"        // not an address: never a path
                        << "0000:1A:00.0 ; reboot\n"  // not as sysfs names it
                        << "10000:e1:00.0";           // the last line without its newline

    std::vector<std::string> argv = shell;
    argv.push_back(kScript.string());
    argv.push_back(list.string());
    const auto run = run_command(argv, {"HOSTAGENT_SYSFS=" + sysfs.string()});
    CHECK_MESSAGE(run.exit_code == 0, run.output);
    CHECK(override_of(sysfs, "0000:1a:00.0") == "vfio-pci\n");
    CHECK(override_of(sysfs, "10000:e1:00.0") == "vfio-pci\n");
    CHECK(override_of(sysfs, "0000:2b:00.0").empty());
    CHECK(override_of(sysfs, "0000:3c:00.0").empty());
    CHECK(read_all(dir.path() / "escape/driver_override").empty());
    CHECK_FALSE(fs::exists(sysfs / "bus/pci/devices/0000:99:00.0"));
    // What it did, line by line, for the boot's log.
    CHECK_MESSAGE(contains(run.output, "0000:1a:00.0 held for vfio-pci"), run.output);
    CHECK_MESSAGE(contains(run.output, "0000:2b:00.0 is already bound; left as it is"), run.output);
    CHECK_MESSAGE(contains(run.output, "0000:99:00.0 is not on the bus"), run.output);
    CHECK_MESSAGE(contains(run.output, "not a PCI address"), run.output);
  }
}

TEST_CASE("hold-at-boot without a list, or with one it cannot write through, still exits 0 so that nvme loads") {
  for (const auto& shell : shells()) {
    CAPTURE(shell.front());
    const TempDir dir;
    const fs::path sysfs = dir.path() / "sys";
    add_function(sysfs, "0000:1a:00.0");
    std::vector<std::string> argv = shell;
    argv.push_back(kScript.string());
    argv.push_back((dir.path() / "absent").string());  // hostagentd never ran on this host
    const auto none = run_command(argv, {"HOSTAGENT_SYSFS=" + sysfs.string()});
    CHECK_MESSAGE(none.exit_code == 0, none.output);
    CHECK(override_of(sysfs, "0000:1a:00.0").empty());

    // driver_override that refuses the write (a directory in its place): said, and the rest goes on.
    fs::remove(sysfs / "bus/pci/devices/0000:1a:00.0/driver_override");
    fs::create_directory(sysfs / "bus/pci/devices/0000:1a:00.0/driver_override");
    add_function(sysfs, "0000:2b:00.0");
    std::ofstream(dir.path() / "list") << "0000:1a:00.0\n0000:2b:00.0\n";
    argv.back() = (dir.path() / "list").string();
    const auto refused = run_command(argv, {"HOSTAGENT_SYSFS=" + sysfs.string()});
    CHECK_MESSAGE(refused.exit_code == 0, refused.output);
    CHECK_MESSAGE(contains(refused.output, "0000:1a:00.0: driver_override could not be written"), refused.output);
    CHECK(override_of(sysfs, "0000:2b:00.0") == "vfio-pci\n");
  }
}

}  // namespace
}  // namespace hostagent::testing
