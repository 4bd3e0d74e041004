// config devices: the device-preparation section's defaults, every key read, each class of error
// with its position, and the rule that a simulated host gets libvirt's preparation; and the
// hygiene section, which only hostagent's preparation applies.
#include <doctest/doctest.h>

#include "config_checks.hpp"
#include "hostagent/config/daemon_config.hpp"

namespace hostagent::config {
namespace {

TEST_CASE("devices: an empty file prepares devices with hostagent, binding GPUs at start") {
  const DevicesConfig devices = valid("").devices;
  CHECK(devices.preparation == "hostagent");
  CHECK(devices.bind_at_start);
  CHECK(devices.gpu_ids.empty());
  CHECK(devices.sriov.empty());
  CHECK(devices.releasable_drivers.empty());
  CHECK(devices.vf.vlan == 0);
  CHECK_FALSE(devices.vf.trust);
  CHECK(devices.vf.spoofchk);
  CHECK(devices.vf.link_state == "auto");
  CHECK(devices.vf.max_tx_rate_mbps == 0);
  // Health that gates placement: fatal and non-fatal AER errors and a downtrained link, by default.
  CHECK(devices.health == numa::HealthThresholds{1, 1, 0, true});
}

TEST_CASE("devices.health: each threshold is read, and a wrong one names its key") {
  const auto health = valid(
                          "devices:\n"
                          "  health: {aer_fatal_rise: 0, aer_nonfatal_rise: 10, aer_correctable_rise: 1000,\n"
                          "           link_degraded: false}\n")
                          .devices.health;
  CHECK(health == numa::HealthThresholds{0, 10, 1000, false});
  CHECK(problems("devices:\n  health: {aer_fatal_rise: -1}\n") ==
        "c.yaml:2:28: devices.health.aer_fatal_rise: found \"-1\", expected a whole number 0..1000000000");
  CHECK(problems("devices:\n  health: {link_degraded: maybe}\n").find("devices.health.link_degraded") !=
        std::string::npos);
  CHECK(problems("devices:\n  health: {aer_rise: 1}\n").find("aer_fatal_rise") != std::string::npos);
}

TEST_CASE("devices: every key of a full section is read") {
  const DevicesConfig devices = valid(
                                    "devices:\n"
                                    "  preparation: hostagent\n"
                                    "  bind_at_start: false\n"
                                    "  gpu_ids:\n"
                                    "    - {vendor: 0x1234, device: 0x11e8}\n"
                                    "  sriov:\n"
                                    "    - {pf: \"0000:3b:00.0\", vfs: 8}\n"
                                    "    - {pf: \"0000:5e:00.1\", vfs: 0}\n"
                                    "  vf: {vlan: 100, qos: 3, trust: true, spoofchk: false, link_state: enable,\n"
                                    "       min_tx_rate_mbps: 1000, max_tx_rate_mbps: 25000}\n"
                                    "  releasable_drivers: [nvidia, mlx5_core]\n"
                                    "  reserved:\n"
                                    "    - {address: \"0000:3B:00.1\", reason: BMC uplink}\n")
                                    .devices;
  CHECK_FALSE(devices.bind_at_start);
  REQUIRE(devices.gpu_ids.size() == 1);
  CHECK(devices.gpu_ids[0].vendor == 0x1234);
  CHECK(devices.gpu_ids[0].device == 0x11e8);
  REQUIRE(devices.sriov.size() == 2);
  CHECK(devices.sriov[0].pf == "0000:3b:00.0");
  CHECK(devices.sriov[0].vfs == 8);
  CHECK(devices.sriov[1].vfs == 0);
  CHECK(devices.vf.vlan == 100);
  CHECK(devices.vf.qos == 3);
  CHECK(devices.vf.trust);
  CHECK_FALSE(devices.vf.spoofchk);
  CHECK(devices.vf.link_state == "enable");
  CHECK(devices.vf.min_tx_rate_mbps == 1000);
  CHECK(devices.vf.max_tx_rate_mbps == 25000);
  CHECK(devices.releasable_drivers == std::vector<std::string>{"nvidia", "mlx5_core"});
  REQUIRE(devices.reserved.size() == 1);
  CHECK(devices.reserved[0].address == "0000:3b:00.1");  // in the one form every view prints
  CHECK(devices.reserved[0].reason == "BMC uplink");
}

TEST_CASE("devices: errors name the key, what was found and what is expected") {
  CHECK(problems("devices:\n  preparation: kernel\n") ==
        "c.yaml:2:16: devices.preparation: found \"kernel\", expected hostagent or libvirt");
  CHECK(problems("devices:\n  sriov:\n    - {pf: \"3b:00\", vfs: 8}\n") ==
        "c.yaml:3:12: devices.sriov[0].pf: found \"3b:00\", expected a PCI address like 0000:3b:00.0");
  CHECK(problems("devices:\n  sriov:\n    - {pf: \"0000:3b:00.0\"}\n") ==
        "c.yaml:3:7: devices.sriov[0]: found a mapping, expected both pf and vfs, like {pf: \"0000:3b:00.0\", vfs: 8}");
  CHECK(problems("devices:\n  vf: {vlan: 4095}\n") ==
        "c.yaml:2:14: devices.vf.vlan: found 4095, expected a whole number 0..4094");
  CHECK(problems("devices:\n  gpu_ids: [{vendor: 4660, device: 0x11e8}]\n") ==
        "c.yaml:2:22: devices.gpu_ids[0].vendor: found \"4660\", expected a hex PCI id like 0x2330");
  CHECK(problems("devices:\n  sriov: 0000:3b:00.0\n") ==
        "c.yaml:2:10: devices.sriov: found \"0000:3b:00.0\", expected a list of {pf: \"0000:3b:00.0\", vfs: 8}");
  CHECK(problems("devices:\n  reserved:\n    - {address: \"3b:00.1\", reason: uplink}\n") ==
        "c.yaml:3:17: devices.reserved[0].address: found \"3b:00.1\", expected a PCI address like 0000:02:00.0");
  CHECK(problems("devices:\n  reserved:\n    - {address: \"0000:3b:00.1\"}\n") ==
        "c.yaml:3:7: devices.reserved[0]: found a mapping, expected both address and reason, like {address: "
        "\"0000:02:00.0\", reason: \"boot disk\"}");
  CHECK(problems("devices:\n  reserved:\n    - {address: \"0000:3b:00.1\", reason: \"\"}\n") ==
        "c.yaml:3:41: devices.reserved[0].reason: found an empty text, expected why the host keeps it, as an "
        "operator should read it: \"boot disk\"");
}

TEST_CASE("devices: a simulated host gets libvirt's preparation unless hostagent's is asked for, which is refused") {
  CHECK(valid("host: {simulated: vela2}\n").devices.preparation == "libvirt");
  CHECK(valid("host: {simulated: vela2}\ndevices: {preparation: libvirt}\n").devices.preparation == "libvirt");
  CHECK(problems("host: {simulated: vela2}\ndevices: {preparation: hostagent}\n") ==
        "c.yaml:2:24: devices.preparation: found \"hostagent\" with host.simulated \"vela2\", expected libvirt on a "
        "simulated host (its sysfs tree does not act on writes)");
  CHECK(embedded_default_config("vela2", "/tmp/x").devices.preparation == "libvirt");
}

const std::string kRomA(64, 'a');
const std::string kRomB(64, 'b');

TEST_CASE("hygiene: known-good ROMs are read per device, digests in lower case") {
  CHECK(valid("").hygiene.firmware.empty());
  const auto hygiene = valid("hygiene:\n  firmware:\n    - {vendor: 0x10de, device: 0x2330, sha256: [\"" +
                             std::string(64, 'A') + "\", \"" + kRomB + "\"]}\n")
                           .hygiene;
  REQUIRE(hygiene.firmware.size() == 1);
  CHECK(hygiene.firmware[0].vendor == 0x10de);
  CHECK(hygiene.firmware[0].device == 0x2330);
  CHECK(hygiene.firmware[0].sha256 == std::vector<std::string>{kRomA, kRomB});
}

TEST_CASE("hygiene: a GPU scrubber is an argv with an absolute program, and a timeout") {
  CHECK(valid("").hygiene.gpu_scrub_argv.empty());
  CHECK(valid("").hygiene.gpu_scrub_timeout == std::chrono::minutes(10));
  const auto hygiene =
      valid("hygiene:\n  gpu_scrub: {argv: [/usr/libexec/gpu-scrub, --device, \"{address}\"], timeout: 90s}\n").hygiene;
  CHECK(hygiene.gpu_scrub_argv == std::vector<std::string>{"/usr/libexec/gpu-scrub", "--device", "{address}"});
  CHECK(hygiene.gpu_scrub_timeout == std::chrono::seconds(90));
  CHECK(problems("hygiene:\n  gpu_scrub: {argv: [gpu-scrub]}\n") ==
        "c.yaml:2:22: hygiene.gpu_scrub.argv[0]: found \"gpu-scrub\", expected the scrubber's absolute path: it is "
        "run as it is, with no shell and no PATH search");
  CHECK(problems("devices: {preparation: libvirt}\nhygiene:\n  gpu_scrub: {argv: [/bin/true]}\n") ==
        "c.yaml:3:14: hygiene.gpu_scrub: found a scrubber with devices.preparation \"libvirt\", expected "
        "devices.preparation: hostagent (libvirt's managed hostdevs give a GPU back to its host driver, where the "
        "scrubber does not run), or no hygiene.gpu_scrub");
}

TEST_CASE("hygiene: an NVMe erase is bounded, 30 minutes unless written, and refused where libvirt prepares") {
  CHECK(valid("").hygiene.nvme_erase_timeout == std::chrono::minutes(30));
  CHECK(valid("hygiene: {nvme_erase_timeout: 2h}\n").hygiene.nvme_erase_timeout == std::chrono::hours(2));
  CHECK(problems("devices: {preparation: libvirt}\nhygiene: {nvme_erase_timeout: 1h}\n") ==
        "c.yaml:2:31: hygiene.nvme_erase_timeout: found an erase bound with devices.preparation \"libvirt\", "
        "expected devices.preparation: hostagent (with libvirt's managed hostdevs hostagent erases no NVMe), or no "
        "hygiene.nvme_erase_timeout");
}

TEST_CASE("hygiene: cleanings run all at once unless bounded, each step by its deadline per role") {
  CHECK(valid("").hygiene.parallel == 0);
  CHECK(valid("").hygiene.deadlines.empty());
  const auto hygiene = valid(
                           "hygiene:\n  parallel: 4\n  deadlines:\n    gpu: {reset: 5m, scrub: 2h}\n"
                           "    nvme: {erase: 3h}\n")
                           .hygiene;
  CHECK(hygiene.parallel == 4);
  CHECK(hygiene.deadlines.at("gpu").at("reset") == std::chrono::minutes(5));
  CHECK(hygiene.deadlines.at("gpu").at("scrub") == std::chrono::hours(2));
  CHECK(hygiene.deadlines.at("nvme").at("erase") == std::chrono::hours(3));
  CHECK(hygiene.deadlines.count("nic") == 0);
  CHECK(problems("hygiene: {parallel: -1}\n").find("hygiene.parallel: found \"-1\", expected a whole number 0..4096") !=
        std::string::npos);
  // A step the role does not go through is named, with the ones it does.
  const auto scrub_of_nic = problems("hygiene:\n  deadlines:\n    nic: {scrub: 1m}\n");
  CHECK_MESSAGE(scrub_of_nic.find("hygiene.deadlines.nic") != std::string::npos, scrub_of_nic);
  CHECK_MESSAGE(scrub_of_nic.find("vf-neutral") != std::string::npos, scrub_of_nic);
  const auto role = problems("hygiene:\n  deadlines:\n    fpga: {reset: 1m}\n");
  CHECK_MESSAGE(role.find("nvswitch") != std::string::npos, role);
  CHECK(problems("hygiene:\n  deadlines:\n    gpu: {reset: 0s}\n").find("hygiene.deadlines.gpu.reset") !=
        std::string::npos);
  // Where libvirt prepares, no step is hostagent's: a bound on them would not be applied.
  CHECK(problems("devices: {preparation: libvirt}\nhygiene: {parallel: 2}\n") ==
        "c.yaml:2:21: hygiene.parallel: found a cleaning bound with devices.preparation \"libvirt\", expected "
        "devices.preparation: hostagent (with libvirt's managed hostdevs hostagent runs no cleaning step), or no "
        "hygiene.parallel");
  CHECK(problems("devices: {preparation: libvirt}\nhygiene: {deadlines: {gpu: {reset: 1m}}}\n")
            .find("hygiene.deadlines: found step deadlines with devices.preparation \"libvirt\"") != std::string::npos);
}

TEST_CASE("hygiene: errors name the key, and a list libvirt's preparation would not apply is refused") {
  CHECK(problems("hygiene:\n  firmware:\n    - {vendor: 0x10de, device: 0x2330, sha256: [abc]}\n") ==
        "c.yaml:3:49: hygiene.firmware[0].sha256[0]: found \"abc\", expected 64 hex digits, as sha256sum prints a "
        "ROM's digest");
  CHECK(problems("hygiene:\n  firmware:\n    - {vendor: 0x10de, device: 0x2330, sha256: []}\n") ==
        "c.yaml:3:7: hygiene.firmware[0]: found a mapping, expected vendor, device and at least one sha256, like "
        "{vendor: 0x10de, device: 0x2330, sha256: [...]}");
  CHECK(problems("hygiene:\n  firmware:\n    - {vendor: 0x10de, device: 0x2330, sha256: [\"" + kRomA +
                 "\"]}\n    - {vendor: 0x10de, device: 0x2330, sha256: [\"" + kRomB + "\"]}\n") ==
        "c.yaml:4:7: hygiene.firmware[1]: found the device of hygiene.firmware[0] again, expected one entry per "
        "vendor and device, listing every good image in its sha256");
  CHECK(problems("devices: {preparation: libvirt}\nhygiene:\n  firmware:\n    - {vendor: 0x10de, device: 0x2330, "
                 "sha256: [\"" +
                 kRomA + "\"]}\n") ==
        "c.yaml:4:5: hygiene.firmware: found a known-good list with devices.preparation \"libvirt\", expected "
        "devices.preparation: hostagent (with libvirt's managed hostdevs hostagent reads no device's ROM), or no "
        "hygiene.firmware");
}

}  // namespace
}  // namespace hostagent::config
