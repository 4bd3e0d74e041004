// config files: the shipped default configuration, and load_config's handling of the file itself.
#include <doctest/doctest.h>

#include <fstream>
#include <sstream>

#include "hostagent/config/daemon_config.hpp"
#include "hostagent/vmtemplates/yaml_tree.hpp"
#include "test_support.hpp"

namespace hostagent::config {
namespace {

namespace fs = std::filesystem;

// Every setting, field by field (source aside: it names the file).
void check_same_settings(const DaemonConfig& a, const DaemonConfig& b) {
  CHECK(a.libvirt_uri == b.libvirt_uri);
  CHECK(a.domain_type == b.domain_type);
  CHECK(a.emulator == b.emulator);
  CHECK(a.libvirt_connect_timeout == b.libvirt_connect_timeout);
  CHECK(a.libvirt_reconnect_interval == b.libvirt_reconnect_interval);
  CHECK(a.sysfs_root == b.sysfs_root);
  CHECK(a.simulated_host == b.simulated_host);
  CHECK(a.housekeeping_cpus == b.housekeeping_cpus);
  CHECK(a.host_hugepages == b.host_hugepages);
  CHECK(a.confine_host_processes == b.confine_host_processes);
  CHECK(a.template_directories == b.template_directories);
  CHECK(a.image_directories == b.image_directories);
  CHECK(a.storage_pool == b.storage_pool);
  CHECK(a.state_directory == b.state_directory);
  CHECK(a.console_log_directory == b.console_log_directory);
  CHECK(a.operation_workers == b.operation_workers);
  CHECK(a.stop_timeout == b.stop_timeout);
  CHECK(a.api.listen == b.api.listen);
  CHECK(a.api.tls.certificate == b.api.tls.certificate);
  CHECK(a.api.tls.key == b.api.tls.key);
  CHECK(a.api.tls.client_ca == b.api.tls.client_ca);
  CHECK(a.api.token_file == b.api.token_file);
  CHECK(a.api.limits.header_timeout == b.api.limits.header_timeout);
  CHECK(a.api.limits.request_timeout == b.api.limits.request_timeout);
  CHECK(a.api.limits.idle_timeout == b.api.limits.idle_timeout);
  CHECK(a.api.limits.max_connections == b.api.limits.max_connections);
  CHECK(a.api.limits.health_reserve == b.api.limits.health_reserve);
  CHECK(a.api.limits.max_connections_per_peer == b.api.limits.max_connections_per_peer);
  CHECK(a.api.limits.max_event_streams == b.api.limits.max_event_streams);
  CHECK(a.devices.preparation == b.devices.preparation);
  CHECK(a.devices.bind_at_start == b.devices.bind_at_start);
  CHECK(a.hygiene.firmware.size() == b.hygiene.firmware.size());
  CHECK(a.hygiene.gpu_scrub_argv == b.hygiene.gpu_scrub_argv);
  CHECK(a.hygiene.gpu_scrub_timeout == b.hygiene.gpu_scrub_timeout);
  CHECK(a.devices.gpu_ids.size() == b.devices.gpu_ids.size());
  CHECK(a.devices.sriov.size() == b.devices.sriov.size());
  CHECK(a.devices.releasable_drivers == b.devices.releasable_drivers);
  CHECK(a.devices.reserved.size() == b.devices.reserved.size());
  CHECK(a.devices.vf.vlan == b.devices.vf.vlan);
  CHECK(a.devices.vf.qos == b.devices.vf.qos);
  CHECK(a.devices.vf.trust == b.devices.vf.trust);
  CHECK(a.devices.vf.spoofchk == b.devices.vf.spoofchk);
  CHECK(a.devices.vf.link_state == b.devices.vf.link_state);
  CHECK(a.devices.vf.min_tx_rate_mbps == b.devices.vf.min_tx_rate_mbps);
  CHECK(a.devices.vf.max_tx_rate_mbps == b.devices.vf.max_tx_rate_mbps);
}

void write_file(const fs::path& path, const std::string& text) {
  std::ofstream out(path);
  out << text;
  REQUIRE(out.good());
}

TEST_CASE("files: the shipped hostagent.yaml parses and equals the defaults") {
  const fs::path shipped = hostagent::testing::source_dir() / "packaging" / "hostagent.yaml";
  auto config = load_config(shipped);
  REQUIRE_MESSAGE(config.ok(), (config.ok() ? "" : config.error().message));
  CHECK(config->source == shipped.string());
  check_same_settings(*config, DaemonConfig{});
}

TEST_CASE("files: the shipped hostagent.yaml writes out every key") {
  // A key left out of the shipped file is one an operator cannot find by reading it.
  const fs::path shipped = hostagent::testing::source_dir() / "packaging" / "hostagent.yaml";
  std::vector<vmtemplates::yaml::Problem> problems;
  auto tree = vmtemplates::yaml::parse_yaml(testing::read_text_file(shipped), shipped.string(), problems);
  REQUIRE(tree.ok());
  CHECK(problems.empty());
  for (const char* path : {"libvirt.uri",
                           "libvirt.domain_type",
                           "libvirt.emulator",
                           "libvirt.connect_timeout",
                           "libvirt.reconnect_interval",
                           "host.sysfs_root",
                           "host.simulated",
                           "host.housekeeping_cpus",
                           "host.confine_host_processes",
                           "host.hugepages",
                           "templates.directories",
                           "images.directories",
                           "storage.pool",
                           "state_directory",
                           "console_log_directory",
                           "operations.workers",
                           "operations.stop_timeout",
                           "api.listen",
                           "api.tls.certificate",
                           "api.tls.key",
                           "api.tls.client_ca",
                           "api.token_file",
                           "api.limits.header_timeout",
                           "api.limits.request_timeout",
                           "api.limits.idle_timeout",
                           "api.limits.max_connections",
                           "api.limits.health_reserve",
                           "api.limits.max_connections_per_peer",
                           "api.limits.max_event_streams",
                           "devices.preparation",
                           "devices.bind_at_start",
                           "devices.gpu_ids",
                           "devices.sriov",
                           "devices.vf.vlan",
                           "devices.vf.qos",
                           "devices.vf.trust",
                           "devices.vf.spoofchk",
                           "devices.vf.link_state",
                           "devices.vf.min_tx_rate_mbps",
                           "devices.vf.max_tx_rate_mbps",
                           "devices.releasable_drivers",
                           "devices.reserved",
                           "hygiene.firmware",
                           "hygiene.gpu_scrub.timeout"}) {
    CAPTURE(path);
    const vmtemplates::yaml::Value* value = &*tree;
    std::stringstream parts(path);
    for (std::string part; value != nullptr && std::getline(parts, part, '.');) {
      const auto* entry = value->find(part);
      value = entry == nullptr ? nullptr : &entry->value;
    }
    REQUIRE(value != nullptr);
    CHECK_FALSE(value->is_null());
  }
}

TEST_CASE("files: load_config on a missing file is not_found and says what to do") {
  auto config = load_config("/nonexistent/hostagent.yaml");
  REQUIRE_FALSE(config.ok());
  CHECK(config.error().code == ErrorCode::not_found);
  CHECK(config.error().message ==
        "configuration file /nonexistent/hostagent.yaml does not exist: create it, or pass --config");
}

TEST_CASE("files: load_config names the file in every problem and refuses a directory") {
  testing::TempDir dir;
  const fs::path file = dir.path() / "hostagent.yaml";
  write_file(file, "operations:\n  workers: many\n");
  auto config = load_config(file);
  REQUIRE_FALSE(config.ok());
  CHECK(config.error().code == ErrorCode::invalid_argument);
  CHECK(config.error().message ==
        file.string() + ":2:12: operations.workers: found \"many\", expected a whole number 1..256");
  auto directory = load_config(dir.path());
  REQUIRE_FALSE(directory.ok());
  CHECK(directory.error().code == ErrorCode::invalid_argument);
  CHECK(directory.error().message ==
        "configuration file " + dir.path().string() + " is a directory: pass the file itself");
}

}  // namespace
}  // namespace hostagent::config
