// A VM's whole life over the API, and what it leaves behind: idempotent creates, events, metrics and
// the audit log; over real sockets against a daemon on test:///.
#include <doctest/doctest.h>

#include <boost/json/parse.hpp>
#include <boost/json/serialize.hpp>
#include <sstream>

#include "api_fixture.hpp"

namespace hostagent::testing {
namespace {

// Sends a change, expects 202 with Location, waits for the operation; returns the ended operation.
boost::json::value run(ApiFixture& api, const std::string& method, const std::string& target,
                       const std::string& body = "") {
  const auto response = api.request(method, target, body, body.empty() ? "" : "application/json");
  REQUIRE_MESSAGE(response.status == 202, (method + " " + target + ": " + response.body));
  const auto id = text(response.json().at("id"));
  CHECK(response.headers.at("location") == "/v1/operations/" + id);
  auto ended = api.wait_operation(id);
  CHECK_MESSAGE(text(ended.at("state")) == "succeeded", boost::json::serialize(ended));
  return ended;
}

std::string vm_state(ApiFixture& api, const std::string& name) {
  const auto response = api.request("GET", "/v1/vms/" + name);
  REQUIRE_MESSAGE(response.status == 200, response.body);
  return text(response.json().at("state"));
}

}  // namespace

TEST_CASE("a VM goes through create, stop, start, reboot and delete over the API") {
  ApiFixture api;
  api.start();
  const auto created = run(api, "POST", "/v1/vms", api.create_body("train-0"));
  CHECK(text(created.at("kind")) == "create");
  CHECK(text(created.at("vm")) == "train-0");
  CHECK(created.at("error").is_null());
  CHECK(created.at("step_count").as_int64() >= created.at("step_number").as_int64());
  CHECK(!text(created.at("finished_at")).empty());

  const auto vm = api.request("GET", "/v1/vms/train-0").json();
  CHECK(text(vm.at("state")) == "running");
  CHECK(vm.at("managed").as_bool());
  CHECK(text(vm.at("record").at("template")) == "gx3-16x128x1h100");
  const auto& held = vm.at("record").at("holds").at("devices").as_array();
  REQUIRE(!held.empty());

  const auto xml = api.request("GET", "/v1/vms/train-0/domain-xml");
  CHECK(xml.status == 200);
  CHECK(xml.content_type.find("application/xml") == 0);
  CHECK(xml.body.find("<name>train-0</name>") != std::string::npos);
  const auto nccl = api.request("GET", "/v1/vms/train-0/nccl-topology");
  CHECK_MESSAGE(nccl.status == 200, nccl.body);
  CHECK(nccl.content_type.find("application/xml") == 0);
  CHECK(nccl.body.find("<system") != std::string::npos);

  // What it holds shows in devices and capacity.
  const auto device = api.request("GET", "/v1/devices/" + text(held[0])).json();
  CHECK(text(device.at("held_by")) == "train-0");
  const auto free_gpus = api.request("GET", "/v1/devices?role=gpu&free=true").json().at("devices").as_array();
  CHECK(free_gpus.size() == 7);
  const auto capacity = api.request("GET", "/v1/host/capacity").json();
  CHECK(capacity.at("totals").at("gpus").at("free").as_int64() == 7);
  CHECK(capacity.at("totals").at("cpus").at("held").as_int64() >= 16);

  const auto listed = api.request("GET", "/v1/vms").json().at("vms").as_array();
  bool found = false;
  for (const auto& entry : listed) found = found || text(entry.at("name")) == "train-0";
  CHECK(found);

  run(api, "POST", "/v1/vms/train-0/stop", R"({"force":true})");
  CHECK(vm_state(api, "train-0").rfind("shut", 0) == 0);  // the service words libvirt's state
  run(api, "POST", "/v1/vms/train-0/start");
  CHECK(vm_state(api, "train-0") == "running");
  CHECK(text(run(api, "POST", "/v1/vms/train-0/reboot").at("kind")) == "reboot");
  CHECK(vm_state(api, "train-0") == "running");

  const auto operations = api.request("GET", "/v1/operations").json().at("operations").as_array();
  REQUIRE(operations.size() >= 4);
  CHECK(text(operations[0].at("kind")) == "reboot");  // newest first

  run(api, "DELETE", "/v1/vms/train-0");
  CHECK(api.request("GET", "/v1/vms/train-0").status == 404);
  CHECK(api.request("GET", "/v1/host/capacity").json().at("totals").at("gpus").at("free").as_int64() == 8);
}

TEST_CASE("a replayed create returns the same operation, a conflicting replay and a taken name are 409") {
  ApiFixture api;
  api.start();
  const auto body = api.create_body("vm-a", "gx3-16x128x1h100", R"(,"request_id":"req-1")");
  const auto first = api.request("POST", "/v1/vms", body, "application/json");
  REQUIRE_MESSAGE(first.status == 202, first.body);
  const auto again = api.request("POST", "/v1/vms", body, "application/json");
  REQUIRE_MESSAGE(again.status == 202, again.body);
  CHECK(text(again.json().at("id")) == text(first.json().at("id")));
  CHECK(text(api.wait_operation(text(first.json().at("id"))).at("state")) == "succeeded");
  const auto after_end = api.request("POST", "/v1/vms", body, "application/json");
  CHECK(after_end.status == 202);
  CHECK(text(after_end.json().at("id")) == text(first.json().at("id")));

  const auto other_template = api.create_body("vm-a", "gx3-32x256x2h100", R"(,"request_id":"req-1")");
  const auto conflict = api.request("POST", "/v1/vms", other_template, "application/json");
  CHECK_MESSAGE(conflict.status == 409, conflict.body);
  CHECK(text(conflict.json().at("code")) == "conflict");

  const auto taken = api.request("POST", "/v1/vms", api.create_body("vm-a"), "application/json");
  CHECK_MESSAGE(taken.status == 409, taken.body);
  CHECK(text(taken.json().at("code")) == "conflict");
  const auto foreign = api.request("POST", "/v1/vms", api.create_body("test"), "application/json");
  CHECK_MESSAGE(foreign.status == 409, foreign.body);  // test:///default's own domain
}

// What a create can be refused for without touching the host is refused before any operation
// begins: the answer names the field, and nothing is queued, placed or defined.
TEST_CASE(
    "a create with a multicast MAC, a malformed UUID, MACs its VFs cannot take or a taken name is refused at once") {
  ApiFixture api;
  api.start();
  run(api, "POST", "/v1/vms", api.create_body("vm-a"));  // gx3-16x128x1h100: one GPU, one VF
  const auto operations = api.request("GET", "/v1/operations").json().at("operations").as_array().size();
  const auto free_gpus = api.request("GET", "/v1/host/capacity").json().at("totals").at("gpus").at("free");
  struct Refusal {
    const char* name;
    std::string extra;
    int status;
    const char* field;
    const char* words;
  };
  const Refusal refusals[] = {
      {"vm-multicast", R"(,"macs":["01:00:5e:00:00:01"])", 400, "macs[0]", "is a multicast address"},
      {"vm-uuid", R"(,"uuid":"6b29fc40-ca47-1067-b31d-00dd010662dz")", 400, "uuid", "is not a UUID"},
      {"vm-two-macs", R"(,"macs":["02:00:00:00:00:01","02:00:00:00:00:02"])", 400, "macs",
       "gives the VM 1 NIC VFs and the request gives 2 MAC addresses"},
      {"vm-a", "", 409, "name", "a VM named \"vm-a\" exists"},
  };
  for (const auto& refusal : refusals) {
    CAPTURE(refusal.name);
    CAPTURE(refusal.extra);
    const auto answer = api.request("POST", "/v1/vms", api.create_body(refusal.name, "gx3-16x128x1h100", refusal.extra),
                                    "application/json");
    CHECK_MESSAGE(answer.status == refusal.status, answer.body);
    CHECK(text(answer.json().at("field")) == refusal.field);
    CHECK_MESSAGE(text(answer.json().at("detail")).find(refusal.words) != std::string::npos, answer.body);
    if (std::string(refusal.name) != "vm-a")
      CHECK(api.request("GET", "/v1/vms/" + std::string(refusal.name)).status == 404);
  }
  CHECK(api.request("GET", "/v1/operations").json().at("operations").as_array().size() == operations);
  CHECK(api.request("GET", "/v1/host/capacity").json().at("totals").at("gpus").at("free") == free_gpus);

  // A UUID in upper case is that UUID: kept, answered and given to libvirt in lower case, and the
  // same UUID in lower case is then the other VM's.
  run(api, "POST", "/v1/vms",
      api.create_body("vm-b", "gx3-16x128x1h100", R"(,"uuid":"6B29FC40-CA47-1067-B31D-00DD010662DA")"));
  CHECK(text(api.request("GET", "/v1/vms/vm-b").json().at("uuid")) == "6b29fc40-ca47-1067-b31d-00dd010662da");
  CHECK(api.request("GET", "/v1/vms/vm-b/domain-xml").body.find("<uuid>6b29fc40-ca47-1067-b31d-00dd010662da</uuid>") !=
        std::string::npos);
  const auto twin =
      api.request("POST", "/v1/vms",
                  api.create_body("vm-c", "gx3-16x128x1h100", R"(,"uuid":"6b29fc40-ca47-1067-b31d-00dd010662da")"),
                  "application/json");
  CHECK_MESSAGE(twin.status == 409, twin.body);
  CHECK(text(twin.json().at("field")) == "uuid");
}

TEST_CASE("the event stream carries a create's operation, vm and device events") {
  ApiFixture api;
  api.start();
  auto reader = EventStreamReader::open(api.socket_path());
  REQUIRE_MESSAGE(reader.ok(), reader.error().message);
  CHECK((*reader)->status() == 200);
  CHECK((*reader)->content_type().find("text/event-stream") == 0);

  run(api, "POST", "/v1/vms", api.create_body("ev-0"));
  const auto seen = (*reader)->read_until(
      [](const std::string& text) {
        // The frame that says so whole: reads end wherever the socket's bytes do.
        const auto succeeded = text.find("\"state\":\"succeeded\"");
        return succeeded != std::string::npos && text.find("\n\n", succeeded) != std::string::npos &&
               text.find("event: vm\n") != std::string::npos && text.find("event: device\n") != std::string::npos;
      },
      std::chrono::seconds(30));
  CHECK_MESSAGE(seen.find("event: operation\n") != std::string::npos, seen);
  CHECK(seen.find("event: vm\n") != std::string::npos);
  CHECK(seen.find("event: device\n") != std::string::npos);

  // Every frame: id N (increasing), event, one data line of JSON, blank line. Only whole frames:
  // the read ends wherever the socket's bytes did, maybe inside a frame that followed the last one
  // waited for.
  std::istringstream lines(seen.substr(0, seen.rfind("\n\n") + 2));
  std::string line;
  long last_id = 0;
  int frames = 0;
  while (std::getline(lines, line)) {
    if (line.rfind("id: ", 0) != 0) continue;
    const long id = std::stol(line.substr(4));
    CHECK(id > last_id);
    last_id = id;
    std::string event, data, blank;
    REQUIRE(std::getline(lines, event));
    REQUIRE(std::getline(lines, data));
    REQUIRE(std::getline(lines, blank));
    CHECK(event.rfind("event: ", 0) == 0);
    REQUIRE(data.rfind("data: ", 0) == 0);
    boost::system::error_code ec;
    const auto json = boost::json::parse(data.substr(6), ec);
    CHECK_MESSAGE(!ec, data);
    if (!ec) CHECK(text(json.at("vm")) == "ev-0");
    CHECK(blank.empty());
    ++frames;
  }
  CHECK(frames >= 3);
}

TEST_CASE("metrics expose every family of docs/api.md") {
  ApiFixture api;
  api.start();
  run(api, "POST", "/v1/vms", api.create_body("m-0"));
  CHECK(api.request("GET", "/v1/nothing").status == 404);
  const auto metrics = api.request("GET", "/v1/metrics");
  REQUIRE(metrics.status == 200);
  CHECK(metrics.content_type.find("text/plain; version=0.0.4") == 0);
  const auto& body = metrics.body;
  for (const char* family :
       {"hostagent_vms gauge", "hostagent_operation_duration_seconds histogram", "hostagent_operations_in_flight gauge",
        "hostagent_free_cpus gauge", "hostagent_free_gpus gauge", "hostagent_free_vfs gauge",
        "hostagent_free_hugepages gauge", "hostagent_libvirt_connected gauge",
        "hostagent_libvirt_connection_losses_total counter", "hostagent_device_present gauge",
        "hostagent_device_link_degraded gauge", "hostagent_device_aer_errors_total counter",
        "hostagent_http_requests_total counter", "hostagent_http_request_duration_seconds histogram",
        "hostagent_http_connections gauge", "hostagent_http_event_streams gauge",
        "hostagent_http_connections_shed_total counter", "hostagent_vm_start_phase_seconds histogram"}) {
    CAPTURE(family);
    CHECK(body.find(std::string("# TYPE ") + family + "\n") != std::string::npos);
  }
  int running = 0;  // test:///default's own "test" domain runs too, as a foreign VM
  const auto vms = api.request("GET", "/v1/vms").json();
  for (const auto& vm : vms.at("vms").as_array()) {
    running += text(vm.at("state")) == "running" ? 1 : 0;
  }
  CHECK(running >= 1);
  CHECK_MESSAGE(body.find("hostagent_vms{state=\"running\"} " + std::to_string(running) + "\n") != std::string::npos,
                body);
  CHECK(body.find("hostagent_operation_duration_seconds_count{kind=\"create\",result=\"succeeded\"} 1\n") !=
        std::string::npos);
  // The create's phases, each once, under its template.
  for (const char* phase : {"placement", "render", "prepare_devices", "define", "launch", "resume"}) {
    CAPTURE(phase);
    CHECK(body.find(std::string("hostagent_vm_start_phase_seconds_count{kind=\"create\",phase=\"") + phase +
                    "\",template=\"") != std::string::npos);
  }
  CHECK(body.find("hostagent_libvirt_connected 1\n") != std::string::npos);
  CHECK(body.find("hostagent_http_requests_total{method=\"POST\",code=\"202\"} 1\n") != std::string::npos);
  CHECK(body.find("hostagent_http_requests_total{method=\"GET\",code=\"404\"} 1\n") != std::string::npos);
  CHECK(body.find("hostagent_free_gpus{node=\"0\"} ") != std::string::npos);
  CHECK(body.find("hostagent_device_present{device=\"") != std::string::npos);
  CHECK(body.find("hostagent_http_request_duration_seconds_bucket{le=\"+Inf\"} ") != std::string::npos);
  // The scrape's own connection holds a general slot; nothing was shed.
  CHECK(body.find("hostagent_http_connections{slot=\"general\"} 0\n") == std::string::npos);
  CHECK(body.find("hostagent_http_connections{slot=\"reserve\"} 0\n") != std::string::npos);
  CHECK(body.find("hostagent_http_connections_shed_total{reason=\"evicted\"} 0\n") != std::string::npos);
}

TEST_CASE("every attempted change is audited on one JSON line in order, reads and unauthenticated noise are not") {
  ApiFixture api;
  api.start();
  const auto created = api.request(
      "POST", "/v1/vms", api.create_body("au-0", "gx3-16x128x1h100", R"(,"request_id":"r-7")"), "application/json");
  REQUIRE(created.status == 202);
  const auto id = text(created.json().at("id"));
  api.wait_operation(id);
  CHECK(api.request("POST", "/v1/vms", "{}", "application/json").status == 400);
  CHECK(api.request("GET", "/v1/vms").status == 200);
  CHECK(api.request("DELETE", "/v1/vms/x", "", "", ApiFixture::kReaderToken).status == 403);
  // No token, or a wrong one, a hundred times: counted in the metrics, not one line each.
  for (int i = 0; i < 50; ++i) {
    CHECK(api.tcp_request({.method = "POST", .target = "/v1/vms/au-0/stop"}).status == 401);
    CHECK(api.tcp_request(
                 {.method = "DELETE", .target = "/v1/vms/au-0", .headers = {{"Authorization", "Bearer not-the-token"}}})
              .status == 401);
  }
  CHECK(api.request("POST", "/v1/vms/au-0/stop", R"({"force":true})", "application/json").status == 202);
  const auto metrics = api.request("GET", "/v1/metrics").body;
  CHECK(metrics.find("hostagent_http_requests_total{method=\"POST\",code=\"401\"} 50\n") != std::string::npos);
  CHECK(metrics.find("hostagent_http_requests_total{method=\"DELETE\",code=\"401\"} 50\n") != std::string::npos);
  api.stop();

  std::istringstream lines(read_text_file(api.audit_log()));
  std::vector<boost::json::object> entries;
  std::string line;
  while (std::getline(lines, line)) entries.push_back(boost::json::parse(line).as_object());
  REQUIRE(entries.size() == 4);
  // In the order the client saw the answers: each line is written before its answer.
  const auto& create = entries[0];
  CHECK(text(create.at("method")) == "POST");
  CHECK(text(create.at("target")) == "/v1/vms");
  CHECK(create.at("status").as_int64() == 202);
  CHECK(text(create.at("operation")) == id);
  CHECK(text(create.at("vm")) == "au-0");
  CHECK(text(create.at("template")) == "gx3-16x128x1h100");
  CHECK(text(create.at("request_id")) == "r-7");
  CHECK(text(create.at("principal")).rfind("uid:", 0) == 0);
  CHECK(text(create.at("role")) == "operator");
  CHECK(text(create.at("remote")) == "unix");
  CHECK(!text(create.at("time")).empty());
  CHECK(entries[1].at("status").as_int64() == 400);  // it named nothing that parsed
  CHECK(entries[1].at("operation").is_null());
  CHECK(entries[1].at("vm").is_null());
  CHECK(text(entries[2].at("principal")) == "token:reader");
  CHECK(entries[2].at("status").as_int64() == 403);
  CHECK(text(entries[2].at("remote")).rfind("127.0.0.1:", 0) == 0);
  CHECK(text(entries[3].at("vm")) == "au-0");
  CHECK(entries[3].at("template").is_null());
  CHECK(entries[3].at("status").as_int64() == 202);
  CHECK(text(entries[3].at("operation")) != id);
}

}  // namespace hostagent::testing
