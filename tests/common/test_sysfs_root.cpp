#include <doctest/doctest.h>

#include "hostagent/common/sysfs_root.hpp"
#include "test_support.hpp"

namespace hostagent {
namespace {

namespace fs = std::filesystem;

TEST_CASE("SysfsRoot reads kernel attributes under its root and names the path in every error") {
  testing::TempDir dir;
  testing::write_text_file(dir.path() / "sys/dev/numa_node", "-1\n");
  testing::write_text_file(dir.path() / "sys/dev/vendor", "0x10de\n");
  testing::write_text_file(dir.path() / "sys/dev/garbage", "twelve\n");
  fs::create_symlink("../../bus/pci/drivers/nvidia", dir.path() / "sys/dev/driver");
  const auto sysfs = SysfsRoot::open(dir.path()).value();

  CHECK(sysfs.read_int("/sys/dev/numa_node").value() == -1);
  CHECK(sysfs.read_hex("/sys/dev/vendor").value() == 0x10de);
  CHECK(sysfs.read_link_name("/sys/dev/driver").value() == std::optional<std::string>("nvidia"));
  CHECK_FALSE(sysfs.read_link_name("/sys/dev/missing").value().has_value());
  CHECK_FALSE(sysfs.read_optional_int("/sys/dev/missing").value().has_value());

  const auto garbage = sysfs.read_int("/sys/dev/garbage");
  REQUIRE_FALSE(garbage.ok());
  CHECK(garbage.error().code == ErrorCode::parse_error);
  CHECK(garbage.error().message.find((dir.path() / "sys/dev/garbage").string()) != std::string::npos);
  CHECK(garbage.error().message.find("\"twelve\"") != std::string::npos);

  CHECK_FALSE(sysfs.read_hex("/sys/dev/numa_node").ok());  // "-1" has no 0x prefix
  const auto missing = sysfs.read("/sys/dev/absent");
  REQUIRE_FALSE(missing.ok());
  CHECK(missing.error().code == ErrorCode::not_found);
  // A directory is not an attribute, though a stream opens it and reads nothing from it.
  const auto directory = sysfs.read("/sys/dev");
  REQUIRE_FALSE(directory.ok());
  CHECK(directory.error().message.find((dir.path() / "sys/dev").string()) != std::string::npos);
  CHECK_FALSE(sysfs.read_optional_int("/sys/dev").ok());
}

TEST_CASE("a link to a numbered entry reads as its number, and anything else is refused naming the link") {
  testing::TempDir dir;
  fs::create_directories(dir.path() / "sys/dev");
  fs::create_symlink("../../../kernel/iommu_groups/12", dir.path() / "sys/dev/iommu_group");
  fs::create_symlink("../../../kernel/iommu_groups/12abc", dir.path() / "sys/dev/junk_group");
  fs::create_symlink("../../../kernel/iommu_groups/-3", dir.path() / "sys/dev/negative_group");
  testing::write_text_file(dir.path() / "sys/dev/plain_group", "12\n");
  const auto sysfs = SysfsRoot::open(dir.path()).value();

  CHECK(sysfs.read_link_number("/sys/dev/iommu_group").value() == std::optional<int>(12));
  CHECK_FALSE(sysfs.read_link_number("/sys/dev/missing").value().has_value());
  // std::stoi would read "12abc" as 12: a trailing junk name must not pass for a group.
  for (const std::string name : {"junk_group", "negative_group", "plain_group"}) {
    CAPTURE(name);
    const auto refused = sysfs.read_link_number("/sys/dev/" + name);
    REQUIRE_FALSE(refused.ok());
    CHECK(refused.error().code == ErrorCode::parse_error);
    CHECK(testing::contains(refused.error().message, (dir.path() / "sys/dev" / name).string()));
  }
}

TEST_CASE("SysfsRoot refuses a root that is not a directory") {
  const auto missing = SysfsRoot::open("/nonexistent/hostagent-root");
  REQUIRE_FALSE(missing.ok());
  CHECK(missing.error().message.find("/nonexistent/hostagent-root") != std::string::npos);
}

TEST_CASE("cpu lists parse the kernel's cpulist format and format back to ranges") {
  CHECK(parse_cpu_list("0-3,8,10-11").value() == std::vector<int>{0, 1, 2, 3, 8, 10, 11});
  CHECK(parse_cpu_list("").value().empty());
  CHECK_FALSE(parse_cpu_list("3-1").ok());
  CHECK_FALSE(parse_cpu_list("a-b").ok());
  const auto huge = parse_cpu_list("0-2147483647");  // would loop forever and exhaust memory
  REQUIRE_FALSE(huge.ok());
  CHECK(huge.error().message.find("beyond any host") != std::string::npos);
  // Out of order, overlapping, nested and repeated ranges: sorted and unique ids, each once.
  CHECK(parse_cpu_list("10-12,2,0-3,11,1-1,3-5,12-12,4").value() == std::vector<int>{0, 1, 2, 3, 4, 5, 10, 11, 12});
  std::string repeated = "65535";
  for (int i = 0; i < 500; ++i) repeated += ",0-65535";
  const auto all = parse_cpu_list(repeated).value();
  REQUIRE(all.size() == 65536);
  CHECK(all.front() == 0);
  CHECK(all.back() == 65535);
  CHECK(format_cpu_list({0, 1, 2, 3, 8, 10, 11}) == "0-3,8,10-11");
  CHECK(format_cpu_list({}) == "");
}

}  // namespace
}  // namespace hostagent
