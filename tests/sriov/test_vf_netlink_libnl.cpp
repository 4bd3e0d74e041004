// The libnl VfNetlink against this machine's kernel, as far as a host without SR-IOV netdevs allows:
// the errors for a netdev that does not exist and for one without VFs. Reading and setting real VFs
// runs in the QEMU guest (netdevsim) suite.
#include <doctest/doctest.h>

#include <sys/socket.h>
#include <unistd.h>

#include <linux/netlink.h>

#include "hostagent/sriov/vf_netlink.hpp"
#include "test_support.hpp"

namespace hostagent::sriov {
namespace {

bool rtnetlink_available() {
  const int fd = ::socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_ROUTE);
  if (fd < 0) return false;
  ::close(fd);
  return true;
}

TEST_CASE("the libnl VF netlink names a netdev that does not exist") {
  if (!rtnetlink_available()) return hostagent::testing::skip("no rtnetlink socket in this sandbox");
  const auto netlink = make_libnl_vf_netlink();
  const auto read = netlink->read("hostagent-nx0", 0);
  REQUIRE_FALSE(read.ok());
  CHECK(read.error().code == ErrorCode::not_found);
  CHECK(read.error().message.find("'hostagent-nx0' does not exist") != std::string::npos);
  VfSettings settings;
  settings.trust = true;
  const auto applied = netlink->apply("hostagent-nx0", 0, settings);
  REQUIRE_FALSE(applied.ok());
  CHECK(applied.error().code == ErrorCode::not_found);
  CHECK(applied.error().message.find("hostagent-nx0") != std::string::npos);
}

TEST_CASE("the libnl VF netlink reads lo and says it has no VFs") {
  if (!rtnetlink_available()) return hostagent::testing::skip("no rtnetlink socket in this sandbox");
  const auto netlink = make_libnl_vf_netlink();
  const auto read = netlink->read("lo", 0);
  REQUIRE_FALSE(read.ok());
  CHECK(read.error().code == ErrorCode::not_found);
  CHECK(read.error().message.find("lo has no SR-IOV VFs") != std::string::npos);
  VfSettings settings;
  settings.mac = "52:54:00:00:00:01";
  const auto applied = netlink->apply("lo", 0, settings);
  REQUIRE_FALSE(applied.ok());
  CHECK(applied.error().message.find("lo has no SR-IOV VFs") != std::string::npos);
}

TEST_CASE("the libnl VF netlink refuses interface names the kernel cannot have") {
  const auto netlink = make_libnl_vf_netlink();
  for (const std::string& name : {std::string(), std::string("a-name-of-16-chr")}) {
    CAPTURE(name);
    const auto read = netlink->read(name, 0);
    REQUIRE_FALSE(read.ok());
    CHECK(read.error().code == ErrorCode::invalid_argument);
    CHECK(read.error().message.find("1 to 15 characters") != std::string::npos);
  }
}

}  // namespace
}  // namespace hostagent::sriov
