// What the host itself uses: the kernel's text formats parsed on their own, then traced down a
// simulated host's tree with the layers a real host puts between a mount or a route and its PCI
// function (LVM, an NVMe multipath head, a bond under a VLAN), and refusals seen in the model.
#include <doctest/doctest.h>

#include <fstream>
#include <set>

#include "host_use_parse.hpp"
#include "hostagent/discovery/discovery.hpp"
#include "hostagent/discovery/host_use_reader.hpp"
#include "hostagent/simhost/sim_host.hpp"
#include "test_support.hpp"

namespace hostagent::discovery {
namespace {

namespace fs = std::filesystem;
using testing::TempDir;

TEST_CASE("host use: mountinfo gives each mount's device number, source and mount point, optional tags or none") {
  const auto mounts = detail::parse_mountinfo(
      "22 1 259:2 / / rw,relatime shared:1 - ext4 /dev/nvme0n1p2 rw\n"
      "23 22 0:21 / /proc rw,nosuid - proc proc rw\n"
      "24 22 253:0 /data /srv/my\\040data rw master:3 propagate_from:2 - xfs /dev/mapper/vg-data rw\n"
      "garbage\n");
  REQUIRE(mounts.size() == 3);
  CHECK(mounts[0].device_number == "259:2");
  CHECK(mounts[0].source == "/dev/nvme0n1p2");
  CHECK(mounts[0].mount_point == "/");
  CHECK(mounts[1].device_number == "0:21");
  CHECK(mounts[2].source == "/dev/mapper/vg-data");
  CHECK(mounts[2].mount_point == "/srv/my\\040data");
  const auto plain = detail::parse_mounts("/dev/sda1 /boot ext4 rw 0 0\nproc /proc proc rw 0 0\n");
  REQUIRE(plain.size() == 2);
  CHECK(plain[0].device_number.empty());
  CHECK(plain[0].source == "/dev/sda1");
  CHECK(plain[0].mount_point == "/boot");
}

TEST_CASE("host use: swaps keep partitions, not files, and routes keep those that are up and mark the default") {
  CHECK(detail::parse_swaps("Filename Type Size Used Priority\n/dev/nvme0n1p3 partition 8388604 0 -2\n"
                            "/swapfile file 1048572 0 -3\n") == std::vector<std::string>{"/dev/nvme0n1p3"});
  const auto routes = detail::parse_routes(
      "Iface\tDestination\tGateway \tFlags\tRefCnt\tUse\tMetric\tMask\t\tMTU\tWindow\tIRTT\n"
      "eno1\t00000000\t0100000A\t0003\t0\t0\t100\t00000000\t0\t0\t0\n"
      "eno1\t0000000A\t00000000\t0001\t0\t0\t100\t00FFFFFF\t0\t0\t0\n"
      "ens9\t0000A8C0\t00000000\t0000\t0\t0\t0\t00FFFFFF\t0\t0\t0\n");  // not up
  REQUIRE(routes.size() == 2);
  CHECK(routes[0].interface == "eno1");
  CHECK(routes[0].is_default);
  CHECK_FALSE(routes[1].is_default);
}

TEST_CASE("host use: if_inet6 keeps global and site addresses, never link-local or loopback") {
  const auto addresses = detail::parse_if_inet6(
      "20010db8000000000000000000000005 04 40 00 80     ens3np0\n"
      "fe80000000000000020000fffe1b0000 05 40 20 80     ens4np0\n"
      "00000000000000000000000000000001 01 80 10 80       lo\n");
  REQUIRE(addresses.size() == 1);
  CHECK(addresses[0].interface == "ens3np0");
  CHECK(addresses[0].address == "2001:db8::5");
}

// Found by fuzz_sysfs_parsers (issue 43): a field longer than the kernel prints went to stoul,
// whose out_of_range ended the process. What no kernel writes is a line skipped.
TEST_CASE("host use: a flags or scope field longer than the kernel prints is no line of it, and throws nothing") {
  CHECK_NOTHROW(CHECK(detail::parse_if_inet6("20010db8000000000000000000000005 04 "
                                             "20010db8000000000000000000000005 04 80 ens3np0\n")
                          .empty()));
  CHECK_NOTHROW(CHECK(
      detail::parse_routes("eno1\t00000000\t0100000A\t00000000000000000000000003\t0\t0\t100\t00000000\n").empty()));
}

void write(const fs::path& path, const std::string& text) {
  fs::create_directories(path.parent_path());
  std::ofstream(path) << text;
}

void link(const fs::path& from, const fs::path& to) {
  fs::create_directories(from.parent_path());
  fs::create_directory_symlink(to, from);
}

std::set<std::pair<std::string, std::string>> found(const fs::path& root) {
  const auto uses = detect_host_use(root);
  REQUIRE_MESSAGE(uses.ok(), uses.error().message);
  std::set<std::pair<std::string, std::string>> out;
  for (const auto& use : *uses) out.emplace(use.address.to_string(), use.reason);
  return out;
}

// vela2's tree: boot NVMe 07:00.0 (nvme0), data NVMe 1a, 2b, 3c, 4d, 9c... (nvme1..), NIC PFs
// 19:00.0 (ens1np0), 2a:00.0 (ens2np0), 3b:00.0, 4c:00.0; eno1 on 81:00.0.
struct Vela2Tree {
  TempDir dir;
  fs::path root() const { return dir.path(); }
  fs::path at(const std::string& kernel_path) const { return root() / kernel_path.substr(1); }
  Vela2Tree() {
    const auto spec = simhost::builtin_host("vela2");
    REQUIRE(spec.ok());
    const auto written = simhost::write_sysfs_tree(*spec, root());
    REQUIRE_MESSAGE(written.ok(), written.error().message);
  }
};

TEST_CASE("host use: the simulated host's boot disk and uplink are found, and nothing else") {
  const Vela2Tree tree;
  CHECK(found(tree.root()) ==
        std::set<std::pair<std::string, std::string>>{{"0000:07:00.0", "nvme0n1p1 mounted at /boot/efi"},
                                                      {"0000:07:00.0", "nvme0n1p2 mounted at /"},
                                                      {"0000:81:00.0", "eno1 carries the default route"}});
}

TEST_CASE(
    "host use: LVM, an NVMe multipath head, a bond under a VLAN and an IPv6 address are traced to the PCI "
    "function") {
  const Vela2Tree tree;
  // LVM: dm-0 (253:0) on nvme3n1, mounted at /var/lib/docker; nvme3n1 holds it.
  const auto dm = tree.at("/sys/devices/virtual/block/dm-0");
  write(dm / "dev", "253:0\n");
  link(dm / "slaves/nvme3n1", fs::canonical(tree.at("/sys/class/block/nvme3n1")));
  link(tree.at("/sys/class/block/dm-0"), dm);
  link(tree.at("/sys/dev/block/253:0"), dm);
  link(fs::canonical(tree.at("/sys/class/block/nvme3n1")) / "holders/dm-0", dm);
  // A multipath head nvme9n1 of subsystem 5, whose controller is nvme5: swapped on.
  const auto subsys = tree.at("/sys/devices/virtual/nvme-subsystem/nvme-subsys5");
  write(subsys / "nvme9n1/dev", "259:90\n");
  link(subsys / "nvme5", fs::canonical(tree.at("/sys/class/nvme/nvme5")));
  link(tree.at("/sys/class/block/nvme9n1"), subsys / "nvme9n1");
  // bond0 over ens2np0, VLAN 100 over bond0: the default route goes through the VLAN.
  const auto bond = tree.at("/sys/devices/virtual/net/bond0");
  link(bond / "lower_ens2np0", fs::canonical(tree.at("/sys/class/net/ens2np0")));
  link(tree.at("/sys/class/net/bond0"), bond);
  const auto vlan = tree.at("/sys/devices/virtual/net/bond0.100");
  link(vlan / "lower_bond0", bond);
  link(tree.at("/sys/class/net/bond0.100"), vlan);

  std::ofstream(tree.at("/proc/self/mountinfo"), std::ios::app)
      << "50 21 253:0 / /var/lib/docker rw,relatime shared:30 - xfs /dev/mapper/vg-docker rw\n";
  std::ofstream(tree.at("/proc/swaps"), std::ios::app) << "/dev/nvme9n1 partition 8388604 0 -2\n";
  write(tree.at("/proc/net/route"),
        "Iface\tDestination\tGateway \tFlags\tRefCnt\tUse\tMetric\tMask\t\tMTU\tWindow\tIRTT\n"
        "bond0.100\t00000000\t0100000A\t0003\t0\t0\t0\t00000000\t0\t0\t0\n");
  write(tree.at("/proc/net/if_inet6"),
        "20010db8000000000000000000000005 04 40 00 80     ens3np0\n"
        "fe80000000000000020000fffe1b0000 05 40 20 80     ens4np0\n");

  const auto uses = found(tree.root());
  const std::set<std::pair<std::string, std::string>> expected{{"0000:07:00.0", "nvme0n1p1 mounted at /boot/efi"},
                                                               {"0000:07:00.0", "nvme0n1p2 mounted at /"},
                                                               {"0000:3c:00.0", "dm-0 mounted at /var/lib/docker"},
                                                               {"0000:3c:00.0", "nvme3n1 held by dm-0"},
                                                               {"0000:9c:00.0", "nvme9n1 is swap"},
                                                               {"0000:2a:00.0", "bond0.100 carries the default route"},
                                                               {"0000:3b:00.0", "ens3np0 has address 2001:db8::5"}};
  CHECK(uses == expected);

  // The model carries them: the data NVMe under LVM is the host's now, the uplink's PF too.
  const auto model = discover_from_sysfs(tree.root());
  REQUIRE_MESSAGE(model.ok(), model.error().message);
  const auto* nvme = model->find(*PciAddress::parse("0000:3c:00.0"));
  REQUIRE(nvme != nullptr);
  CHECK(nvme->host_use == std::optional<std::string>("dm-0 mounted at /var/lib/docker; nvme3n1 held by dm-0"));
  const auto* link_local = model->find(*PciAddress::parse("0000:4c:00.0"));
  REQUIRE(link_local != nullptr);
  CHECK_FALSE(link_local->host_use.has_value());
}

TEST_CASE("host use: a root without /proc detects nothing, and the live host answers over netlink") {
  TempDir empty;
  fs::create_directories(empty.path() / "sys/block");
  CHECK(found(empty.path()).empty());
  // The loopback always has 127.0.0.1, host scope: never listed. Whatever else this machine has,
  // every entry names an interface and a global address.
  const auto live = interface_addresses();
  REQUIRE_MESSAGE(live.ok(), live.error().message);
  for (const auto& entry : *live) {
    CHECK(entry.interface != "lo");
    CHECK_FALSE(entry.address.empty());
  }
}

TEST_CASE("host use: reservations add to what was found, once each, and name an address the model lacks") {
  numa::HostModel model;
  numa::PciFunction f;
  f.address = *PciAddress::parse("0000:02:00.0");
  f.host_use = "nvme0n1p2 mounted at /";
  model.pci_devices.push_back(f);
  const auto unknown = mark_host_use(model, {{f.address, "reserved: boot mirror"},
                                             {f.address, "nvme0n1p2 mounted at /"},
                                             {*PciAddress::parse("0000:99:00.0"), "reserved: typo"}});
  CHECK(model.pci_devices[0].host_use == std::optional<std::string>("nvme0n1p2 mounted at /; reserved: boot mirror"));
  REQUIRE(unknown.size() == 1);
  CHECK(unknown[0].address.to_string() == "0000:99:00.0");
}

}  // namespace
}  // namespace hostagent::discovery
