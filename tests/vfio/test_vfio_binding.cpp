// VfioBinder against the fake kernel: binding a group to vfio-pci and back leaves the tree as it
// was, refusals change nothing, and a failure at any write is undone (bind) or named (release).
#include <doctest/doctest.h>

#include <cerrno>
#include <filesystem>

#include "fake_host.hpp"
#include "hostagent/vfio/vfio_binding.hpp"
#include "test_support.hpp"

namespace hostagent::vfio {
namespace {

using testing::builtin_spec;
using testing::describe_difference;
using testing::FakeHost;

const std::string kGpu = "0000:01:00.0";
const std::string kAudio = "0000:01:00.1";
const std::string kRootPort = "0000:00:01.0";

numa::PciAddress address(const std::string& text) {
  return numa::PciAddress::parse(text).value();
}

using hostagent::testing::contains;

// The function of the group a write is about: named in its path or in its value.
std::string device_of_write(const std::pair<std::string, std::string>& write) {
  const std::string text = write.first + " " + write.second;
  return contains(text, kAudio) ? kAudio : contains(text, kGpu) ? kGpu : "";
}

TEST_CASE("an iommu_group link whose name is not wholly a number is refused, naming the link, and nothing is written") {
  FakeHost host(builtin_spec("quirks"));
  const auto link = host.host("/sys/bus/pci/devices/" + kGpu + "/iommu_group");
  const auto target = std::filesystem::read_symlink(link);
  std::filesystem::remove(link);
  std::filesystem::create_symlink(target.parent_path() / (target.filename().string() + "x"), link);
  VfioBinder binder(host.sysfs(), host.kernel());
  const auto refused = binder.bind_group(address(kGpu));
  REQUIRE_FALSE(refused.ok());
  CHECK(refused.error().code == ErrorCode::parse_error);
  CHECK_MESSAGE(contains(refused.error().message, link.string()), refused.error().message);
  CHECK(host.kernel().writes().empty());
}

TEST_CASE("bind_group moves the GPU and its audio function to vfio-pci, and release restores the tree exactly") {
  FakeHost host(builtin_spec("quirks"));
  const auto before = host.snapshot();
  VfioBinder binder(host.sysfs(), host.kernel());
  const auto binding = binder.bind_group(address(kGpu));
  REQUIRE_MESSAGE(binding.ok(), binding.error().message);
  CHECK(std::to_string(binding->group) == host.group_of(kGpu));
  REQUIRE(binding->functions.size() == 2);
  CHECK(binding->functions[0].address == address(kGpu));
  CHECK(binding->functions[0].original_driver == "nvidia");
  CHECK(binding->functions[1].original_driver == "snd_hda_intel");
  for (const auto& f : binding->functions) {
    CHECK(f.original_override.empty());
    CHECK_FALSE(f.was_vfio);
    CHECK(host.driver_of(f.address.to_string()) == "vfio-pci");
    CHECK(host.read("/sys/bus/pci/devices/" + f.address.to_string() + "/driver_override") == "vfio-pci\n");
  }
  CHECK(host.exists("/dev/vfio/" + std::to_string(binding->group)));

  const auto released = binder.release(*binding);
  REQUIRE_MESSAGE(released.ok(), released.error().message);
  CHECK(describe_difference(before, host.snapshot()).empty());
  // Each function was reset before its host driver had it back, the audio function first.
  CHECK(host.drivers().reset_log() == std::vector<std::string>{kAudio, kGpu});
}

TEST_CASE("binding twice and releasing twice change nothing the second time") {
  FakeHost host(builtin_spec("quirks"));
  const auto before = host.snapshot();
  VfioBinder binder(host.sysfs(), host.kernel());
  const auto first = binder.bind_group(address(kAudio));
  REQUIRE_MESSAGE(first.ok(), first.error().message);
  const auto writes = host.kernel().writes().size();
  const auto bound = host.snapshot();

  const auto second = binder.bind_group(address(kGpu));
  REQUIRE_MESSAGE(second.ok(), second.error().message);
  CHECK(host.kernel().writes().size() == writes);
  REQUIRE(second->functions.size() == 2);
  for (const auto& f : second->functions) CHECK(f.was_vfio);
  // A binding of functions that were already on vfio-pci leaves them there.
  REQUIRE(binder.release(*second).ok());
  CHECK(describe_difference(bound, host.snapshot()).empty());

  REQUIRE(binder.release(*first).ok());
  const auto after_release = host.kernel().writes().size();
  REQUIRE(binder.release(*first).ok());
  CHECK(host.kernel().writes().size() == after_release);
  CHECK(describe_difference(before, host.snapshot()).empty());
  CHECK(host.drivers().resets(kGpu) == 1);
}

TEST_CASE("releasing a group that was never bound writes nothing") {
  FakeHost host(builtin_spec("quirks"));
  const auto before = host.snapshot();
  VfioBinder binder(host.sysfs(), host.kernel());
  const auto inspected = binder.inspect_group(address(kGpu));
  REQUIRE(inspected.ok());
  CHECK(inspected->functions.size() == 2);
  REQUIRE(binder.release(*inspected).ok());
  CHECK(host.kernel().writes().empty());
  CHECK(describe_difference(before, host.snapshot()).empty());
}

TEST_CASE("a group with a member the host is using is refused, naming the member and its driver, before any write") {
  // A workstation whose root ports lack ACS: the onboard NIC shares the GPU's group.
  auto spec = builtin_spec("workstation");
  testing::function_of(spec, "0000:03:00.0").iommu_group = testing::function_of(spec, kGpu).iommu_group;
  FakeHost host(spec);
  const auto before = host.snapshot();
  VfioBinder binder(host.sysfs(), host.kernel());
  const auto refused = binder.bind_group(address(kGpu));
  REQUIRE_FALSE(refused.ok());
  CHECK(refused.error().code == ErrorCode::conflict);
  CHECK_MESSAGE(contains(refused.error().message, "0000:03:00.0 (driver igc)"), refused.error().message);
  CHECK(contains(refused.error().message, "IOMMU group " + host.group_of(kGpu)));
  CHECK(host.kernel().writes().empty());
  CHECK(describe_difference(before, host.snapshot()).empty());

  // The operator may say the host does not need that driver.
  BinderOptions options;
  options.unbindable_drivers.push_back("igc");
  VfioBinder permissive(host.sysfs(), host.kernel(), options);
  const auto bound = permissive.bind_group(address(kGpu));
  REQUIRE_MESSAGE(bound.ok(), bound.error().message);
  CHECK(host.driver_of("0000:03:00.0") == "vfio-pci");
  REQUIRE(permissive.release(*bound).ok());
  CHECK(describe_difference(before, host.snapshot()).empty());
}

TEST_CASE("a group with a member the host uses is refused whatever its driver, naming the use, before any write") {
  // The workstation's boot NVMe shares the GPU's group (no ACS above them). nvme is a driver a VM's
  // NVMe comes from, so only the host's use, asked at the bind, stops it.
  auto spec = builtin_spec("workstation");
  testing::function_of(spec, "0000:02:00.0").iommu_group = testing::function_of(spec, kGpu).iommu_group;
  FakeHost host(spec);
  const auto before = host.snapshot();
  BinderOptions options;
  int asked = 0;
  options.host_use = [&asked]() -> Result<std::vector<numa::HostUse>> {
    ++asked;
    return std::vector<numa::HostUse>{{address("0000:02:00.0"), "nvme0n1p2 mounted at /"}};
  };
  VfioBinder binder(host.sysfs(), host.kernel(), options);
  const auto refused = binder.bind_group(address(kGpu));
  REQUIRE_FALSE(refused.ok());
  CHECK(asked == 1);
  CHECK(refused.error().code == ErrorCode::conflict);
  CHECK_MESSAGE(contains(refused.error().message, "the host uses 0000:02:00.0 (nvme0n1p2 mounted at /)"),
                refused.error().message);
  CHECK(host.kernel().writes().empty());
  CHECK(describe_difference(before, host.snapshot()).empty());

  // What the host uses cannot be read: no bind on a guess.
  options.host_use = []() -> Result<std::vector<numa::HostUse>> {
    return Error{ErrorCode::io_error, "read /proc/self/mountinfo: Permission denied"};
  };
  VfioBinder blind(host.sysfs(), host.kernel(), options);
  const auto unknown = blind.bind_group(address(kGpu));
  REQUIRE_FALSE(unknown.ok());
  CHECK(contains(unknown.error().message, "mountinfo"));
  CHECK(host.kernel().writes().empty());

  // A use elsewhere on the host does not hold this group back.
  options.host_use = []() -> Result<std::vector<numa::HostUse>> {
    return std::vector<numa::HostUse>{{address("0000:03:00.0"), "enp3s0 carries the default route"}};
  };
  VfioBinder other(host.sysfs(), host.kernel(), options);
  const auto bound = other.bind_group(address(kGpu));
  REQUIRE_MESSAGE(bound.ok(), bound.error().message);
  REQUIRE(other.release(*bound).ok());
  CHECK(describe_difference(before, host.snapshot()).empty());
}

TEST_CASE("a bridge in the group stays with its driver, and a bridge cannot be bound itself") {
  // A root port without ACS shares the group of the devices beneath it.
  auto spec = builtin_spec("quirks");
  testing::function_of(spec, kRootPort).iommu_group = testing::function_of(spec, kGpu).iommu_group;
  FakeHost host(spec);
  const auto before = host.snapshot();
  VfioBinder binder(host.sysfs(), host.kernel());
  const auto binding = binder.bind_group(address(kGpu));
  REQUIRE_MESSAGE(binding.ok(), binding.error().message);
  CHECK(binding->functions.size() == 2);
  CHECK(host.driver_of(kRootPort) == "pcieport");
  REQUIRE(binder.release(*binding).ok());
  CHECK(describe_difference(before, host.snapshot()).empty());

  const auto bridge = binder.bind_group(address(kRootPort));
  REQUIRE_FALSE(bridge.ok());
  CHECK(bridge.error().code == ErrorCode::invalid_argument);
}

TEST_CASE("a failure at each write of bind_group leaves the tree exactly as it was") {
  // One host throughout: each rollback must leave it as the next attempt expects to find it.
  FakeHost host(builtin_spec("quirks"));
  const auto before = host.snapshot();
  VfioBinder binder(host.sysfs(), host.kernel());
  const auto clean = binder.bind_group(address(kGpu));
  REQUIRE(clean.ok());
  const std::size_t clean_writes = host.kernel().writes().size();
  // driver_override, unbind, drivers_probe for each of the two functions.
  REQUIRE(clean_writes == 6);
  REQUIRE(binder.release(*clean).ok());
  REQUIRE(describe_difference(before, host.snapshot()).empty());
  for (std::size_t nth = 1; nth <= clean_writes; ++nth) {
    CAPTURE(nth);
    const int fired = host.kernel().faults_fired();
    host.kernel().fail_write(".*", EIO, static_cast<int>(nth));
    const auto failed = binder.bind_group(address(kGpu));
    REQUIRE_FALSE(failed.ok());
    CHECK(host.kernel().faults_fired() == fired + 1);
    CHECK_MESSAGE(contains(failed.error().message, "Input/output error"), failed.error().message);
    CHECK_MESSAGE(contains(failed.error().message, "went back"), failed.error().message);
    CHECK(describe_difference(before, host.snapshot()).empty());
  }
}

TEST_CASE("a failure at each write of release names the function that stayed, and a second release finishes") {
  FakeHost host(builtin_spec("quirks"));
  const auto before = host.snapshot();
  VfioBinder binder(host.sysfs(), host.kernel());
  std::vector<std::pair<std::string, std::string>> release_writes;
  {
    const auto binding = binder.bind_group(address(kGpu));
    REQUIRE(binding.ok());
    const auto bind_writes = host.kernel().writes().size();
    REQUIRE(binder.release(*binding).ok());
    release_writes.assign(host.kernel().writes().begin() + static_cast<long>(bind_writes),
                          host.kernel().writes().end());
  }
  // reset, unbind, driver_override, drivers_probe for each function.
  REQUIRE(release_writes.size() == 8);
  for (std::size_t nth = 1; nth <= release_writes.size(); ++nth) {
    CAPTURE(nth);
    const std::string stayed = device_of_write(release_writes[nth - 1]);
    const std::string other = stayed == kGpu ? kAudio : kGpu;
    const auto binding = binder.bind_group(address(kGpu));
    REQUIRE(binding.ok());
    host.kernel().fail_write(".*", EIO, static_cast<int>(nth));
    const auto failed = binder.release(*binding);
    REQUIRE_FALSE(failed.ok());
    const std::string& message = failed.error().message;
    CHECK_MESSAGE(contains(message, "1 of 2 functions did not go back: " + stayed), message);
    CHECK_FALSE(contains(message, other));
    CHECK(host.driver_of(other) == (other == kGpu ? "nvidia" : "snd_hda_intel"));
    if (contains(release_writes[nth - 1].first, "/reset")) {
      // Never handed to the host driver without its reset.
      CHECK(host.driver_of(stayed) == "vfio-pci");
      CHECK(contains(message, "reset failed"));
    }
    const auto retried = binder.release(*binding);
    REQUIRE_MESSAGE(retried.ok(), retried.error().message);
    CHECK(describe_difference(before, host.snapshot()).empty());
  }
}

TEST_CASE("without vfio-pci loaded, bind_group names the driver directory and modprobe, and writes nothing") {
  FakeHost host(builtin_spec("quirks"));
  std::filesystem::remove_all(host.host("/sys/bus/pci/drivers/vfio-pci"));
  const auto before = host.snapshot();
  VfioBinder binder(host.sysfs(), host.kernel());
  const auto failed = binder.bind_group(address(kGpu));
  REQUIRE_FALSE(failed.ok());
  CHECK(failed.error().code == ErrorCode::not_found);
  CHECK(contains(failed.error().message, "modprobe vfio-pci"));
  CHECK(contains(failed.error().message, host.host("/sys/bus/pci/drivers/vfio-pci").string()));
  CHECK(host.kernel().writes().empty());
  CHECK(describe_difference(before, host.snapshot()).empty());
}

TEST_CASE("a vfio-pci probe that binds nothing is reported with the driver link and the group node, and undone") {
  // drivers_probe that finds no driver for the device: what a failing vfio-pci probe looks like
  // from userspace (the write succeeds, dmesg says why).
  FakeHost host(builtin_spec("quirks"), [](testing::FakeKernel& kernel) {
    kernel.model("/sys/bus/pci/drivers_probe",
                 [](testing::FakeKernel&, const std::string&, std::string_view) { return ok_status(); });
  });
  const auto before = host.snapshot();
  VfioBinder binder(host.sysfs(), host.kernel());
  const auto failed = binder.bind_group(address(kGpu));
  REQUIRE_FALSE(failed.ok());
  const std::string& message = failed.error().message;
  CHECK_MESSAGE(contains(message, host.host("/sys/bus/pci/devices/" + kGpu + "/driver").string() + " names no driver"),
                message);
  CHECK(contains(message, host.host("/dev/vfio/" + host.group_of(kGpu)).string() + " is missing"));
  CHECK(contains(message, "modprobe vfio-pci"));
  // The rollback's drivers_probe binds nothing either, so the original driver is bound by name.
  CHECK(contains(message, "went back"));
  CHECK(host.driver_of(kGpu) == "nvidia");
  CHECK(describe_difference(before, host.snapshot()).empty());
}

TEST_CASE("the function the kernel would not bind is reported as a failure, and a refusal reports nothing") {
  std::vector<std::pair<std::string, std::string>> failures;
  BinderOptions options;
  options.on_bind_failure = [&](const numa::PciAddress& function, const std::string& why) {
    failures.emplace_back(function.to_string(), why);
  };
  SUBCASE("a probe that binds nothing: the device's own failure") {
    FakeHost host(builtin_spec("quirks"), [](testing::FakeKernel& kernel) {
      kernel.model("/sys/bus/pci/drivers_probe",
                   [](testing::FakeKernel&, const std::string&, std::string_view) { return ok_status(); });
    });
    VfioBinder binder(host.sysfs(), host.kernel(), options);
    REQUIRE_FALSE(binder.bind_group(address(kGpu)).ok());
    REQUIRE(failures.size() == 1);
    CHECK(failures[0].first == kGpu);  // the first member moved; the audio function was never tried
    CHECK_MESSAGE(contains(failures[0].second, "did not bind to vfio-pci"), failures[0].second);
  }
  SUBCASE("vfio-pci not loaded: the host's, not the device's") {
    FakeHost host(builtin_spec("quirks"));
    std::filesystem::remove_all(host.host("/sys/bus/pci/drivers/vfio-pci"));
    VfioBinder binder(host.sysfs(), host.kernel(), options);
    REQUIRE_FALSE(binder.bind_group(address(kGpu)).ok());
    CHECK(failures.empty());
  }
  SUBCASE("a member the host uses: a refusal") {
    FakeHost host(builtin_spec("quirks"));
    options.host_use = [] {
      return Result<std::vector<numa::HostUse>>(std::vector<numa::HostUse>{{address(kAudio), "reserved: audio"}});
    };
    VfioBinder binder(host.sysfs(), host.kernel(), options);
    REQUIRE_FALSE(binder.bind_group(address(kGpu)).ok());
    CHECK(failures.empty());
  }
}

TEST_CASE("release binds the original driver by name when drivers_probe picks another") {
  FakeHost host(builtin_spec("quirks"));
  REQUIRE(host.kernel().write("/sys/bus/pci/drivers/vfio-pci/new_id", "10de 2230").ok());
  host.drivers().load_first("vfio-pci");
  const auto before = host.snapshot();
  VfioBinder binder(host.sysfs(), host.kernel());
  const auto binding = binder.bind_group(address(kGpu));
  REQUIRE(binding.ok());
  const auto released = binder.release(*binding);
  REQUIRE_MESSAGE(released.ok(), released.error().message);
  CHECK(host.driver_of(kGpu) == "nvidia");
  bool bound_by_name = false;
  for (const auto& [path, value] : host.kernel().writes()) {
    bound_by_name = bound_by_name || (path == "/sys/bus/pci/drivers/nvidia/bind" && value == kGpu);
  }
  CHECK(bound_by_name);
  CHECK(describe_difference(before, host.snapshot()).empty());
}

TEST_CASE("an unbound member with a driver_override goes back unbound with its override") {
  auto spec = builtin_spec("quirks");
  testing::function_of(spec, kAudio).driver = "";
  FakeHost host(spec);
  REQUIRE(host.kernel().write("/sys/bus/pci/devices/" + kAudio + "/driver_override", "pci-stub\n").ok());
  const auto before = host.snapshot();
  VfioBinder binder(host.sysfs(), host.kernel());
  const auto binding = binder.bind_group(address(kGpu));
  REQUIRE_MESSAGE(binding.ok(), binding.error().message);
  REQUIRE(binding->functions.size() == 2);
  CHECK(binding->functions[1].original_driver.empty());
  CHECK(binding->functions[1].original_override == "pci-stub");
  CHECK(host.driver_of(kAudio) == "vfio-pci");
  REQUIRE(binder.release(*binding).ok());
  CHECK(host.driver_of(kAudio).empty());
  CHECK(describe_difference(before, host.snapshot()).empty());
}

TEST_CASE("a function someone else bound meanwhile is named, and the rest of the group still goes back") {
  FakeHost host(builtin_spec("quirks"));
  for (const char* attr : {"bind", "unbind", "new_id", "remove_id", "uevent"}) {
    host.make_file(std::string("/sys/bus/pci/drivers/pci-stub/") + attr);
  }
  VfioBinder binder(host.sysfs(), host.kernel());
  const auto binding = binder.bind_group(address(kGpu));
  REQUIRE(binding.ok());
  REQUIRE(host.kernel().write("/sys/bus/pci/devices/" + kAudio + "/driver_override", "pci-stub").ok());
  REQUIRE(host.kernel().write("/sys/bus/pci/drivers/vfio-pci/unbind", kAudio).ok());
  REQUIRE(host.kernel().write("/sys/bus/pci/drivers_probe", kAudio).ok());
  REQUIRE(host.driver_of(kAudio) == "pci-stub");
  const auto released = binder.release(*binding);
  REQUIRE_FALSE(released.ok());
  CHECK(released.error().code == ErrorCode::conflict);
  CHECK_MESSAGE(contains(released.error().message, kAudio + " (to snd_hda_intel): is bound to pci-stub"),
                released.error().message);
  CHECK(host.driver_of(kGpu) == "nvidia");
  CHECK(host.driver_of(kAudio) == "pci-stub");
}

TEST_CASE("a device not on the host, or without an IOMMU group, is an error that says what to do") {
  FakeHost host(builtin_spec("quirks"));
  VfioBinder binder(host.sysfs(), host.kernel());
  const auto missing = binder.bind_group(address("0000:77:00.0"));
  REQUIRE_FALSE(missing.ok());
  CHECK(missing.error().code == ErrorCode::not_found);
  std::filesystem::remove(host.host("/sys/bus/pci/devices/" + kGpu + "/iommu_group"));
  const auto no_group = binder.bind_group(address(kGpu));
  REQUIRE_FALSE(no_group.ok());
  CHECK(no_group.error().code == ErrorCode::unsupported);
  CHECK(contains(no_group.error().message, "intel_iommu=on"));
  CHECK(host.kernel().writes().empty());
}

TEST_CASE("a journaled binding whose driver names are not driver names is refused before any write") {
  FakeHost host(builtin_spec("quirks"));
  VfioBinder binder(host.sysfs(), host.kernel());
  GroupBinding forged;
  forged.group = 1;
  forged.functions.push_back(BoundFunction{address(kGpu), "../../../../etc", "", false});
  const auto refused = binder.release(forged);
  REQUIRE_FALSE(refused.ok());
  CHECK(refused.error().code == ErrorCode::invalid_argument);
  CHECK(host.kernel().writes().empty());
}

}  // namespace
}  // namespace hostagent::vfio
