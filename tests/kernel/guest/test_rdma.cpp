// Inside the emulated GPU host: soft-RoCE (rdma_rxe) on the netdevsim netdev that /init set up. The
// port is ACTIVE with the link-local GID at index 0 and the GID of the netdev's IPv4 address, RoCE
// v2, at index 1 (drivers/infiniband/core/roce_gid_mgmt.c); sysfs (drivers/infiniband/core/sysfs.c)
// and libibverbs through rdma-core's rxe provider see the same.
#include <doctest/doctest.h>
#include <infiniband/verbs.h>

#include <cstdio>
#include <memory>

#include "../emulated_host.hpp"
#include "guest_host.hpp"

namespace hostagent::testing::guest {
namespace {

namespace host = emulated_host;

std::string port_path(const std::string& attribute) {
  return "/sys/class/infiniband/" + std::string(host::kRxeDevice) + "/ports/1/" + attribute;
}

// ::ffff:192.0.2.1 as sysfs prints a GID: eight groups of four hex digits.
constexpr const char* kIpv4Gid = "0000:0000:0000:0000:0000:ffff:c000:0201";

std::string format_gid(const ibv_gid& gid) {
  std::string text;
  for (int i = 0; i < 16; i += 2) {
    char group[8];
    std::snprintf(group, sizeof group, "%02x%02x", gid.raw[i], gid.raw[i + 1]);
    text += (i == 0 ? "" : ":") + std::string(group);
  }
  return text;
}

TEST_CASE("rxe0 is ACTIVE on the netdevsim netdev with the IPv4 address's RoCE v2 GID at index 1") {
  const std::string netdev = netdevsim_netdev(host::kNetdevsimId);
  REQUIRE(!netdev.empty());
  REQUIRE_MESSAGE(sysfs().exists(port_path("state")), "/init did not create " << host::kRxeDevice);
  CHECK(sysfs().read(port_path("state")).value() == "4: ACTIVE");
  CHECK(sysfs().read(port_path("link_layer")).value() == "Ethernet");
  CHECK(sysfs().read(port_path("gids/0")).value().starts_with("fe80:0000:0000:0000:"));
  CHECK(sysfs().read(port_path("gid_attrs/types/0")).value() == "RoCE v2");
  CHECK(sysfs().read(port_path("gids/1")).value() == kIpv4Gid);
  CHECK(sysfs().read(port_path("gid_attrs/types/1")).value() == "RoCE v2");
  CHECK(sysfs().read(port_path("gid_attrs/ndevs/1")).value() == netdev);
}

TEST_CASE("libibverbs opens rxe0 through the rxe provider and agrees with sysfs on its port and GIDs") {
  int count = 0;
  const std::unique_ptr<ibv_device*, decltype(&ibv_free_device_list)> devices(ibv_get_device_list(&count),
                                                                              &ibv_free_device_list);
  REQUIRE_MESSAGE(devices != nullptr, "ibv_get_device_list failed");
  ibv_device* rxe = nullptr;
  for (int i = 0; i < count; ++i) {
    if (std::string(ibv_get_device_name(devices.get()[i])) == host::kRxeDevice) rxe = devices.get()[i];
  }
  REQUIRE_MESSAGE(rxe != nullptr, "libibverbs lists " << count << " devices and not " << host::kRxeDevice);
  const std::unique_ptr<ibv_context, decltype(&ibv_close_device)> context(ibv_open_device(rxe), &ibv_close_device);
  REQUIRE(context != nullptr);
  ibv_port_attr port{};
  REQUIRE(ibv_query_port(context.get(), 1, &port) == 0);
  CHECK(port.state == IBV_PORT_ACTIVE);
  CHECK(port.link_layer == IBV_LINK_LAYER_ETHERNET);
  ibv_gid gid{};
  REQUIRE(ibv_query_gid(context.get(), 1, 1, &gid) == 0);
  CHECK(format_gid(gid) == kIpv4Gid);
  REQUIRE(ibv_query_gid(context.get(), 1, 0, &gid) == 0);
  CHECK(format_gid(gid) == sysfs().read(port_path("gids/0")).value());
}

}  // namespace
}  // namespace hostagent::testing::guest
