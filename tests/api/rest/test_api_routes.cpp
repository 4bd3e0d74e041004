// The read routes and the service's answers through /v1, over real sockets against a daemon on
// test:///.
#include <doctest/doctest.h>

#include "api_fixture.hpp"

namespace hostagent::testing {

TEST_CASE("health, status, host and capacity answer over the unix socket") {
  ApiFixture api;
  api.start();
  const auto live = api.request("GET", "/v1/health/live");
  CHECK(live.status == 200);
  CHECK(text(live.json().at("status")) == "ok");
  const auto ready = api.request("GET", "/v1/health/ready");
  CHECK_MESSAGE(ready.status == 200, ready.body);
  CHECK(text(ready.json().at("status")) == "ready");

  const auto status = api.request("GET", "/v1/status").json();
  CHECK(status.at("ready").as_bool());
  CHECK(status.at("libvirt_connected").as_bool());
  CHECK(status.at("last_reconcile").is_object());

  const auto host = api.request("GET", "/v1/host");
  CHECK(host.status == 200);
  CHECK(host.content_type.find("application/json") == 0);
  const auto host_json = host.json();
  const auto& devices = host_json.at("pci_devices").as_array();
  int gpus = 0;
  for (const auto& device : devices) gpus += text(device.at("role")) == "gpu" ? 1 : 0;
  CHECK(gpus == 8);  // vela2: an HGX H100 board

  const auto capacity = api.request("GET", "/v1/host/capacity").json();
  CHECK(capacity.at("totals").at("gpus").at("total").as_int64() == gpus);
  CHECK(capacity.at("totals").at("gpus").at("free").as_int64() == gpus);
  const auto& nodes = capacity.at("nodes").as_array();
  REQUIRE(nodes.size() == 2);
  int64_t free_cpus = 0;
  for (const auto& node : nodes) free_cpus += node.at("cpus").at("free").as_int64();
  CHECK(free_cpus == capacity.at("totals").at("cpus").at("free").as_int64());
  CHECK(free_cpus > 0);
  CHECK(nodes[0].at("hugepages").as_array().size() > 0);
}

TEST_CASE("while libvirtd is away, ready is a 503 problem with one Retry-After, and live stays 200") {
  ApiFixture api;
  api.start();
  api.hypervisor().report_disconnected(true);
  const auto ready = api.request("GET", "/v1/health/ready");
  CHECK(ready.status == 503);
  CHECK(ready.content_type == "application/problem+json");
  CHECK(text(ready.json().at("code")) == "not_ready");
  CHECK(contains(text(ready.json().at("detail")), "libvirtd is not connected"));
  REQUIRE(ready.headers.count("retry-after") == 1);  // and, checked by every request, sent once
  CHECK(ready.headers.at("retry-after") == "5");
  CHECK(api.request("GET", "/v1/health/live").status == 200);
  CHECK_FALSE(api.request("GET", "/v1/status").json().at("libvirt_connected").as_bool());

  api.hypervisor().report_disconnected(false);
  CHECK(api.request("GET", "/v1/health/ready").status == 200);
}

TEST_CASE("devices list every PCI endpoint, filter by role and free, and answer one by address") {
  ApiFixture api;
  api.start();
  const auto all = api.request("GET", "/v1/devices").json().at("devices").as_array();
  REQUIRE(!all.empty());
  for (const auto& device : all) {
    const auto role = text(device.at("role"));
    CHECK(role != "switch-upstream");
    CHECK(role != "switch-downstream");
    CHECK(role != "root-port");
    CHECK(device.at("held_by").is_null());
  }
  const auto gpus = api.request("GET", "/v1/devices?role=gpu&free=true").json().at("devices").as_array();
  REQUIRE(gpus.size() == 8);
  for (const auto& gpu : gpus) CHECK(text(gpu.at("role")) == "gpu");
  CHECK(text(gpus[0].at("vendor_id")) == "0x10de");
  CHECK(gpus[0].at("switch").is_string());
  CHECK(gpus[0].at("iommu_group").is_int64());

  const std::string address = text(gpus[0].at("address"));
  const auto one = api.request("GET", "/v1/devices/" + address);
  CHECK(one.status == 200);
  CHECK(text(one.json().at("address")) == address);
  check_problem(api.request("GET", "/v1/devices/00ff:ff:1f.7"), 404, "not_found");
  CHECK(field_of(check_problem(api.request("GET", "/v1/devices/17:00.0"), 400, "invalid_argument")) == "address");
  CHECK(field_of(check_problem(api.request("GET", "/v1/devices?role=gpus"), 400, "invalid_argument")) == "role");

  // vela2 boots from 07:00.0: the host holds it, so it is listed with why, and never as free.
  const auto boot = api.request("GET", "/v1/devices/0000:07:00.0").json();
  CHECK(text(boot.at("host_use")) == "nvme0n1p1 mounted at /boot/efi; nvme0n1p2 mounted at /");
  CHECK(boot.at("held_by").is_null());
  const auto free_nvme = api.request("GET", "/v1/devices?role=nvme&free=true").json().at("devices").as_array();
  CHECK(free_nvme.size() == 8);
  for (const auto& nvme : free_nvme) {
    CHECK(text(nvme.at("address")) != "0000:07:00.0");
    CHECK(nvme.at("host_use").is_null());
  }
}

TEST_CASE("templates are listed, fetched and validated") {
  ApiFixture api;
  api.start();
  const auto list = api.request("GET", "/v1/templates").json().at("templates").as_array();
  bool found = false;
  for (const auto& shape : list) found = found || text(shape.at("name")) == "gx3-16x128x1h100";
  CHECK(found);
  const auto one = api.request("GET", "/v1/templates/gx3-16x128x1h100").json();
  CHECK(one.at("vcpus").as_int64() == 16);
  CHECK(one.at("gpus").at("count").as_int64() == 1);
  CHECK(one.at("memory_bytes").to_number<uint64_t>() == 128ULL << 30);
  check_problem(api.request("GET", "/v1/templates/no-such-shape"), 404, "not_found");

  const std::string valid = "name: mine\nextends: base-h100\nvcpus: 8\nmemory: 64GiB\ngpus:\n  count: 1\n";
  const auto accepted = api.request("POST", "/v1/templates/validate", valid, "application/yaml");
  REQUIRE_MESSAGE(accepted.status == 200, accepted.body);
  CHECK(accepted.json().at("valid").as_bool());
  CHECK(text(accepted.json().at("template").at("name")) == "mine");
  CHECK(accepted.json().at("template").at("gpus").at("count").as_int64() == 1);

  const std::string invalid = "name: mine\nvcpus: eight\nmemory: lots\nunknown_key: 1\n";
  const auto refused = api.request("POST", "/v1/templates/validate", invalid, "application/yaml");
  const auto problem = check_problem(refused, 422, "invalid_template");
  const auto& errors = problem.at("errors").as_array();
  CHECK(errors.size() >= 3);
  for (const auto& error : errors) CHECK(text(error).find("request:") == 0);

  const auto missing_parent =
      api.request("POST", "/v1/templates/validate", "name: x\nextends: nowhere\n", "application/yaml");
  check_problem(missing_parent, 422, "invalid_template");
  check_problem(api.request("POST", "/v1/templates/validate", valid, "application/json"), 415,
                "unsupported_media_type");
  check_problem(api.request("POST", "/v1/templates/validate", "a: [", "application/yaml"), 422, "invalid_template");
}

TEST_CASE("bad requests are 400 problems naming the field") {
  ApiFixture api;
  api.start();
  const auto image = api.create_body("x");  // makes the boot image
  struct Case {
    std::string body;
    std::string field;
  };
  const Case cases[] = {
      {"{\"name\":", "body"},
      {R"({"name":"a","template":"gx3-16x128x1h100","memory":1})", "memory"},
      {R"({"name":"a","template":7})", "template"},
      {R"({"template":"gx3-16x128x1h100"})", "name"},
      {R"({"name":"a/b","template":"gx3-16x128x1h100"})", "name"},
      {R"({"name":"a","template":"gx3-16x128x1h100","macs":[1]})", "macs[0]"},
  };
  for (const auto& c : cases) {
    CAPTURE(c.body);
    const auto problem =
        check_problem(api.request("POST", "/v1/vms", c.body, "application/json"), 400, "invalid_argument");
    CHECK(field_of(problem) == c.field);
    CHECK(text(problem.at("instance")) == "/v1/vms");
  }
  const auto unknown =
      check_problem(api.request("POST", "/v1/vms", R"({"name":"a","template":"t","memory":1})", "application/json"),
                    400, "invalid_argument");
  CHECK(text(unknown.at("detail")).find("the fields are name, template, request_id") != std::string::npos);
  CHECK(field_of(check_problem(api.request("POST", "/v1/vms/v/stop", R"({"force":1})", "application/json"), 400,
                               "invalid_argument")) == "force");
  CHECK(field_of(check_problem(api.request("GET", "/v1/vms/..."), 400, "invalid_argument")) == "name");
  // The service's own checks come back as 400 too, with the field it names.
  const auto relative = check_problem(
      api.request("POST", "/v1/vms", R"({"name":"a","template":"gx3-16x128x1h100","boot_image":"/x/../y"})",
                  "application/json"),
      400, "invalid_argument");
  CHECK(field_of(relative) == "boot_image");
}

// The routes' own refusals (404 for paths, 405, 415, 413, authentication and roles) are
// test_routes_on_fake_service.cpp's: these are the service's answers, through the API.
TEST_CASE("what the daemon does not have is 404") {
  ApiFixture api;
  api.start();
  check_problem(api.request("GET", "/v1/vms/ghost"), 404, "not_found");
  check_problem(api.request("GET", "/v1/vms/ghost/domain-xml"), 404, "not_found");
  check_problem(api.request("GET", "/v1/vms/ghost/nccl-topology"), 404, "not_found");
  check_problem(api.request("POST", "/v1/vms/ghost/start"), 404, "not_found");
  check_problem(api.request("DELETE", "/v1/vms/ghost"), 404, "not_found");
  check_problem(api.request("GET", "/v1/operations/op-999999"), 404, "not_found");
  check_problem(api.request("POST", "/v1/vms", R"({"name":"a","template":"no-such"})", "application/json"), 404,
                "not_found");
}

}  // namespace hostagent::testing
