// config errors: each class of problem with its exact file:line:column, key path, what was found
// and what is expected; all of a file's problems at once; and the checks that span keys.
#include <doctest/doctest.h>

#include <algorithm>

#include "config_checks.hpp"
#include "hostagent/config/daemon_config.hpp"

namespace hostagent::config {
namespace {

const std::string kDuration = "expected a duration above 0 and under 1 day, like 60s, 500ms or 2m (units ms, s, m, h)";
const std::string kListen = "expected unix:/ABSOLUTE/PATH or tcp://HOST:PORT with PORT 1..65535";

TEST_CASE("errors: durations need a unit and stay above 0 and under a day") {
  CHECK(problems("libvirt:\n  connect_timeout: 60\n") ==
        "c.yaml:2:20: libvirt.connect_timeout: found \"60\" (no unit), " + kDuration);
  CHECK(problems("operations:\n  stop_timeout: 0s\n") ==
        "c.yaml:2:17: operations.stop_timeout: found \"0s\", " + kDuration);
  CHECK(problems("libvirt:\n  reconnect_interval: 24h\n") ==
        "c.yaml:2:23: libvirt.reconnect_interval: found \"24h\", " + kDuration);
  CHECK(problems("libvirt:\n  reconnect_interval: 5 s\n") ==
        "c.yaml:2:23: libvirt.reconnect_interval: found \"5 s\", " + kDuration);
}

TEST_CASE("errors: placement's url is an http(s) endpoint and its host name a name") {
  CHECK(problems("placement:\n  url: placement.example.net:8778\n") ==
        "c.yaml:2:8: placement.url: found \"placement.example.net:8778\", expected Placement's endpoint, "
        "http://HOST:PORT or https://HOST:PORT");
  CHECK(problems("placement:\n  host_name: \"gpu/7\"\n").find("placement.host_name: found \"gpu/7\"") !=
        std::string::npos);
}

TEST_CASE("errors: paths must be absolute and without '..'") {
  CHECK(problems("state_directory: var/lib/hostagent\n") ==
        "c.yaml:1:18: state_directory: found \"var/lib/hostagent\" (it is relative), expected an absolute path "
        "without '..'");
  CHECK(problems("console_log_directory: \"\"\n") ==
        "c.yaml:1:24: console_log_directory: found \"\" (it is empty), expected an absolute path without '..'");
  CHECK(problems("api:\n  token_file: /etc/../token\n") ==
        "c.yaml:2:15: api.token_file: found \"/etc/../token\" (it contains '..'), expected an absolute path without "
        "'..', or \"\" for none");
  CHECK(problems("templates:\n  directories: [/a, b]\n") ==
        "c.yaml:2:21: templates.directories[1]: found \"b\" (it is relative), expected an absolute path without '..'");
  CHECK(problems("images:\n  directories: [/srv/images, /srv/../etc]\n") ==
        "c.yaml:2:30: images.directories[1]: found \"/srv/../etc\" (it contains '..'), expected an absolute path "
        "without '..'");
  CHECK(problems("images:\n  directories: /srv/images\n") ==
        "c.yaml:2:16: images.directories: found \"/srv/images\", expected a list of absolute paths");
  CHECK(problems("libvirt:\n  emulator: [/usr/bin/qemu]\n") ==
        "c.yaml:2:13: libvirt.emulator: found a list, expected an absolute path without '..', or \"\" for none");
}

TEST_CASE("errors: a CPU list that is not one") {
  CHECK(problems("host:\n  housekeeping_cpus: 3-1\n") ==
        "c.yaml:2:22: host.housekeeping_cpus: found \"3-1\" (bad range \"3-1\"), expected a CPU list like 0-3,96-99, "
        "or \"\" for none");
}

// Found by fuzz_config's campaign: a flow list of a thousand empty items made 1,836 lines (207 KB)
// of answer from 2.7 KB, every problem shown; configurations and templates now show the first fifty.
TEST_CASE("errors: a thousand problems are answered with the first fifty and a count") {
  std::string yaml = "host:\n  hugepages: [";
  for (int i = 0; i < 1000; ++i) yaml += ",";
  yaml += "]\n";
  const auto message = problems(yaml);
  std::size_t lines = 1;
  for (const char c : message) lines += c == '\n' ? 1 : 0;
  CHECK(lines == 51);
  CHECK(message.find("host.hugepages[0]: found nothing, expected a mapping") != std::string::npos);
  CHECK(message.find("host.hugepages[50]") == std::string::npos);
  CHECK_MESSAGE(message.find("\n950 more problems not shown: fix these first") != std::string::npos, message);
}

TEST_CASE("errors: hugepage pools name the entry, the field and the fix") {
  CHECK(problems("host:\n  hugepages: {node: 0}\n") ==
        "c.yaml:2:14: host.hugepages: found a mapping, expected a list of {node: 0, size: 1G, pages: 800}");
  CHECK(problems("host:\n  hugepages: [{node: 0, size: 4M, pages: 8}]\n") ==
        "c.yaml:2:31: host.hugepages[0].size: found \"4M\", expected 2M or 1G, the x86 hugepage sizes");
  CHECK(problems("host:\n  hugepages: [{node: -1, size: 1G, pages: 8}]\n") ==
        "c.yaml:2:22: host.hugepages[0].node: found \"-1\", expected a whole number 0..1023");
  CHECK(problems("host:\n  hugepages: [{node: 0, size: 1G}]\n") ==
        "c.yaml:2:15: host.hugepages[0]: found a mapping, expected node, size and pages, like {node: 0, size: 1G, "
        "pages: 800}");
  CHECK(problems("host:\n  hugepages: [{node: 0, size: 1G, pages: 8, numa: 1}]\n")
            .find("host.hugepages[0].numa: found an unknown key") != std::string::npos);
  CHECK(
      problems("host:\n  hugepages:\n    - {node: 1, size: 1G, pages: 8}\n    - {node: 1, size: 1024M, pages: 9}\n") ==
      "c.yaml:4:7: host.hugepages[1]: found a second pool of node 1 in that page size, expected one entry per node "
      "and page size (the first is host.hugepages[0])");
}

TEST_CASE("errors: listen addresses") {
  CHECK(problems("api:\n  listen: [\"tcp://0.0.0.0:0\"]\n") ==
        "c.yaml:2:12: api.listen[0]: found \"tcp://0.0.0.0:0\" (port \"0\" is not a number 1..65535), " + kListen);
  CHECK(problems("api:\n  listen: \"unix:/run/a.sock\"\n") ==
        "c.yaml:2:11: api.listen: found \"unix:/run/a.sock\", expected a list of one or more addresses, each "
        "unix:/ABSOLUTE/PATH or tcp://HOST:PORT with PORT 1..65535");
  CHECK(problems("api:\n  listen: []\n") ==
        "c.yaml:2:11: api.listen: found a list (empty), expected a list of one or more addresses, each "
        "unix:/ABSOLUTE/PATH or tcp://HOST:PORT with PORT 1..65535");
  CHECK(problems("api:\n  listen: [\"unix:/a\", \"unix:/a\"]\n") ==
        "c.yaml:2:23: api.listen[1]: found \"unix:/a\" a second time, expected each address once");
}

TEST_CASE("errors: numbers, choices and names") {
  CHECK(problems("operations:\n  workers: 0\n") ==
        "c.yaml:2:12: operations.workers: found 0, expected a whole number 1..256");
  CHECK(problems("libvirt:\n  domain_type: xen\n") ==
        "c.yaml:2:16: libvirt.domain_type: found \"xen\", expected kvm, qemu or test");
  CHECK(problems("storage:\n  pool: my pool\n") ==
        "c.yaml:2:9: storage.pool: found \"my pool\", expected a name: use 1-64 letters, digits, '.', '_' or '-', not "
        "starting with '.' or '-'");
  CHECK(problems("libvirt:\n  uri: xen:///system\n") ==
        "c.yaml:2:8: libvirt.uri: found \"xen:///system\", expected a libvirt URI of the qemu or test driver, like "
        "qemu:///system or test:///default");
}

TEST_CASE("errors: a misspelt key suggests the known one") {
  CHECK(problems("libvirt:\n  conect_timeout: 5s\n") ==
        "c.yaml:2:3: libvirt.conect_timeout: found an unknown key, expected one of uri, domain_type, emulator, "
        "connect_timeout or reconnect_interval (did you mean \"connect_timeout\"?)");
  CHECK(problems("libvrit: {}\n") ==
        "c.yaml:1:1: libvrit: found an unknown key, expected one of libvirt, host, templates, images, storage, "
        "state_directory, console_log_directory, operations, devices, hygiene, api or placement (did you mean "
        "\"libvirt\"?)");
}

TEST_CASE("errors: an unknown top-level key lists the known ones") {
  CHECK(problems("state_directory: /srv/ha\nlog_level: debug\n") ==
        "c.yaml:2:1: log_level: found an unknown key, expected one of libvirt, host, templates, images, storage, "
        "state_directory, console_log_directory, operations, devices, hygiene, api or placement");
}

TEST_CASE("errors: a section or document that is not a mapping") {
  CHECK(problems("libvirt: qemu:///system\n") ==
        "c.yaml:1:10: libvirt: found \"qemu:///system\", expected a mapping with keys uri, domain_type, emulator, "
        "connect_timeout or reconnect_interval");
  CHECK(problems("- libvirt\n") ==
        "c.yaml:1:1: found a list, expected a mapping with keys libvirt, host, templates, images, storage, "
        "state_directory, "
        "console_log_directory, operations, devices, hygiene, api or placement");
}

TEST_CASE("errors: every problem of a file is reported at once, in file order") {
  const std::string message = problems(
      "operations:\n"
      "  stop_timeout: forever\n"
      "  workers: 1000\n"
      "libvirt:\n"
      "  domain_type: KVM\n"
      "state_directory: relative\n"
      "state_directory: /twice\n");
  CHECK(std::count(message.begin(), message.end(), '\n') == 4);
  const std::vector<std::string> starts = {
      "c.yaml:2:17: operations.stop_timeout: found \"forever\"", "c.yaml:3:12: operations.workers: found 1000",
      "c.yaml:5:16: libvirt.domain_type: found \"KVM\"", "c.yaml:6:18: state_directory: found \"relative\"",
      "c.yaml:7:1: state_directory: found a second \"state_directory\""};
  std::size_t at = 0;
  for (const auto& start : starts) {
    CAPTURE(start);
    const auto found = message.find(start, at);
    REQUIRE(found != std::string::npos);
    at = found + start.size();
  }
}

TEST_CASE("errors: broken YAML is a parse_error at its position") {
  auto config = parse_config("libvirt:\n  uri: [qemu:///system\n", "c.yaml");
  REQUIRE_FALSE(config.ok());
  CHECK(config.error().code == ErrorCode::parse_error);
  CHECK(config.error().message.starts_with("c.yaml:3:1: found invalid YAML ("));
  CHECK(config.error().message.ends_with("), expected a mapping of configuration keys"));
}

TEST_CASE("cross-key: a simulated host cannot have a sysfs root as well") {
  CHECK(problems("host:\n  sysfs_root: /srv/snap\n  simulated: vela2\n") ==
        "c.yaml:3:14: host.simulated: found \"vela2\" with host.sysfs_root \"/srv/snap\", expected only one of them: "
        "a simulated host brings its own sysfs tree (remove host.sysfs_root, or set host.simulated: \"\")");
  // "/" is the default: writing it out is not a second root.
  CHECK(parse_config("host:\n  sysfs_root: /\n  simulated: vela2\n", "c.yaml").ok());
}

TEST_CASE("cross-key: confining the host's processes needs housekeeping CPUs") {
  const std::string expected =
      "host.confine_host_processes: found \"true\" with host.housekeeping_cpus empty, expected host.housekeeping_cpus "
      "listing the CPUs the host's own processes may use (like 0-7,96-103), or host.confine_host_processes: false";
  CHECK(problems("host:\n  confine_host_processes: true\n") == "c.yaml:2:27: " + expected);
  CHECK(problems("host:\n  housekeeping_cpus: \"\"\n  confine_host_processes: true\n") == "c.yaml:3:27: " + expected);
  CHECK(parse_config("host:\n  housekeeping_cpus: 0-1,4\n  confine_host_processes: true\n", "c.yaml").ok());
  CHECK(parse_config("host:\n  confine_host_processes: false\n", "c.yaml").ok());
  // A CPU list already wrong is its own problem, not a second one here.
  CHECK(problems("host:\n  housekeeping_cpus: 3-1\n  confine_host_processes: true\n").find("confine") ==
        std::string::npos);
}

TEST_CASE("cross-key: simulated names one of the built-in hosts") {
  CHECK(problems("host:\n  simulated: vela3\n") ==
        "c.yaml:2:14: host.simulated: found \"vela3\", expected vela1, vela2, h200ib, workstation or quirks, or \"\" "
        "for this "
        "machine (did you mean \"vela1\"?)");
}

TEST_CASE("cross-key: domain_type test needs a test:/// URI") {
  CHECK(problems("libvirt:\n  domain_type: test\n") ==
        "c.yaml:2:16: libvirt.domain_type: found \"test\" with libvirt.uri \"qemu:///system\", expected kvm or qemu "
        "(test needs libvirt.uri: test:///default)");
}

TEST_CASE("cross-key: a test:/// URI needs domain_type test") {
  CHECK(problems("libvirt:\n  uri: test:///default\n") ==
        "c.yaml:2:8: libvirt.uri: found \"test:///default\" with libvirt.domain_type kvm (the default), expected a "
        "qemu:/// URI, or libvirt.domain_type: test beside a test:/// URI");
  CHECK(problems("libvirt:\n  uri: test:///default\n  domain_type: qemu\n") ==
        "c.yaml:3:16: libvirt.domain_type: found \"qemu\" with libvirt.uri \"test:///default\", expected test, the "
        "only type libvirt's test driver runs (or a qemu:/// libvirt.uri)");
}

TEST_CASE("cross-key: a tcp listener needs tls or a token file") {
  CHECK(problems("api:\n  listen: [\"unix:/run/a.sock\", \"tcp://0.0.0.0:8443\"]\n") ==
        "c.yaml:2:32: api.listen[1]: found \"tcp://0.0.0.0:8443\" with no authentication, expected api.tls "
        "(certificate, key and client_ca) or api.token_file set beside a tcp:// address");
  CHECK(parse_config("api:\n  listen: [\"tcp://0.0.0.0:8443\"]\n  token_file: /etc/hostagent/token\n", "c.yaml").ok());
}

TEST_CASE("cross-key: tls is all three files or none") {
  CHECK(problems("api:\n  tls:\n    certificate: /c.pem\n    key: /k.pem\n") ==
        "c.yaml:3:5: api.tls: found certificate and key without client_ca, expected all of certificate, key and "
        "client_ca, or none of them");
  // Explicitly empty is none.
  CHECK(parse_config("api:\n  tls: {certificate: \"\", key: \"\", client_ca: \"\"}\n", "c.yaml").ok());
}

TEST_CASE("api.limits: counts in range, durations with units, and a reserve below the connections") {
  CHECK(problems("api:\n  limits:\n    max_connections: 1\n") ==
        "c.yaml:3:22: api.limits.max_connections: found 1, expected a whole number 2..65536");
  CHECK(problems("api:\n  limits:\n    header_timeout: 5\n") ==
        "c.yaml:3:21: api.limits.header_timeout: found \"5\" (no unit), " + kDuration);
  CHECK(problems("api:\n  limits: {max_connections: 16, health_reserve: 16}\n") ==
        "c.yaml:2:49: api.limits.health_reserve: found \"16\" with 16 of them the reserve and 16 connections, "
        "expected api.limits.health_reserve below api.limits.max_connections");
  // Against the other's default (a reserve of 16).
  CHECK(problems("api:\n  limits: {max_connections: 8}\n").find("api.limits.max_connections") != std::string::npos);
  CHECK(problems("api:\n  limits: {max_conections: 16}\n").find("api.limits.max_conections") != std::string::npos);
}

TEST_CASE("cross-key: a value already wrong is not reported again across keys") {
  const std::string message = problems("libvirt:\n  uri: test:///default\n  domain_type: tset\n");
  CHECK(message ==
        "c.yaml:3:16: libvirt.domain_type: found \"tset\", expected kvm, qemu or test (did you mean \"test\"?)");
}

}  // namespace
}  // namespace hostagent::config
