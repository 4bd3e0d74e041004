// config values: the defaults, every key read from a file, the embedded default, and the accepted
// forms of durations (listen addresses: tests/common/test_listen_address.cpp).
#include <doctest/doctest.h>

#include "config_checks.hpp"
#include "hostagent/api/http_server.hpp"
#include "hostagent/config/daemon_config.hpp"

namespace hostagent::config {
namespace {

using std::chrono::milliseconds;

TEST_CASE("values: an empty file takes every documented default") {
  const DaemonConfig config = valid("");
  CHECK(config.source == "c.yaml");
  CHECK(config.libvirt_uri == "qemu:///system");
  CHECK(config.domain_type == "kvm");
  CHECK(config.emulator.empty());
  CHECK(config.libvirt_connect_timeout == milliseconds(60000));
  CHECK(config.libvirt_reconnect_interval == milliseconds(2000));
  CHECK(config.sysfs_root == "/");
  CHECK(config.simulated_host.empty());
  CHECK(config.housekeeping_cpus.empty());
  CHECK_FALSE(config.confine_host_processes);
  CHECK(config.template_directories ==
        std::vector<std::filesystem::path>{"/usr/share/hostagent/templates", "/etc/hostagent/templates.d"});
  CHECK(config.image_directories == std::vector<std::filesystem::path>{"/var/lib/hostagent/images"});
  CHECK(config.storage_pool == "default");
  CHECK(config.state_directory == "/var/lib/hostagent");
  CHECK(config.console_log_directory == "/var/log/hostagent/console");
  CHECK(config.operation_workers == 8);
  CHECK(config.stop_timeout == milliseconds(60000));
  CHECK(config.api.listen == std::vector<std::string>{"unix:/run/hostagent/hostagent.sock"});
  CHECK(config.api.tls.certificate.empty());
  CHECK(config.api.tls.key.empty());
  CHECK(config.api.tls.client_ca.empty());
  CHECK(config.api.token_file.empty());
  // The server's own defaults, which the daemon hands it unchanged.
  const api::ServerLimits server;
  CHECK(config.api.limits.header_timeout == server.header_timeout);
  CHECK(config.api.limits.request_timeout == server.request_timeout);
  CHECK(config.api.limits.idle_timeout == server.idle_timeout);
  CHECK(config.api.limits.max_connections == server.max_connections);
  CHECK(config.api.limits.health_reserve == server.health_reserve);
  CHECK(config.api.limits.max_connections_per_peer == server.max_connections_per_peer);
  CHECK(config.api.limits.max_event_streams == server.max_event_streams);
}

TEST_CASE("values: every key of a full file is read") {
  const DaemonConfig config = valid(
      "libvirt:\n"
      "  uri: qemu+ssh://root@host1/system\n"
      "  domain_type: qemu\n"
      "  emulator: /usr/libexec/qemu-kvm\n"
      "  connect_timeout: 500ms\n"
      "  reconnect_interval: 2m\n"
      "host:\n"
      "  sysfs_root: /srv/snapshots/vela2\n"
      "  simulated: \"\"\n"
      "  housekeeping_cpus: 0-3,96-99\n"
      "  confine_host_processes: true\n"
      "  hugepages:\n"
      "    - {node: 0, size: 1G, pages: 800}\n"
      "    - {node: 1, size: 2MiB, pages: 0}\n"
      "templates:\n"
      "  directories: [/opt/templates, /etc/hostagent/templates.d]\n"
      "images:\n"
      "  directories: [/srv/images, /var/lib/libvirt/images]\n"
      "storage:\n"
      "  pool: vm-disks\n"
      "state_directory: /srv/hostagent/state\n"
      "console_log_directory: /srv/hostagent/console\n"
      "operations:\n"
      "  workers: 256\n"
      "  stop_timeout: 1h\n"
      "api:\n"
      "  listen: [\"unix:/run/ha.sock\", \"tcp://0.0.0.0:8443\", \"tcp://[::1]:65535\"]\n"
      "  tls:\n"
      "    certificate: /etc/hostagent/tls/cert.pem\n"
      "    key: /etc/hostagent/tls/key.pem\n"
      "    client_ca: /etc/hostagent/tls/ca.pem\n"
      "  token_file: /etc/hostagent/token\n"
      "  limits:\n"
      "    header_timeout: 2s\n"
      "    request_timeout: 20s\n"
      "    idle_timeout: 5m\n"
      "    max_connections: 1024\n"
      "    health_reserve: 32\n"
      "    max_connections_per_peer: 128\n"
      "    max_event_streams: 8\n");
  CHECK(config.libvirt_uri == "qemu+ssh://root@host1/system");
  CHECK(config.domain_type == "qemu");
  CHECK(config.emulator == "/usr/libexec/qemu-kvm");
  CHECK(config.libvirt_connect_timeout == milliseconds(500));
  CHECK(config.libvirt_reconnect_interval == milliseconds(120000));
  CHECK(config.sysfs_root == "/srv/snapshots/vela2");
  CHECK(config.simulated_host.empty());
  CHECK(config.housekeeping_cpus == std::vector<int>{0, 1, 2, 3, 96, 97, 98, 99});
  CHECK(config.confine_host_processes);
  CHECK(config.host_hugepages == std::vector<config::HugepagePoolConfig>{{0, 1ULL << 30, 800}, {1, 2ULL << 20, 0}});
  CHECK(config.template_directories ==
        std::vector<std::filesystem::path>{"/opt/templates", "/etc/hostagent/templates.d"});
  CHECK(config.image_directories == std::vector<std::filesystem::path>{"/srv/images", "/var/lib/libvirt/images"});
  CHECK(config.storage_pool == "vm-disks");
  CHECK(config.state_directory == "/srv/hostagent/state");
  CHECK(config.console_log_directory == "/srv/hostagent/console");
  CHECK(config.operation_workers == 256);
  CHECK(config.stop_timeout == milliseconds(3600000));
  CHECK(config.api.listen == std::vector<std::string>{"unix:/run/ha.sock", "tcp://0.0.0.0:8443", "tcp://[::1]:65535"});
  CHECK(config.api.tls.certificate == "/etc/hostagent/tls/cert.pem");
  CHECK(config.api.tls.key == "/etc/hostagent/tls/key.pem");
  CHECK(config.api.tls.client_ca == "/etc/hostagent/tls/ca.pem");
  CHECK(config.api.token_file == "/etc/hostagent/token");
  const ApiLimitsConfig& limits = config.api.limits;
  CHECK(limits.header_timeout == milliseconds(2000));
  CHECK(limits.request_timeout == milliseconds(20000));
  CHECK(limits.idle_timeout == milliseconds(300000));
  CHECK(limits.max_connections == 1024);
  CHECK(limits.health_reserve == 32);
  CHECK(limits.max_connections_per_peer == 128);
  CHECK(limits.max_event_streams == 8);
}

TEST_CASE("values: a simulated host and libvirt's test driver") {
  const DaemonConfig config = valid(
      "libvirt: {uri: \"test:///default\", domain_type: test}\n"
      "host: {simulated: vela2}\n"
      "api: {listen: [\"tcp://localhost:1\"], token_file: /etc/hostagent/token}\n");
  CHECK(config.libvirt_uri == "test:///default");
  CHECK(config.domain_type == "test");
  CHECK(config.simulated_host == "vela2");
  CHECK(config.sysfs_root == "/");
  CHECK(config.api.listen == std::vector<std::string>{"tcp://localhost:1"});
}

TEST_CASE("values: the placement section, and its defaults: in no fleet") {
  const DaemonConfig none = valid("");
  CHECK(none.placement.url.empty());
  CHECK(none.placement.interval == std::chrono::seconds(60));
  CHECK(none.placement.claim_grace == std::chrono::minutes(10));
  const DaemonConfig config = valid(
      "placement: {url: \"https://placement.example.net:8778/placement\", token_file: /etc/hostagent/placement-token,\n"
      "  ca_file: /etc/hostagent/ca.pem, host_name: gpu-r12-07, interval: 5m, claim_grace: 30m}\n");
  CHECK(config.placement.url == "https://placement.example.net:8778/placement");
  CHECK(config.placement.token_file == "/etc/hostagent/placement-token");
  CHECK(config.placement.ca_file == "/etc/hostagent/ca.pem");
  CHECK(config.placement.host_name == "gpu-r12-07");
  CHECK(config.placement.interval == std::chrono::minutes(5));
  CHECK(config.placement.claim_grace == std::chrono::minutes(30));
  CHECK(valid("placement: {host_name: \"\"}\n").placement.host_name.empty());  // the machine's host name
}

TEST_CASE("values: a null section or key keeps its default") {
  const DaemonConfig config = valid("libvirt:\nhost: ~\napi: {listen: ~, tls: ~}\noperations: {workers: }\n");
  CHECK(config.libvirt_uri == "qemu:///system");
  CHECK(config.api.listen == std::vector<std::string>{"unix:/run/hostagent/hostagent.sock"});
  CHECK(config.operation_workers == 8);
}

TEST_CASE("values: the embedded default runs on libvirt's test driver under the scratch directory") {
  const DaemonConfig config = embedded_default_config("workstation", "/tmp/ha-scratch");
  CHECK(config.source == "<embedded>");
  CHECK(config.libvirt_uri == "test:///default");
  CHECK(config.domain_type == "test");
  CHECK(config.simulated_host == "workstation");
  CHECK(config.sysfs_root == "/");
  CHECK(config.state_directory == "/tmp/ha-scratch/state");
  CHECK(config.console_log_directory == "/tmp/ha-scratch/console");
  CHECK(config.image_directories == std::vector<std::filesystem::path>{"/tmp/ha-scratch/images"});
  CHECK(config.storage_pool == "default-pool");
  CHECK(config.api.listen == std::vector<std::string>{"unix:/tmp/ha-scratch/hostagent.sock"});
  CHECK(config.api.audit_log == "/tmp/ha-scratch/audit.log");
  CHECK(config.template_directories == DaemonConfig{}.template_directories);
  CHECK(config.api.token_file.empty());
}

}  // namespace
}  // namespace hostagent::config
