// The fake kernel's PCI driver core (tests/support/fake_pci_drivers.hpp): each write does what the
// kernel does with it, so the suites that rely on it test against the kernel's behaviour.
#include <doctest/doctest.h>

#include <cerrno>

#include "fake_host.hpp"

namespace hostagent::testing {
namespace {

const std::string kGpu = "0000:01:00.0";
const std::string kAudio = "0000:01:00.1";
const std::string kRootPort = "0000:00:01.0";
const std::string kDrivers = "/sys/bus/pci/drivers/";

std::string device(const std::string& bdf, const std::string& attribute) {
  return "/sys/bus/pci/devices/" + bdf + "/" + attribute;
}

void require_ok(const Status& status) {
  REQUIRE_MESSAGE(status.ok(), status.error().message);
}

void check_refused(const Status& status, const char* errno_text) {
  REQUIRE_FALSE(status.ok());
  CHECK_MESSAGE(status.error().message.find(errno_text) != std::string::npos, status.error().message);
}

TEST_CASE("unbind detaches the device from its driver and refuses a driver that does not have it") {
  FakeHost host(builtin_spec("workstation"));
  CHECK(host.read(device(kGpu, "uevent")).rfind("DRIVER=nvidia\n", 0) == 0);
  check_refused(host.kernel().write(kDrivers + "snd_hda_intel/unbind", kGpu), "No such device");
  check_refused(host.kernel().write(kDrivers + "nvidia/unbind", "0000:77:00.0"), "No such device");
  CHECK(host.driver_of(kGpu) == "nvidia");

  // Through the device's driver link, as `echo BDF > .../driver/unbind` does.
  require_ok(host.kernel().write(device(kGpu, "driver/unbind"), kGpu + "\n"));
  CHECK(host.driver_of(kGpu).empty());
  CHECK_FALSE(host.exists(kDrivers + "nvidia/" + kGpu));
  CHECK(host.read(device(kGpu, "uevent")).find("DRIVER=") == std::string::npos);
  CHECK(host.read(device(kGpu, "enable")) == "0\n");
  check_refused(host.kernel().write(kDrivers + "nvidia/unbind", kGpu), "No such device");
}

TEST_CASE("bind attaches a matching driver, is EBUSY while bound and ENODEV for a driver that does not match") {
  FakeHost host(builtin_spec("workstation"));
  const auto before = host.snapshot();
  check_refused(host.kernel().write(kDrivers + "nvidia/bind", kGpu), "busy");
  require_ok(host.kernel().write(kDrivers + "nvidia/unbind", kGpu));
  // vfio-pci has no id for the device and no driver_override names it.
  check_refused(host.kernel().write(kDrivers + "vfio-pci/bind", kGpu), "No such device");
  check_refused(host.kernel().write(kDrivers + "nvme/bind", kGpu), "No such device");
  require_ok(host.kernel().write(kDrivers + "nvidia/bind", kGpu + "\n"));
  CHECK(host.driver_of(kGpu) == "nvidia");
  // Links, uevent and enable as simhost wrote them: the round trip leaves no trace.
  CHECK(describe_difference(before, host.snapshot()).empty());
}

TEST_CASE("driver_override stores a name, reads (null) when cleared, and decides which driver may bind") {
  FakeHost host(builtin_spec("workstation"));
  CHECK(host.read(device(kGpu, "driver_override")) == "(null)\n");
  require_ok(host.kernel().write(device(kGpu, "driver_override"), "vfio-pci\n"));
  CHECK(host.read(device(kGpu, "driver_override")) == "vfio-pci\n");
  CHECK(host.driver_of(kGpu) == "nvidia");  // the write binds nothing by itself
  require_ok(host.kernel().write(kDrivers + "nvidia/unbind", kGpu));
  check_refused(host.kernel().write(kDrivers + "nvidia/bind", kGpu), "No such device");
  require_ok(host.kernel().write(kDrivers + "vfio-pci/bind", kGpu));
  CHECK(host.driver_of(kGpu) == "vfio-pci");
  require_ok(host.kernel().write(device(kGpu, "driver_override"), "\n"));
  CHECK(host.read(device(kGpu, "driver_override")) == "(null)\n");
  require_ok(host.kernel().write(device(kGpu, "driver_override"), "pci-stub"));
  require_ok(host.kernel().write(device(kGpu, "driver_override"), ""));
  CHECK(host.read(device(kGpu, "driver_override")) == "(null)\n");
}

TEST_CASE(
    "drivers_probe binds the override's driver when loaded, else stays unbound, and the native driver without one") {
  FakeHost host(builtin_spec("workstation"));
  require_ok(host.kernel().write(kDrivers + "nvidia/unbind", kGpu));
  require_ok(host.kernel().write(device(kGpu, "driver_override"), "pci-stub\n"));
  require_ok(host.kernel().write("/sys/bus/pci/drivers_probe", kGpu));
  CHECK(host.driver_of(kGpu).empty());
  require_ok(host.kernel().write(device(kGpu, "driver_override"), "vfio-pci\n"));
  require_ok(host.kernel().write("/sys/bus/pci/drivers_probe", kGpu));
  CHECK(host.driver_of(kGpu) == "vfio-pci");
  // A bound device is left alone.
  require_ok(host.kernel().write(device(kGpu, "driver_override"), "\n"));
  require_ok(host.kernel().write("/sys/bus/pci/drivers_probe", kGpu));
  CHECK(host.driver_of(kGpu) == "vfio-pci");
  require_ok(host.kernel().write(kDrivers + "vfio-pci/unbind", kGpu));
  require_ok(host.kernel().write("/sys/bus/pci/drivers_probe", kGpu));
  CHECK(host.driver_of(kGpu) == host.drivers().native_driver(kGpu));
  CHECK(host.driver_of(kGpu) == "nvidia");
  check_refused(host.kernel().write("/sys/bus/pci/drivers_probe", "0000:77:00.0"), "No such device");
}

TEST_CASE("a group's /dev/vfio node comes with its first vfio-pci member and goes with its last") {
  FakeHost host(builtin_spec("quirks"));
  REQUIRE(host.group_of(kGpu) == host.group_of(kAudio));
  const std::string node = "/dev/vfio/" + host.group_of(kGpu);
  CHECK(host.exists("/dev/vfio/vfio"));
  for (const auto& [bdf, driver] : {std::pair{kGpu, "nvidia"}, std::pair{kAudio, "snd_hda_intel"}}) {
    require_ok(host.kernel().write(device(bdf, "driver_override"), "vfio-pci"));
    require_ok(host.kernel().write(kDrivers + driver + "/unbind", bdf));
    require_ok(host.kernel().write("/sys/bus/pci/drivers_probe", bdf));
    CHECK(host.exists(node));
    CHECK(host.driver_of(bdf) == "vfio-pci");
    CHECK(host.exists(kDrivers + "vfio-pci/" + bdf));
  }
  require_ok(host.kernel().write(kDrivers + "vfio-pci/unbind", kGpu));
  CHECK(host.exists(node));
  require_ok(host.kernel().write(kDrivers + "vfio-pci/unbind", kAudio));
  CHECK_FALSE(host.exists(node));
  CHECK(host.exists("/dev/vfio/vfio"));
}

TEST_CASE("vfio-pci refuses a bridge: bind fails with EINVAL and drivers_probe leaves it unbound") {
  FakeHost host(builtin_spec("workstation"));
  require_ok(host.kernel().write(device(kRootPort, "driver_override"), "vfio-pci"));
  require_ok(host.kernel().write(kDrivers + "pcieport/unbind", kRootPort));
  check_refused(host.kernel().write(kDrivers + "vfio-pci/bind", kRootPort), "Invalid argument");
  require_ok(host.kernel().write("/sys/bus/pci/drivers_probe", kRootPort));
  CHECK(host.driver_of(kRootPort).empty());
}

TEST_CASE("reset takes only 1, needs a reset method, and is counted per device") {
  FakeHost host(builtin_spec("workstation"));
  require_ok(host.kernel().write(device(kGpu, "reset"), "1\n"));
  CHECK(host.drivers().resets(kGpu) == 1);
  check_refused(host.kernel().write(device(kGpu, "reset"), "0"), "Invalid argument");
  check_refused(host.kernel().write(device(kGpu, "reset"), "yes"), "Invalid argument");
  // reset_method_store with "" disables every method (pci-sysfs.c): the plain store does the same here.
  require_ok(host.kernel().write(device(kGpu, "reset_method"), ""));
  check_refused(host.kernel().write(device(kGpu, "reset"), "1"), "Inappropriate ioctl");
  CHECK(host.drivers().resets(kGpu) == 1);
  // A bridge has no reset attribute here (simhost writes none), so the write finds no file.
  check_refused(host.kernel().write(device(kRootPort, "reset"), "1"), "No such file");
  CHECK(host.drivers().reset_log() == std::vector<std::string>{kGpu});
}

TEST_CASE("new_id lets a driver match without an override and binds the unbound devices it now matches") {
  FakeHost host(builtin_spec("workstation"));
  require_ok(host.kernel().write(kDrivers + "nvidia/unbind", kGpu));
  require_ok(host.kernel().write(kDrivers + "vfio-pci/new_id", "10de 2230\n"));
  CHECK(host.driver_of(kGpu) == "vfio-pci");
  check_refused(host.kernel().write(kDrivers + "vfio-pci/new_id", "10de 2230"), "File exists");
  check_refused(host.kernel().write(kDrivers + "vfio-pci/new_id", "10de"), "Invalid argument");
  // nvidia's own table has the id already.
  check_refused(host.kernel().write(kDrivers + "nvidia/new_id", "10de 2230"), "File exists");
  require_ok(host.kernel().write(kDrivers + "vfio-pci/remove_id", "10de 2230"));
  CHECK(host.driver_of(kGpu) == "vfio-pci");  // removing an id unbinds nothing
  check_refused(host.kernel().write(kDrivers + "vfio-pci/remove_id", "10de 2230"), "No such device");
}

TEST_CASE("the driver registered first gets first pick in drivers_probe") {
  FakeHost host(builtin_spec("workstation"));
  require_ok(host.kernel().write(kDrivers + "vfio-pci/new_id", "10de 2230"));
  CHECK(host.driver_of(kGpu) == "nvidia");  // bound devices stay
  require_ok(host.kernel().write(kDrivers + "nvidia/unbind", kGpu));
  require_ok(host.kernel().write("/sys/bus/pci/drivers_probe", kGpu));
  CHECK(host.driver_of(kGpu) == "nvidia");
  host.drivers().load_first("vfio-pci");
  require_ok(host.kernel().write(kDrivers + "nvidia/unbind", kGpu));
  require_ok(host.kernel().write("/sys/bus/pci/drivers_probe", kGpu));
  CHECK(host.driver_of(kGpu) == "vfio-pci");
}

TEST_CASE("an injected failure changes nothing and the next write goes through") {
  FakeHost host(builtin_spec("workstation"));
  const auto before = host.snapshot();
  host.kernel().fail_write(".*/unbind", EIO);
  check_refused(host.kernel().write(kDrivers + "nvidia/unbind", kGpu), "Input/output error");
  CHECK(describe_difference(before, host.snapshot()).empty());
  require_ok(host.kernel().write(kDrivers + "nvidia/unbind", kGpu));
  CHECK(host.driver_of(kGpu).empty());
}

}  // namespace
}  // namespace hostagent::testing
