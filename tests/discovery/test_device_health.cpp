// Device health on simulated hosts: a fresh tree is healthy, and each change the kernel makes when a
// device degrades (link retrained lower, AER counter bumped, device removed) shows in the report.
#include <doctest/doctest.h>

#include <algorithm>
#include <fstream>

#include "hostagent/discovery/device_health_reader.hpp"
#include "hostagent/discovery/discovery.hpp"
#include "hostagent/simhost/sim_host.hpp"
#include "test_support.hpp"

namespace hostagent::discovery {
namespace {

namespace fs = std::filesystem;
using testing::TempDir;

struct Host {
  TempDir dir;
  numa::HostModel model;
  fs::path device(const std::string& address) const { return dir.path() / "sys/bus/pci/devices" / address; }
};

std::unique_ptr<Host> simulated(const std::string& name) {
  auto host = std::make_unique<Host>();
  const auto spec = simhost::builtin_host(name);
  REQUIRE_MESSAGE(spec.ok(), spec.error().message);
  const auto written = simhost::write_sysfs_tree(*spec, host->dir.path());
  REQUIRE_MESSAGE(written.ok(), written.error().message);
  auto model = discover_from_sysfs(host->dir.path());
  REQUIRE_MESSAGE(model.ok(), model.error().message);
  host->model = std::move(model).value();
  return host;
}

std::vector<numa::DeviceHealth> health_of(const Host& host) {
  const auto sysfs = SysfsRoot::open(host.dir.path());
  REQUIRE_MESSAGE(sysfs.ok(), sysfs.error().message);
  auto health = read_device_health(*sysfs, host.model);
  REQUIRE_MESSAGE(health.ok(), health.error().message);
  return std::move(health).value();
}

Error health_error(const Host& host) {
  const auto sysfs = SysfsRoot::open(host.dir.path());
  REQUIRE_MESSAGE(sysfs.ok(), sysfs.error().message);
  const auto health = read_device_health(*sysfs, host.model);
  REQUIRE_FALSE(health.ok());
  return health.error();
}

const numa::DeviceHealth& entry(const std::vector<numa::DeviceHealth>& all, const std::string& address) {
  const auto it = std::find_if(all.begin(), all.end(),
                               [&](const numa::DeviceHealth& h) { return h.address.to_string() == address; });
  REQUIRE_MESSAGE(it != all.end(), "no health entry for " << address);
  return *it;
}

void write_file(const fs::path& path, const std::string& text) {
  std::ofstream out(path, std::ios::trunc);
  out << text;
  REQUIRE(out.good());
}

bool healthy(const numa::DeviceHealth& h) {
  const auto zero = [](const std::map<std::string, uint64_t>& counters) {
    return std::all_of(counters.begin(), counters.end(), [](const auto& kv) { return kv.second == 0; });
  };
  return h.present && !h.link_degraded && zero(h.aer_correctable) && zero(h.aer_nonfatal) && zero(h.aer_fatal);
}

TEST_CASE("every endpoint of vela1 is present with its link at capability and AER counters at zero") {
  const auto host = simulated("vela1");
  const auto all = health_of(*host);
  std::size_t endpoints = 0;
  for (const auto& f : host->model.pci_devices) {
    const bool port = f.role == numa::PciRole::root_port || f.role == numa::PciRole::switch_upstream ||
                      f.role == numa::PciRole::switch_downstream || (f.class_code >> 16) == 0x06;
    if (port) continue;
    ++endpoints;
    CAPTURE(f.address.to_string());
    const auto& h = entry(all, f.address.to_string());
    CHECK(h.role == f.role);
    CHECK(healthy(h));
    if (f.physfn) {
      CHECK_FALSE(h.link_speed_gts.has_value());  // a VF's Link Status reads no rate ("Unknown")
      CHECK(h.aer_correctable.empty());
    }
  }
  CHECK(all.size() == endpoints);
  CHECK(std::is_sorted(all.begin(), all.end(),
                       [](const numa::DeviceHealth& a, const numa::DeviceHealth& b) { return a.address < b.address; }));
  const auto& gpu = entry(all, "0000:19:00.0");
  CHECK(gpu.role == numa::PciRole::gpu);
  CHECK(gpu.link_speed_gts == 16.0);
  CHECK(gpu.link_max_speed_gts == 16.0);
  CHECK(gpu.link_width == 16);
  CHECK(gpu.link_max_width == 16);
  // Linux 6.1 aer.c: 8 named correctable bits and 18 named uncorrectable ones, then the total.
  CHECK(gpu.aer_correctable.size() == 9);
  CHECK(gpu.aer_correctable.count("TOTAL_ERR_COR") == 1);
  CHECK(gpu.aer_nonfatal.size() == 19);
  CHECK(gpu.aer_nonfatal.count("TOTAL_ERR_NONFATAL") == 1);
  CHECK(gpu.aer_fatal.count("TOTAL_ERR_FATAL") == 1);
  for (const char* address : {"0000:1b:00.0", "0000:1c:00.0"}) {
    CAPTURE(address);
    CHECK(entry(all, address).aer_fatal.count("PoisonTLPBlocked") == 1);
  }
}

TEST_CASE("quirks: only the A100 whose link trained at Gen3 x8 is degraded") {
  const auto host = simulated("quirks");
  const auto all = health_of(*host);
  REQUIRE_FALSE(all.empty());
  for (const auto& h : all) {
    CAPTURE(h.address.to_string());
    CHECK(h.present);
    CHECK(h.link_degraded == (h.address.to_string() == "0000:02:00.0"));
  }
  const auto& slow = entry(all, "0000:02:00.0");
  CHECK(slow.link_speed_gts == 8.0);
  CHECK(slow.link_max_speed_gts == 16.0);
  CHECK(slow.link_width == 8);
  CHECK(slow.link_max_width == 16);
}

TEST_CASE("a link retrained to a lower speed or width is reported degraded") {
  const auto host = simulated("vela1");
  // What sysfs shows after the link retrains (pci-sysfs.c reads Link Status on every read).
  write_file(host->device("0000:19:00.0") / "current_link_speed", "8.0 GT/s PCIe\n");
  write_file(host->device("0000:1a:00.0") / "current_link_width", "4\n");
  const auto all = health_of(*host);
  const auto& slower = entry(all, "0000:19:00.0");
  CHECK(slower.link_degraded);
  CHECK(slower.link_speed_gts == 8.0);
  CHECK(slower.link_max_speed_gts == 16.0);
  CHECK(slower.link_width == 16);
  const auto& narrower = entry(all, "0000:1a:00.0");
  CHECK(narrower.link_degraded);
  CHECK(narrower.link_speed_gts == 16.0);
  CHECK(narrower.link_width == 4);
  CHECK(narrower.link_max_width == 16);
  for (const auto& h : all) {
    const auto address = h.address.to_string();
    if (address != "0000:19:00.0" && address != "0000:1a:00.0") CHECK_MESSAGE(healthy(h), address);
  }
}

TEST_CASE("a bumped AER counter is reported with its total") {
  const auto host = simulated("vela1");
  const auto correctable = host->device("0000:1b:00.0") / "aer_dev_correctable";
  auto text = testing::read_text_file(correctable);
  // aer.c counts the error bit and the message sent: both lines move together.
  const std::pair<std::string, std::string> edits[] = {{"BadTLP 0\n", "BadTLP 3\n"},
                                                       {"TOTAL_ERR_COR 0\n", "TOTAL_ERR_COR 3\n"}};
  for (const auto& edit : edits) {
    const auto at = text.find(edit.first);
    REQUIRE_MESSAGE(at != std::string::npos, edit.first);
    text.replace(at, edit.first.size(), edit.second);
  }
  write_file(correctable, text);
  write_file(host->device("0000:1c:00.0") / "aer_dev_fatal",
             "Undefined 0\ndev_fatal_errs_bit[27] 1\nTOTAL_ERR_FATAL 1\n");
  const auto all = health_of(*host);
  const auto& nic = entry(all, "0000:1b:00.0");
  CHECK(nic.aer_correctable.at("BadTLP") == 3);
  CHECK(nic.aer_correctable.at("TOTAL_ERR_COR") == 3);
  CHECK(nic.aer_correctable.at("RxErr") == 0);
  CHECK(nic.aer_fatal.at("TOTAL_ERR_FATAL") == 0);
  const auto& nvme = entry(all, "0000:1c:00.0");
  CHECK(nvme.aer_fatal.at("dev_fatal_errs_bit[27]") == 1);
  CHECK(nvme.aer_fatal.at("TOTAL_ERR_FATAL") == 1);
  CHECK_FALSE(healthy(nic));
  CHECK_FALSE(healthy(nvme));
  CHECK(healthy(entry(all, "0000:1b:00.1")));
}

TEST_CASE("a removed device is reported absent, not as an error") {
  const auto host = simulated("vela1");
  // Surprise removal: the device's directory goes; its bus/pci/devices link dangles, then goes too.
  const auto real = fs::canonical(host->device("0000:33:00.0"));
  fs::remove_all(real);
  fs::remove(host->device("0000:34:00.0"));
  const auto all = health_of(*host);
  for (const char* address : {"0000:33:00.0", "0000:34:00.0"}) {
    CAPTURE(address);
    const auto& gone = entry(all, address);
    CHECK_FALSE(gone.present);
    CHECK(gone.role == numa::PciRole::gpu);
    CHECK_FALSE(gone.link_speed_gts.has_value());
    CHECK(gone.aer_correctable.empty());
  }
  CHECK(healthy(entry(all, "0000:19:00.0")));
}

TEST_CASE("unparseable attributes are errors naming the file") {
  const auto host = simulated("vela1");
  SUBCASE("link speed") {
    write_file(host->device("0000:19:00.0") / "max_link_speed", "fast\n");
    const auto error = health_error(*host);
    CHECK(error.code == ErrorCode::parse_error);
    CHECK(error.message.find("0000:19:00.0/max_link_speed") != std::string::npos);
    CHECK(error.message.find("\"fast\"") != std::string::npos);
  }
  SUBCASE("link width") {
    write_file(host->device("0000:19:00.0") / "current_link_width", "x16\n");
    const auto error = health_error(*host);
    CHECK(error.code == ErrorCode::parse_error);
    CHECK(error.message.find("0000:19:00.0/current_link_width") != std::string::npos);
  }
  SUBCASE("AER counters") {
    write_file(host->device("0000:1c:00.0") / "aer_dev_nonfatal", "Undefined 0\nDLP\n");
    const auto error = health_error(*host);
    CHECK(error.code == ErrorCode::parse_error);
    CHECK(error.message.find("0000:1c:00.0/aer_dev_nonfatal") != std::string::npos);
    CHECK(error.message.find("line 2") != std::string::npos);
  }
}

TEST_CASE("link speeds in every format the kernel has printed") {
  const auto host = simulated("workstation");
  const auto gpu = std::find_if(host->model.pci_devices.begin(), host->model.pci_devices.end(),
                                [](const numa::PciFunction& f) { return f.role == numa::PciRole::gpu; });
  REQUIRE(gpu != host->model.pci_devices.end());
  const auto dir = host->device(gpu->address.to_string());
  struct Case {
    const char* text;
    std::optional<double> gts;
  };
  // 5.x+ pci_speed_string; 4.x current_link_speed_show; a link that is down.
  for (const auto& c : {Case{"2.5 GT/s PCIe\n", 2.5}, Case{"64.0 GT/s PCIe\n", 64.0}, Case{"5 GT/s\n", 5.0},
                        Case{"Unknown\n", std::nullopt}, Case{"Unknown speed\n", std::nullopt}}) {
    CAPTURE(c.text);
    write_file(dir / "current_link_speed", c.text);
    const auto all = health_of(*host);
    CHECK(entry(all, gpu->address.to_string()).link_speed_gts == c.gts);
  }
}

TEST_CASE("parse_aer_counters reads the kernel's lines and names the source on bad ones") {
  const auto counters = parse_aer_counters("RxErr 1\nBadTLP 18446744073709551615\nTOTAL_ERR_COR 2\n", "src");
  REQUIRE_MESSAGE(counters.ok(), counters.error().message);
  CHECK(counters->size() == 3);
  CHECK(counters->at("RxErr") == 1);
  CHECK(counters->at("BadTLP") == 18446744073709551615ull);
  CHECK(counters->at("TOTAL_ERR_COR") == 2);
  const auto empty = parse_aer_counters("", "src");
  REQUIRE(empty.ok());
  CHECK(empty->empty());
  for (const char* bad : {"RxErr", "RxErr x", " 5", "RxErr -1", "RxErr 1 2", "RxErr  1", "RxErr 1x",
                          "RxErr 18446744073709551616", "RxErr 1\nRxErr 2"}) {
    CAPTURE(bad);
    const auto parsed = parse_aer_counters(bad, "/sys/bus/pci/devices/0000:01:00.0/aer_dev_correctable");
    REQUIRE_FALSE(parsed.ok());
    CHECK(parsed.error().code == ErrorCode::parse_error);
    CHECK(parsed.error().message.find("/sys/bus/pci/devices/0000:01:00.0/aer_dev_correctable") != std::string::npos);
  }
}

}  // namespace
}  // namespace hostagent::discovery
