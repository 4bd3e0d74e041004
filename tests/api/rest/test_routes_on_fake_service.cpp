// The routes of /v1 over real sockets against FakeVmService: what the API hands the service (one
// typed command per request, nothing for a request it refuses) and how it answers what the
// service says (every error code's status, failed operations, VMs, readiness, events). This suite
// links no libvirt and starts no daemon.
#include <doctest/doctest.h>

#include <boost/json.hpp>
#include <chrono>
#include <set>
#include <sstream>

#include <unistd.h>

#include "api_server.hpp"
#include "fake_vm_service.hpp"
#include "hostagent/vmtemplates/vm_template.hpp"
#include "simulated_hosts.hpp"

namespace hostagent::testing {
namespace {

std::map<std::string, vmtemplates::VmTemplate> shipped_templates() {
  auto templates = vmtemplates::load_template_dirs({shipped_templates_dir()});
  REQUIRE_MESSAGE(templates.ok(), templates.error().message);
  return std::move(templates).value();
}

struct FakeApi {
  FakeVmService service{discover_shared("vela2"), shipped_templates()};
  ApiServer server;

  FakeApi() { server.serve(service, api::RestApiOptions{}); }
  ~FakeApi() { server.stop_serving(); }

  ApiResponse request(const std::string& method, const std::string& target, const std::string& body = "",
                      const std::string& token = "") {
    return server.request(method, target, body, body.empty() ? "" : "application/json", token);
  }
  // What the service's usage says `vm` holds.
  void hold(const std::string& vm, std::vector<PciAddress> devices) {
    numa::Allocation allocation;
    allocation.vm = vm;
    allocation.devices = std::move(devices);
    service.set_held({allocation});
  }
  // A VM the fake holds, managed, with a record.
  void put_vm(const std::string& name) {
    service::VmView vm;
    vm.name = name;
    vm.uuid = "7d3c0a52-8f5e-4a3b-9c1d-2e4f6a8b0c1d";
    vm.managed = true;
    vm.state = "running";
    vm.record = service::ManagedVmView{};
    vm.record->template_name = "gx3-16x128x1h100";
    service.put_vm(vm, "<domain type='kvm'><name>" + name + "</name></domain>");
  }
};

// The first `count` GPUs of the simulated host, in address order.
std::vector<PciAddress> some_gpus(FakeApi& api, std::size_t count) {
  const auto listed = api.request("GET", "/v1/devices?role=gpu").json();
  std::vector<PciAddress> gpus;
  for (const auto& device : listed.at("devices").as_array()) {
    if (gpus.size() < count) gpus.push_back(*PciAddress::parse(text(device.at("address"))));
  }
  REQUIRE(gpus.size() == count);
  return gpus;
}

service::CleaningStepView cleaning_step(const std::string& name, const std::string& result, const std::string& detail,
                                        double seconds) {
  return service::CleaningStepView{name, result, detail, "2026-12-05T09:00:00Z", "2026-12-05T09:00:01Z", seconds};
}

// One cleaning as the evidence log would hold it.
service::CleaningRecordView cleaning_record(uint64_t sequence, const PciAddress& address, const std::string& outcome,
                                            std::vector<service::CleaningStepView> steps) {
  service::CleaningRecordView record;
  record.sequence = sequence;
  record.address = address;
  record.role = "gpu";
  record.vm = "train-0";
  record.outcome = outcome;
  record.started_at = "2026-12-05T09:00:00Z";
  record.finished_at = "2026-12-05T09:00:02Z";
  record.steps = std::move(steps);
  record.previous_sha256 = std::string(64, '0');
  record.sha256 = std::string(64, 'a');
  return record;
}

// Publishes until `wanted` has come (the stream subscribes when its request is handled); returns
// all the stream sent so far.
std::string publish_until_seen(FakeApi& api, EventStreamReader& stream, const service::ServiceEvent& event,
                               const std::string& wanted) {
  std::string seen;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (seen.find(wanted) == std::string::npos && std::chrono::steady_clock::now() < deadline) {
    api.service.publish(event);
    seen = stream.read_until([&](const std::string& got) { return got.find(wanted) != std::string::npos; },
                             std::chrono::milliseconds(200));
  }
  return seen;
}

}  // namespace

TEST_CASE("a create is one typed command on the service, answered 202 with the operation to poll") {
  FakeApi api;
  const std::string body =
      R"({"name":"train-0","template":"gx3-16x128x1h100","request_id":"r-1","boot_image":"/var/lib/images/u.qcow2",)"
      R"("macs":["52:54:00:00:00:01"],"ssh_authorized_keys":["ssh-ed25519 AAAA k@x"]})";
  const auto response = api.request("POST", "/v1/vms", body);
  REQUIRE_MESSAGE(response.status == 202, response.body);
  const auto id = text(response.json().at("id"));
  CHECK(response.headers.at("location") == "/v1/operations/" + id);
  CHECK(text(response.json().at("state")) == "queued");

  const auto creates = api.service.creates();
  REQUIRE(creates.size() == 1);
  CHECK(creates[0].name == "train-0");
  CHECK(creates[0].template_name == "gx3-16x128x1h100");
  CHECK(creates[0].request_id == "r-1");
  CHECK(creates[0].boot_image == "/var/lib/images/u.qcow2");
  CHECK(creates[0].macs == std::vector<MacAddress>{"52:54:00:00:00:01"});
  CHECK(creates[0].ssh_authorized_keys == std::vector<std::string>{"ssh-ed25519 AAAA k@x"});
  CHECK(creates[0].user_data.empty());

  api.service.end(id);
  const auto ended = api.request("GET", "/v1/operations/" + id).json();
  CHECK(text(ended.at("state")) == "succeeded");
  CHECK(ended.at("error").is_null());
}

// GET /v1/vms's body is kept by the list's version (api/rest/vm_list_body): a VM the service gained
// after one GET is in the next, and a VM whose state changed is listed as it is now.
TEST_CASE("GET /v1/vms answers the list as it is now, after the list changed between two reads") {
  FakeApi api;
  CHECK(api.request("GET", "/v1/vms").json().at("vms").as_array().empty());
  api.put_vm("vm1");
  const auto one = api.request("GET", "/v1/vms").json().at("vms").as_array();
  REQUIRE(one.size() == 1);
  CHECK(text(one[0].at("state")) == "running");
  CHECK(api.request("GET", "/v1/vms").json().at("vms").as_array() == one);  // unchanged: the same answer
  auto stopped = api.service.get_vm("vm1");
  REQUIRE(stopped.ok());
  stopped->state = "shut_off";
  api.service.put_vm(*stopped, "<domain type='kvm'><name>vm1</name></domain>");
  api.put_vm("vm2");
  const auto now = api.request("GET", "/v1/vms").json().at("vms").as_array();
  REQUIRE(now.size() == 2);
  CHECK(text(now[0].at("state")) == "shut_off");
  CHECK(text(now[1].at("name")) == "vm2");
}

TEST_CASE("each command on a VM reaches the service once, worded as the route says") {
  FakeApi api;
  api.put_vm("vm1");
  struct Command {
    std::string method;
    std::string target;
    std::string body;
  };
  const std::vector<Command> commands = {{"POST", "/v1/vms/vm1/start", ""},
                                         {"POST", "/v1/vms/vm1/stop", ""},
                                         {"POST", "/v1/vms/vm1/stop", R"({"force":true})"},
                                         {"POST", "/v1/vms/vm1/reboot", ""},
                                         {"DELETE", "/v1/vms/vm1", ""}};
  for (const auto& command : commands) {
    CAPTURE(command.target);
    CHECK(api.request(command.method, command.target, command.body).status == 202);
  }
  CHECK(api.service.commands() ==
        std::vector<std::string>{"start vm1", "stop vm1", "stop vm1 force", "reboot vm1", "delete vm1"});
  CHECK(api.service.operations().size() == 5);
  CHECK(api.request("GET", "/v1/operations").json().at("operations").as_array().size() == 5);
}

TEST_CASE("every error code the service answers becomes its status, with the field the error carries") {
  FakeApi api;
  api.put_vm("vm1");
  const std::vector<std::pair<ErrorCode, unsigned>> table = {
      {ErrorCode::invalid_argument, 400}, {ErrorCode::not_found, 404},   {ErrorCode::conflict, 409},
      {ErrorCode::does_not_fit, 409},     {ErrorCode::unsupported, 501}, {ErrorCode::unavailable, 503},
      {ErrorCode::parse_error, 500},      {ErrorCode::io_error, 500},    {ErrorCode::internal, 500}};
  for (const auto& row : table) {
    // Not a structured binding: clang 14 (the asan tree) cannot capture one in CAPTURE's lambda.
    const ErrorCode code = row.first;
    const unsigned status = row.second;
    CAPTURE(to_string(code));
    api.service.refuse_next(Error{code, "refused by the test", "macs"});
    const auto problem = check_problem(api.request("DELETE", "/v1/vms/vm1"), status, to_string(code));
    CHECK(text(problem.at("detail")) == "refused by the test");
    CHECK(text(problem.at("instance")) == "/v1/vms/vm1");
    // A field belongs to the caller's input: an invalid argument names one, and a conflict the
    // field another VM already has.
    const bool input = code == ErrorCode::invalid_argument || code == ErrorCode::conflict;
    CHECK(field_of(problem) == (input ? "macs" : ""));
  }
  CHECK(api.service.operations().empty());
  // The service's error stands as it said it, whatever its wording: no field read out of a message.
  api.service.refuse_next(Error{ErrorCode::invalid_argument, "boot_image: must be absolute"});
  CHECK(field_of(check_problem(api.request("DELETE", "/v1/vms/vm1"), 400, "invalid_argument")).empty());
}

TEST_CASE("a failed operation reports its error as the problem its code maps to") {
  FakeApi api;
  const auto begun = api.request("POST", "/v1/vms", R"({"name":"big","template":"gx3-16x128x1h100"})");
  REQUIRE(begun.status == 202);
  const auto id = text(begun.json().at("id"));
  api.service.end(id, Error{ErrorCode::does_not_fit, "needs 8 GPUs under distinct switches; 2 are free"});
  const auto ended = api.request("GET", "/v1/operations/" + id).json();
  CHECK(text(ended.at("state")) == "failed");
  const auto& error = ended.at("error");
  CHECK(error.at("status").as_int64() == 409);
  CHECK(text(error.at("code")) == "does_not_fit");
  CHECK(text(error.at("detail")) == "needs 8 GPUs under distinct switches; 2 are free");
  CHECK(text(error.at("instance")) == "/v1/operations/" + id);
}

TEST_CASE("a VM is answered with what the service holds for it, and its files from the service") {
  FakeApi api;
  service::VmView vm;
  vm.name = "train-0";
  vm.uuid = "7d3c0a52-8f5e-4a3b-9c1d-2e4f6a8b0c1d";
  vm.managed = true;
  vm.state = "running";
  vm.last_event = "started (booted)";
  service::ManagedVmView record;
  record.template_name = "gx3-16x128x1h100";
  record.request_id = "r-7";
  record.created_at = "2026-12-02T09:00:00Z";
  record.boot_image = "/var/lib/images/u.qcow2";
  record.disk_pool = "hostagent";
  record.disk_volume = "train-0.qcow2";
  record.macs = {"52:54:00:00:00:01"};
  record.allocation.vm = "train-0";
  record.allocation.cpus = {4, 5, 6, 7};
  record.allocation.devices = {PciAddress::parse("0000:1b:00.0").value()};
  record.nccl_topology = "<system version=\"1\"/>";
  record.rdma = {service::VfRdmaView{PciAddress::parse("0000:1b:00.2").value(), "mlx5_12", 1, "ACTIVE", "Ethernet", 3,
                                     "0c42:a103:0012:3456", ""}};
  vm.record = record;
  api.service.put_vm(vm, "<domain type='kvm'/>");

  const auto json = api.request("GET", "/v1/vms/train-0").json();
  CHECK(text(json.at("state")) == "running");
  CHECK(text(json.at("last_event")) == "started (booted)");
  const auto& got = json.at("record");
  CHECK(text(got.at("template")) == "gx3-16x128x1h100");
  CHECK(text(got.at("disk")) == "hostagent/train-0.qcow2");
  CHECK(text(got.at("holds").at("cpus")) == "4-7");
  CHECK(text(got.at("holds").at("devices").at(0)) == "0000:1b:00.0");
  CHECK(text(got.at("rdma").at(0).at("host_device")) == "mlx5_12");
  CHECK(got.at("rdma").at(0).at("roce_v2_gid_index").as_int64() == 3);
  CHECK(api.request("GET", "/v1/vms").json().at("vms").as_array().size() == 1);

  const auto xml = api.request("GET", "/v1/vms/train-0/domain-xml");
  CHECK(xml.content_type.find("application/xml") == 0);
  CHECK(xml.body == "<domain type='kvm'/>");
  CHECK(api.request("GET", "/v1/vms/train-0/nccl-topology").body == "<system version=\"1\"/>");
  check_problem(api.request("GET", "/v1/vms/ghost"), 404, "not_found");

  api.service.set_console_log("train-0", "[    0.000000] Linux version 6.1\nlogin: \x01\xff\n");
  const auto log = api.request("GET", "/v1/vms/train-0/console/log?tail=1");
  CHECK(log.status == 200);
  CHECK(log.content_type == "text/plain");
  CHECK(log.body == "login: \x01\xff\n");  // as the guest wrote it, bytes that are no UTF-8 too
  CHECK(log.headers.at("x-console-log-bytes") == "43");
  CHECK(api.request("GET", "/v1/vms/train-0/console/log").body.find("Linux version") == 15);
  check_problem(api.request("GET", "/v1/vms/ghost/console/log"), 404, "not_found");
}

TEST_CASE("ready follows the service's status: 503 with one Retry-After, live stays 200") {
  FakeApi api;
  CHECK(api.request("GET", "/v1/health/ready").status == 200);
  service::ServiceStatus status;
  status.ready = true;
  status.libvirt_connected = false;
  api.service.set_status(status);
  const auto away = check_problem(api.request("GET", "/v1/health/ready"), 503, "not_ready");
  CHECK(text(away.at("detail")).find("libvirtd is not connected") != std::string::npos);
  status.ready = false;
  status.libvirt_connected = true;
  api.service.set_status(status);
  const auto reconciling = api.request("GET", "/v1/health/ready");
  CHECK(text(check_problem(reconciling, 503, "not_ready").at("detail")).find("reconciling") != std::string::npos);
  REQUIRE(reconciling.headers.count("retry-after") == 1);  // and ApiServer checks it is sent once
  CHECK(reconciling.headers.at("retry-after") == "5");
  CHECK(api.request("GET", "/v1/health/live").status == 200);
}

TEST_CASE("an event the service publishes reaches a stream client as one frame") {
  FakeApi api;
  auto stream = EventStreamReader::open(api.server.socket_path());
  REQUIRE_MESSAGE(stream.ok(), stream.error().message);
  CHECK((*stream)->status() == 200);
  service::ServiceEvent event;
  event.kind = service::ServiceEvent::Kind::vm;
  event.vm = "train-0";
  event.vm_state = "running";
  event.detail = "started (booted)";
  // The stream subscribes when its request is handled; publish until the frame comes.
  std::string seen;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (seen.find("event: vm\n") == std::string::npos && std::chrono::steady_clock::now() < deadline) {
    api.service.publish(event);
    seen = (*stream)->read_until([](const std::string& got) { return got.find("event: vm\n") != std::string::npos; },
                                 std::chrono::milliseconds(200));
  }
  CHECK(seen.find("data: {\"vm\":\"train-0\",\"state\":\"running\",\"detail\":\"started (booted)\"}") !=
        std::string::npos);
}

TEST_CASE("routes refuse before the service: 404, 405 with Allow, 415 and 413, and nothing reaches it") {
  FakeApi api;
  check_problem(api.request("GET", "/v1/nothing"), 404, "not_found");
  check_problem(api.request("GET", "/v2/vms"), 404, "not_found");
  const auto put = api.request("PUT", "/v1/vms", "{}");
  check_problem(put, 405, "method_not_allowed");
  CHECK(put.headers.at("allow") == "GET, HEAD, POST");
  const auto get_start = api.request("GET", "/v1/vms/a/start");
  check_problem(get_start, 405, "method_not_allowed");
  CHECK(get_start.headers.at("allow") == "POST");
  check_problem(api.server.request("POST", "/v1/vms", R"({"name":"a","template":"t"})", "text/plain"), 415,
                "unsupported_media_type");
  check_problem(api.server.request("POST", "/v1/vms", R"({"name":"a","template":"t"})"), 415, "unsupported_media_type");
  const std::string big = R"({"name":"a","template":"t","user_data":")" + std::string(2U << 20, 'x') + "\"}";
  CHECK(api.request("POST", "/v1/vms", big).status == 413);
  CHECK(field_of(check_problem(api.request("POST", "/v1/vms", R"({"name":"a/b","template":"t"})"), 400,
                               "invalid_argument")) == "name");
  CHECK(api.service.creates().empty());
  CHECK(api.service.commands().empty());
}

TEST_CASE("HEAD is served on every resource GET reads, with the GET's headers and no body") {
  FakeApi api;
  api.put_vm("vm1");
  for (const char* path :
       {"/v1/health/live", "/v1/health/ready", "/v1/status", "/v1/host", "/v1/host/capacity", "/v1/devices",
        "/v1/cleaning", "/v1/templates", "/v1/vms", "/v1/vms/vm1", "/v1/operations", "/v1/metrics"}) {
    CAPTURE(path);
    const auto get = api.request("GET", path);
    const auto head = api.request("HEAD", path);
    CHECK(head.status == get.status);
    CHECK(head.body.empty());
    CHECK(head.content_type == get.content_type);
  }
  // An event stream's HEAD: its headers, and the connection is not held.
  const auto events = api.request("HEAD", "/v1/events");
  CHECK(events.status == 200);
  CHECK(events.content_type == "text/event-stream");
  CHECK(events.body.empty());
  // A path with no GET is still 405, and says so.
  const auto start = api.request("HEAD", "/v1/vms/vm1/start");
  CHECK(start.status == 405);
  CHECK(start.body.empty());
  CHECK(start.headers.at("allow") == "POST");
}

TEST_CASE("TCP needs a bearer token, a reader may only read, and a refused change never reaches the service") {
  FakeApi api;
  api.put_vm("vm1");
  ClientRequest anonymous{"GET", "/v1/vms", "", "", {}};
  const auto unauthenticated = api.server.tcp_request(anonymous);
  check_problem(unauthenticated, 401, "unauthenticated");
  CHECK(unauthenticated.headers.at("www-authenticate").find("Bearer") == 0);
  check_problem(api.request("GET", "/v1/vms", "", "wrong-token"), 401, "unauthenticated");

  CHECK(api.request("GET", "/v1/vms", "", ApiServer::kReaderToken).status == 200);
  CHECK(api.request("GET", "/v1/host/capacity", "", ApiServer::kReaderToken).status == 200);
  const std::string body = R"({"name":"r","template":"gx3-16x128x1h100"})";
  check_problem(api.request("POST", "/v1/vms", body, ApiServer::kReaderToken), 403, "forbidden");
  check_problem(api.request("DELETE", "/v1/vms/vm1", "", ApiServer::kReaderToken), 403, "forbidden");
  CHECK(api.service.creates().empty());
  CHECK(api.service.commands().empty());
  // A HEAD reads: a reader gets what an operator gets, the headers of the GET and no body.
  const auto get = api.request("GET", "/v1/vms", "", ApiServer::kReaderToken);
  for (const char* token : {ApiServer::kReaderToken, ApiServer::kOperatorToken}) {
    CAPTURE(token);
    const auto head = api.request("HEAD", "/v1/vms", "", token);
    CHECK(head.status == 200);
    CHECK(head.body.empty());
    CHECK(head.headers.at("content-length") == std::to_string(get.body.size()));
    CHECK(head.content_type == get.content_type);
  }
  // An operator's change passes authentication and reaches the service.
  CHECK(api.request("POST", "/v1/vms", body, ApiServer::kOperatorToken).status == 202);
  CHECK(api.service.creates().size() == 1);
}

TEST_CASE(
    "a quarantined device is listed, shown on the device, kept out of free, and cleared by an operator, audited") {
  FakeApi api;
  const auto gpu = *PciAddress::parse("0000:18:00.0");
  api.service.quarantine({gpu, "bind to vfio-pci", "did not bind", "train-0", "2026-12-04T17:20:00Z"});
  api.service.quarantine(
      {*PciAddress::parse("0000:ee:00.0"), "health", "gone from the bus", "", "2026-12-04T17:21:00Z"});

  const auto listed = api.request("GET", "/v1/quarantine").json().at("devices").as_array();
  REQUIRE(listed.size() == 2);
  CHECK(text(listed[0].at("address")) == "0000:18:00.0");
  CHECK(text(listed[0].at("step")) == "bind to vfio-pci");
  CHECK(text(listed[0].at("vm")) == "train-0");
  CHECK(listed[1].at("vm").is_null());  // one the host no longer shows is listed all the same
  const auto device = api.request("GET", "/v1/devices/0000:18:00.0").json();
  CHECK(text(device.at("quarantine").at("reason")) == "did not bind");
  CHECK(api.request("GET", "/v1/devices/0000:29:00.0").json().at("quarantine").is_null());
  bool listed_free = false;
  const auto free_gpus = api.request("GET", "/v1/devices?role=gpu&free=true").json();
  for (const auto& free : free_gpus.at("devices").as_array()) {
    listed_free = listed_free || text(free.at("address")) == "0000:18:00.0";
  }
  CHECK_FALSE(listed_free);
  const auto quarantine_metrics = api.request("GET", "/v1/metrics").body;
  CHECK(quarantine_metrics.find("hostagent_devices_quarantined{step=\"bind to vfio-pci\"} 1\n") != std::string::npos);
  CHECK(quarantine_metrics.find("hostagent_devices_quarantined{step=\"health\"} 1\n") != std::string::npos);

  check_problem(api.request("DELETE", "/v1/quarantine/0000:18:00.0", "", ApiServer::kReaderToken), 403, "forbidden");
  CHECK(field_of(check_problem(api.request("DELETE", "/v1/quarantine/18:00.0"), 400, "invalid_argument")) == "address");
  CHECK(api.service.commands().empty());
  const auto cleared = api.request("DELETE", "/v1/quarantine/0000:18:00.0");
  REQUIRE_MESSAGE(cleared.status == 200, cleared.body);
  CHECK(text(cleared.json().at("reason")) == "did not bind");
  REQUIRE(api.service.commands().size() == 1);
  CHECK(api.service.commands()[0].rfind("clear-quarantine 0000:18:00.0 by uid:", 0) == 0);
  check_problem(api.request("DELETE", "/v1/quarantine/0000:18:00.0"), 404, "not_found");
  CHECK(api.request("GET", "/v1/quarantine").json().at("devices").as_array().size() == 1);

  std::istringstream lines(read_text_file(api.server.audit_log()));
  std::vector<boost::json::object> audited;
  for (std::string line; std::getline(lines, line);) audited.push_back(boost::json::parse(line).as_object());
  REQUIRE(audited.size() == 4);  // the reader's 403, the 400, the clear, the 404
  CHECK(text(audited[2].at("device")) == "0000:18:00.0");
  CHECK(audited[2].at("status").as_int64() == 200);
  CHECK(text(audited[2].at("principal")).rfind("uid:", 0) == 0);
}

// A running VM's figures, each as libvirt reports it for a QEMU guest (but the balloon's maximum).
service::VmStatsView every_figure(const std::string& vm) {
  service::VmStatsView full;
  full.vm = vm;
  full.state = "running";
  full.read_at = "2026-12-07T05:00:00.250Z";
  full.cpu_seconds = 12.5;
  full.vcpus = 16;
  full.memory_bytes = 1ULL << 30;
  full.rss_bytes = 3ULL << 29;
  full.blocks = {{"vda", 4096, 8192, 1, 2}};
  full.interfaces = {{"vnet3", 10, 20, 1, 2}};
  full.devices = {{"gpu", 1}, {"nic", 1}};
  return full;
}

TEST_CASE(
    "a VM's figures are answered as the service reads them, null where libvirt said nothing, and scraped with a vm "
    "label") {
  FakeApi api;
  const service::VmStatsView full = every_figure("train-0");
  service::VmStatsView bare;
  bare.vm = "test-only";
  bare.state = "shut_off";
  bare.read_at = full.read_at;
  api.service.set_vm_stats({full, bare});

  const auto shown = api.request("GET", "/v1/vms/train-0/stats");
  REQUIRE_MESSAGE(shown.status == 200, shown.body);
  const auto json = shown.json();
  CHECK(json.at("cpu_seconds").as_double() == 12.5);
  CHECK(json.at("vcpus").as_int64() == 16);
  CHECK(json.at("memory_max_bytes").is_null());
  CHECK(json.at("blocks").at(0).at("write_bytes").as_int64() == 8192);
  CHECK(json.at("interfaces").at(0).at("tx_packets").as_int64() == 2);
  CHECK(json.at("devices").at("gpu").as_int64() == 1);
  CHECK(api.request("GET", "/v1/vms/test-only/stats").json().at("cpu_seconds").is_null());
  check_problem(api.request("GET", "/v1/vms/nobody/stats"), 404, "not_found");

  const auto metrics = api.request("GET", "/v1/metrics").body;
  for (const char* line : {"hostagent_vm_state{vm=\"train-0\",state=\"running\"} 1\n",
                           "hostagent_vm_cpu_seconds_total{vm=\"train-0\"} 12.5\n",
                           "hostagent_vm_memory_bytes{vm=\"train-0\",kind=\"rss\"} 1610612736\n",
                           "hostagent_vm_block_bytes_total{vm=\"train-0\",device=\"vda\",op=\"write\"} 8192\n",
                           "hostagent_vm_network_bytes_total{vm=\"train-0\",interface=\"vnet3\",direction=\"rx\"} 10\n",
                           "hostagent_vm_devices{vm=\"train-0\",role=\"gpu\"} 1\n",
                           "hostagent_vm_state{vm=\"test-only\",state=\"shut_off\"} 1\n"}) {
    CHECK_MESSAGE(metrics.find(line) != std::string::npos, line);
  }
  CHECK(metrics.find("hostagent_vm_cpu_seconds_total{vm=\"test-only\"}") == std::string::npos);
}

// Prometheus's own promtool (scripts/lib/promtool.sh installs it outside the clone): its path, or
// "" after a visible skip; a failure instead where HOSTAGENT_REQUIRE_PROMTOOL=1 (scripts/test.sh).
std::string promtool() {
  if (const char* given = std::getenv("HOSTAGENT_PROMTOOL"); given != nullptr && *given != '\0') return given;
  const auto found = run_command({(source_dir() / "scripts" / "lib" / "promtool.sh").string(), "path"});
  std::string path = found.output.substr(0, found.output.find('\n'));
  if (found.exit_code == 0 && !path.empty()) return path;
  const std::string why = "promtool is not installed: run scripts/lib/promtool.sh install";
  if (const char* require = std::getenv("HOSTAGENT_REQUIRE_PROMTOOL");
      require != nullptr && std::string(require) == "1") {
    FAIL(why << " (HOSTAGENT_REQUIRE_PROMTOOL=1)");
  }
  skip(why);
  return "";
}

TEST_CASE("a scrape with every family present (VMs' figures, devices' health, holders, quarantine) is promtool-clean") {
  FakeApi api;
  api.put_vm("train-0");
  const auto gpus = some_gpus(api, 2);
  api.hold("train-0", {gpus[0]});
  api.service.quarantine({gpus[1], "health", "AER fatal errors rose from 0 to 1", "", "2026-12-07T05:00:00Z"});
  auto stats = every_figure("train-0");
  stats.memory_max_bytes = 2ULL << 30;
  api.service.set_vm_stats({stats});
  numa::DeviceHealth health;
  health.address = gpus[0];
  health.role = numa::PciRole::gpu;
  health.link_speed_gts = 16.0;
  health.link_max_speed_gts = 32.0;
  health.link_degraded = true;
  health.aer_correctable = {{"RxErr", 3}, {"TOTAL_ERR_COR", 3}};
  health.aer_fatal = {{"TOTAL_ERR_FATAL", 1}};
  api.service.set_device_health({health});
  CHECK(api.request("GET", "/v1/vms").status == 200);  // the request metrics have a sample
  const auto scrape = api.request("GET", "/v1/metrics");
  REQUIRE(scrape.status == 200);
  for (const char* family : {"hostagent_vm_cpu_seconds_total", "hostagent_device_aer_errors_total",
                             "hostagent_device_holder", "hostagent_devices_quarantined"}) {
    CHECK_MESSAGE(scrape.body.find(std::string("\n") + family + "{") != std::string::npos, family);
  }
  const auto tool = promtool();
  if (tool.empty()) return;
  const auto file = api.server.scratch() / "metrics.txt";
  write_text_file(file, scrape.body);
  const auto checked = run_command({"sh", "-c", "\"$0\" check metrics < \"$1\"", tool, file.string()});
  CHECK_MESSAGE(checked.exit_code == 0, checked.output);
  CHECK_MESSAGE(checked.output.empty(), checked.output);
}

TEST_CASE("cordon, drain and uncordon reach the service with who asked, answer its maintenance, and are audited") {
  FakeApi api;
  const auto shown = api.request("GET", "/v1/host/maintenance").json();
  CHECK(text(shown.at("mode")) == "in_service");
  CHECK(shown.at("reason").is_null());
  check_problem(api.request("POST", "/v1/host/cordon", R"({"reason":"r"})", ApiServer::kReaderToken), 403, "forbidden");
  CHECK(api.service.commands().empty());

  const auto cordoned = api.request("POST", "/v1/host/cordon", R"({"reason":"PSU swap"})");
  REQUIRE_MESSAGE(cordoned.status == 200, cordoned.body);
  CHECK(text(cordoned.json().at("mode")) == "cordoned");
  CHECK(text(cordoned.json().at("reason")) == "PSU swap");
  const auto drained = api.request("POST", "/v1/host/drain", R"({"reason":"chassis","grace_seconds":90})");
  REQUIRE_MESSAGE(drained.status == 202, drained.body);
  CHECK(text(drained.json().at("mode")) == "draining");
  CHECK(text(drained.json().at("deadline")) == "2026-12-07T05:05:00Z");
  // The service's refusal is the API's 409, with its words.
  const auto refused = check_problem(api.request("POST", "/v1/host/cordon", R"({"reason":"again"})"), 409, "conflict");
  CHECK(text(refused.at("detail")).find("draining") != std::string::npos);
  const auto back = api.request("POST", "/v1/host/uncordon");
  REQUIRE_MESSAGE(back.status == 200, back.body);
  CHECK(text(back.json().at("mode")) == "in_service");
  CHECK(api.request("GET", "/v1/metrics").body.find("hostagent_host_maintenance{mode=\"in_service\"} 1\n") !=
        std::string::npos);

  const auto commands = api.service.commands();
  REQUIRE(commands.size() == 4);
  CHECK(commands[0].rfind("cordon PSU swap by uid:", 0) == 0);
  CHECK(commands[1].rfind("drain chassis 90s by uid:", 0) == 0);
  CHECK(commands[3].rfind("uncordon by uid:", 0) == 0);
  std::istringstream lines(read_text_file(api.server.audit_log()));
  std::vector<std::string> targets;
  for (std::string line; std::getline(lines, line);) {
    const auto entry = boost::json::parse(line).as_object();
    targets.push_back(text(entry.at("target")) + " " + std::to_string(entry.at("status").as_int64()));
  }
  CHECK(targets == std::vector<std::string>{"/v1/host/cordon 403", "/v1/host/cordon 200", "/v1/host/drain 202",
                                            "/v1/host/cordon 409", "/v1/host/uncordon 200"});
}

TEST_CASE("a console is a WebSocket an operator attaches to: typed bytes reach it, its output comes back, audited") {
  FakeApi api;
  api.put_vm("vm1");
  auto echo = std::make_shared<EchoConsole>();
  api.service.set_console([echo](const VmName&, bool) { return std::shared_ptr<service::ConsoleSession>(echo); });
  {
    PipedConsole console(api.server, "/v1/vms/vm1/console");
    console.type("echo hi\r");
    CHECK(console.read_until("echo hi\r").find("echo hi\r") != std::string::npos);
    console.type("ls\x1dnot sent");  // Ctrl-]: what follows it is never sent
    const auto left = console.result();
    REQUIRE_MESSAGE(left.ok(), left.error().message);
    CHECK(left->empty());  // the client left: no reason from the server
  }
  CHECK(echo->typed() == "echo hi\rls");
  CHECK(api.service.commands() == std::vector<std::string>{"console vm1 by uid:" + std::to_string(::getuid())});
  // The session's end, from the far side: the client is told why.
  auto ending = std::make_shared<EchoConsole>();
  api.service.set_console([ending](const VmName&, bool) { return std::shared_ptr<service::ConsoleSession>(ending); });
  {
    PipedConsole console(api.server, "/v1/vms/vm1/console?take_over=true");
    console.type("x");
    CHECK(console.read_until("x") == "x");
    ending->end("taken over by uid:0");
    const auto closed = console.result();
    REQUIRE_MESSAGE(closed.ok(), closed.error().message);
    CHECK(*closed == "taken over by uid:0");
  }
  CHECK(api.service.commands().back() == "console vm1 by uid:" + std::to_string(::getuid()) + " take_over");
  // Both opens are in the audit log, with the VM, though they are GETs.
  std::istringstream lines(read_text_file(api.server.audit_log()));
  std::vector<std::string> audited;
  for (std::string line; std::getline(lines, line);) {
    const auto entry = boost::json::parse(line).as_object();
    audited.push_back(text(entry.at("method")) + " " + text(entry.at("target")) + " " +
                      std::to_string(entry.at("status").as_int64()) + " " + text(entry.at("vm")));
  }
  CHECK(audited ==
        std::vector<std::string>{"GET /v1/vms/vm1/console 101 vm1", "GET /v1/vms/vm1/console?take_over=true 101 vm1"});
}

TEST_CASE("a console is refused before the service without the upgrade or to a reader, and as the service says") {
  FakeApi api;
  api.put_vm("vm1");
  api.service.set_console([](const VmName& name, bool) -> Result<std::shared_ptr<service::ConsoleSession>> {
    return Error{ErrorCode::conflict, "the serial console of VM " + name.str() + " is held by uid:7"};
  });
  const auto plain = api.request("GET", "/v1/vms/vm1/console");
  check_problem(plain, 426, "upgrade_required");
  CHECK(plain.headers.at("upgrade") == "websocket");
  const std::vector<std::pair<std::string, std::string>> upgrade{{"Upgrade", "websocket"},
                                                                 {"Connection", "Upgrade"},
                                                                 {"Sec-WebSocket-Version", "13"},
                                                                 {"Sec-WebSocket-Key", "dGhlIHNhbXBsZSBub25jZQ=="}};
  auto reader = upgrade;
  reader.emplace_back("Authorization", std::string("Bearer ") + ApiServer::kReaderToken);
  check_problem(api.server.tcp_request(ClientRequest{"GET", "/v1/vms/vm1/console", "", "", reader}), 403, "forbidden");
  check_problem(api.server.unix_request(ClientRequest{"GET", "/v1/vms/vm1/console?take_over=maybe", "", "", upgrade}),
                400, "invalid_argument");
  check_problem(api.server.unix_request(ClientRequest{"GET", "/v1/vms/nope/console", "", "", upgrade}), 404,
                "not_found");
  CHECK(api.service.commands().empty());  // none of those reached the service's console
  // The service's refusal is the client's error, with its words.
  PipedConsole console(api.server, "/v1/vms/vm1/console");
  const auto refused = console.result();
  REQUIRE_FALSE(refused.ok());
  CHECK(refused.error().code == ErrorCode::conflict);
  CHECK(refused.error().message.find("held by uid:7") != std::string::npos);
}

TEST_CASE("a quarantine event reaches a stream client with the device and why") {
  FakeApi api;
  auto stream = EventStreamReader::open(api.server.socket_path());
  REQUIRE_MESSAGE(stream.ok(), stream.error().message);
  service::ServiceEvent event;
  event.kind = service::ServiceEvent::Kind::quarantine;
  event.vm = "train-0";
  event.devices = {*PciAddress::parse("0000:18:00.0")};
  event.quarantine = service::QuarantineView{event.devices[0], "bind to vfio-pci", "did not bind", "train-0", "t"};
  std::string seen;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (seen.find("event: quarantine\n") == std::string::npos && std::chrono::steady_clock::now() < deadline) {
    api.service.publish(event);
    seen = (*stream)->read_until(
        [](const std::string& got) { return got.find("event: quarantine\n") != std::string::npos; },
        std::chrono::milliseconds(200));
  }
  CHECK_MESSAGE(seen.find(R"(data: {"device":"0000:18:00.0","quarantined":true,"step":"bind to vfio-pci",)"
                          R"("reason":"did not bind","vm":"train-0"})") != std::string::npos,
                seen);
}

TEST_CASE("capacity and the free_cpus metric count what the service's policy keeps for the host") {
  FakeApi api;
  const auto free_cpus = [&] {
    return api.request("GET", "/v1/host/capacity").json().at("totals").at("cpus").at("free").as_int64();
  };
  const auto before = free_cpus();
  REQUIRE(before > 4);
  numa::HostPolicy policy;
  policy.housekeeping_cpus = {0, 1, 2, 3};
  api.service.set_policy(policy);
  CHECK(free_cpus() == before - 4);
  const auto capacity = api.request("GET", "/v1/host/capacity").json();
  CHECK(capacity.at("totals").at("cpus").at("housekeeping").as_int64() == 4);
  // The metric says the same, node by node.
  const auto metrics = api.request("GET", "/v1/metrics").body;
  for (const auto& node : capacity.at("nodes").as_array()) {
    const std::string sample = "hostagent_free_cpus{node=\"" + std::to_string(node.at("node").as_int64()) + "\"} " +
                               std::to_string(node.at("cpus").at("free").as_int64()) + "\n";
    CHECK_MESSAGE(metrics.find(sample) != std::string::npos, sample);
  }
}

TEST_CASE("a device's state: held wins, then quarantined, then cleaning, then the host's, else free") {
  FakeApi api;
  const auto gpus = some_gpus(api, 4);
  api.hold("train-0", {gpus[0]});
  // A held device is marked from the start: cleaned when its VM lets it go.
  api.service.mark_cleaning({gpus[0], "train-0", "2026-12-05T08:00:00Z", "train-0", ""});
  api.service.mark_cleaning({gpus[1], "train-1", "2026-12-05T08:10:00Z", "", "reset"});
  api.service.quarantine({gpus[2], "reset", "the device did not come back", "train-2", "2026-12-05T08:20:00Z"});
  api.service.set_history(
      {gpus[3],
       {cleaning_record(4, gpus[3], "clean",
                        {cleaning_step("reset", "passed", "flr", 0.4),
                         cleaning_step("scrub", "skipped", "not scrubbed: no scrubber configured", 0)})},
       ""});

  const auto device = [&](const PciAddress& address) {
    return api.request("GET", "/v1/devices/" + address.to_string()).json();
  };
  const auto held = device(gpus[0]);
  CHECK(text(held.at("state")) == "held");
  // The metrics name the holder beside the device, to join the device families on.
  const std::string holder =
      "hostagent_device_holder{device=\"" + gpus[0].to_string() + "\",role=\"gpu\",vm=\"train-0\"} 1\n";
  const auto metrics = api.request("GET", "/v1/metrics").body;
  CHECK_MESSAGE(metrics.find(holder) != std::string::npos, holder);
  CHECK(metrics.find("hostagent_device_holder{device=\"" + gpus[1].to_string()) == std::string::npos);
  CHECK(text(held.at("held_by")) == "train-0");
  CHECK(text(held.at("cleaning").at("held_by")) == "train-0");
  CHECK(held.at("cleaning").at("step").is_null());
  CHECK(held.at("last_cleaning").is_null());
  const auto cleaning = device(gpus[1]);
  CHECK(text(cleaning.at("state")) == "cleaning");
  CHECK(text(cleaning.at("cleaning").at("vm")) == "train-1");
  CHECK(text(cleaning.at("cleaning").at("since")) == "2026-12-05T08:10:00Z");
  CHECK(text(cleaning.at("cleaning").at("step")) == "reset");
  CHECK(cleaning.at("cleaning").at("held_by").is_null());
  CHECK(text(device(gpus[2]).at("state")) == "quarantined");
  const auto cleaned = device(gpus[3]);
  CHECK(text(cleaned.at("state")) == "free");
  CHECK(cleaned.at("cleaning").is_null());
  const auto& last = cleaned.at("last_cleaning");
  CHECK(last.at("sequence").as_int64() == 4);
  CHECK(text(last.at("outcome")) == "clean");
  CHECK(text(last.at("vm")) == "train-0");
  CHECK(text(last.at("finished_at")) == "2026-12-05T09:00:02Z");
  REQUIRE(last.at("marks").as_array().size() == 1);  // the reset passed: no mark
  CHECK(text(last.at("marks").at(0)) == "scrub skipped: not scrubbed: no scrubber configured");

  // The host's own devices are "host"; what ?free=true lists is exactly what is "free".
  const auto all = api.request("GET", "/v1/devices").json();
  std::size_t host_kept = 0;
  for (const auto& d : all.at("devices").as_array()) {
    if (!d.at("host_use").is_null()) {
      ++host_kept;
      CHECK(text(d.at("state")) == "host");
    }
  }
  CHECK(host_kept > 0);
  const auto free_gpus = api.request("GET", "/v1/devices?role=gpu&free=true").json();
  std::set<std::string> listed_free;
  for (const auto& d : free_gpus.at("devices").as_array()) {
    CHECK(text(d.at("state")) == "free");
    listed_free.insert(text(d.at("address")));
  }
  for (std::size_t i = 0; i < 3; ++i) CHECK_FALSE(listed_free.contains(gpus[i].to_string()));
  CHECK(listed_free.contains(gpus[3].to_string()));
}

TEST_CASE("an operator cleans a device: 202 with its cleaning, listed, audited, and refused when it cannot be") {
  FakeApi api;
  const auto gpus = some_gpus(api, 2);
  const std::string target = "/v1/devices/" + gpus[0].to_string() + "/clean";
  check_problem(api.request("POST", target, "", ApiServer::kReaderToken), 403, "forbidden");
  CHECK(field_of(check_problem(api.request("POST", "/v1/devices/18:00.0/clean"), 400, "invalid_argument")) ==
        "address");
  CHECK(field_of(check_problem(api.request("POST", target, R"({"now":true})"), 400, "invalid_argument")) == "now");
  CHECK(api.service.commands().empty());

  const auto begun = api.request("POST", target);
  REQUIRE_MESSAGE(begun.status == 202, begun.body);
  CHECK(text(begun.json().at("address")) == gpus[0].to_string());
  CHECK(begun.json().at("vm").is_null());
  CHECK(begun.json().at("held_by").is_null());
  REQUIRE(api.service.commands().size() == 1);
  CHECK(api.service.commands()[0].rfind("clean-device " + gpus[0].to_string() + " by uid:", 0) == 0);
  const auto listed = api.request("GET", "/v1/cleaning").json().at("devices").as_array();
  REQUIRE(listed.size() == 1);
  CHECK(text(listed[0].at("address")) == gpus[0].to_string());
  CHECK(text(api.request("GET", "/v1/devices/" + gpus[0].to_string()).json().at("state")) == "cleaning");

  // Already cleaning, held by a VM, no such device: the service's errors, mapped as every other.
  check_problem(api.request("POST", target, "{}"), 409, "conflict");
  numa::Allocation allocation;
  allocation.vm = "train-0";
  allocation.devices = {gpus[1]};
  api.service.set_held({allocation});
  const auto held =
      check_problem(api.request("POST", "/v1/devices/" + gpus[1].to_string() + "/clean"), 409, "conflict");
  CHECK(text(held.at("detail")).find("train-0") != std::string::npos);
  check_problem(api.request("POST", "/v1/devices/0000:ff:1f.7/clean"), 404, "not_found");

  std::istringstream lines(read_text_file(api.server.audit_log()));
  std::vector<boost::json::object> audited;
  for (std::string line; std::getline(lines, line);) audited.push_back(boost::json::parse(line).as_object());
  REQUIRE(audited.size() == 7);              // 403, 400, 400, the clean, 409, 409, 404
  CHECK(audited[1].at("device").is_null());  // the address did not parse: nothing named
  CHECK(text(audited[3].at("device")) == gpus[0].to_string());
  CHECK(text(audited[3].at("method")) == "POST");
  CHECK(audited[3].at("status").as_int64() == 202);
  CHECK(text(audited[3].at("principal")).rfind("uid:", 0) == 0);
  CHECK(audited[3].at("operation").is_null());
  CHECK(text(audited[5].at("device")) == gpus[1].to_string());
  CHECK(audited[5].at("status").as_int64() == 409);
}

TEST_CASE("a device's history lists each cleaning with its steps, and says when the chain is broken") {
  FakeApi api;
  const auto gpus = some_gpus(api, 2);
  api.service.set_history(
      {gpus[0],
       {cleaning_record(3, gpus[0], "clean", {cleaning_step("reset", "passed", "flr", 0.25)}),
        cleaning_record(9, gpus[0], "quarantined", {cleaning_step("reset", "failed", "no FLR: link down", 1.5)})},
       "line 12: sha256 does not match its text"});
  const auto history = api.request("GET", "/v1/devices/" + gpus[0].to_string() + "/history").json();
  CHECK(text(history.at("address")) == gpus[0].to_string());
  const auto& cleanings = history.at("cleanings").as_array();
  REQUIRE(cleanings.size() == 2);
  CHECK(cleanings[0].at("sequence").as_int64() == 3);
  CHECK(text(cleanings[1].at("outcome")) == "quarantined");
  CHECK(text(cleanings[1].at("role")) == "gpu");
  CHECK(text(cleanings[1].at("vm")) == "train-0");
  CHECK(text(cleanings[1].at("sha256")) == std::string(64, 'a'));
  CHECK(text(cleanings[1].at("previous_sha256")) == std::string(64, '0'));
  const auto& step = cleanings[1].at("steps").at(0);
  CHECK(text(step.at("name")) == "reset");
  CHECK(text(step.at("result")) == "failed");
  CHECK(text(step.at("detail")) == "no FLR: link down");
  CHECK(text(step.at("started_at")) == "2026-12-05T09:00:00Z");
  CHECK(text(step.at("finished_at")) == "2026-12-05T09:00:01Z");
  CHECK(step.at("seconds").as_double() == 1.5);
  CHECK_FALSE(history.at("chain").at("whole").as_bool());
  CHECK(text(history.at("chain").at("broken")) == "line 12: sha256 does not match its text");

  const auto never = api.request("GET", "/v1/devices/" + gpus[1].to_string() + "/history").json();
  CHECK(never.at("cleanings").as_array().empty());
  CHECK(never.at("chain").at("whole").as_bool());
  CHECK(never.at("chain").at("broken").is_null());
  check_problem(api.request("GET", "/v1/devices/0000:ff:1f.7/history"), 404, "not_found");
  CHECK(field_of(check_problem(api.request("GET", "/v1/devices/nope/history"), 400, "invalid_argument")) == "address");
  check_problem(api.request("GET", "/v1/devices/" + gpus[1].to_string() + "/history?all=1"), 400, "invalid_argument");
}

TEST_CASE("cleaning events reach a stream client: cleaning while it runs, then free or quarantined") {
  FakeApi api;
  auto stream = EventStreamReader::open(api.server.socket_path());
  REQUIRE_MESSAGE(stream.ok(), stream.error().message);
  const auto gpu = *PciAddress::parse("0000:18:00.0");
  service::ServiceEvent running;
  running.kind = service::ServiceEvent::Kind::cleaning;
  running.vm = "train-0";
  running.devices = {gpu};
  running.cleaning = service::CleaningView{gpu, "train-0", "2026-12-05T09:00:00Z", "", "reset"};
  const std::string running_data =
      R"(data: {"device":"0000:18:00.0","vm":"train-0","state":"cleaning","step":"reset","outcome":null,"sequence":null})";
  auto seen = publish_until_seen(api, **stream, running, running_data);
  CHECK_MESSAGE(seen.find("event: cleaning\n" + running_data) != std::string::npos, seen);

  service::ServiceEvent clean;
  clean.kind = service::ServiceEvent::Kind::cleaning;
  clean.devices = {gpu};
  clean.cleaned = cleaning_record(5, gpu, "clean", {cleaning_step("reset", "passed", "flr", 0.5)});
  const std::string clean_data =
      R"(data: {"device":"0000:18:00.0","vm":"train-0","state":"free","step":null,"outcome":"clean","sequence":5})";
  seen = publish_until_seen(api, **stream, clean, clean_data);
  CHECK_MESSAGE(seen.find(clean_data) != std::string::npos, seen);

  service::ServiceEvent failed = clean;
  failed.cleaned = cleaning_record(
      6, gpu, "quarantined",
      {cleaning_step("reset", "passed", "flr", 0.5), cleaning_step("erase", "failed", "pattern mismatch", 3)});
  failed.cleaned->vm = "";
  const std::string failed_data =
      R"(data: {"device":"0000:18:00.0","vm":null,"state":"quarantined","step":"erase","outcome":"quarantined",)"
      R"("sequence":6})";
  seen = publish_until_seen(api, **stream, failed, failed_data);
  CHECK_MESSAGE(seen.find(failed_data) != std::string::npos, seen);
}

TEST_CASE(
    "metrics: devices cleaning, quarantined by step, each ended cleaning's steps and outcome counted once, each "
    "release's wall time") {
  FakeApi api;
  const auto gpus = some_gpus(api, 3);
  api.service.mark_cleaning({gpus[0], "train-0", "2026-12-05T08:00:00Z", "", ""});
  api.service.mark_cleaning({gpus[1], "train-0", "2026-12-05T08:00:00Z", "train-0", ""});
  api.service.quarantine({gpus[2], "reset", "did not come back", "", "2026-12-05T08:20:00Z"});
  service::ServiceEvent ended;
  ended.kind = service::ServiceEvent::Kind::cleaning;
  ended.devices = {gpus[0]};
  ended.cleaned = cleaning_record(
      7, gpus[0], "clean",
      {cleaning_step("reset", "passed", "flr", 0.5), cleaning_step("scrub", "skipped", "no scrubber configured", 0)});
  api.service.publish(ended);
  api.service.publish(ended);  // the same record again (a resumed stream, a retry): observed once
  ended.cleaned = cleaning_record(8, gpus[2], "quarantined", {cleaning_step("reset", "failed", "link down", 2)});
  ended.release = service::ReleaseCleaningView{3, 42.5, 97.0};  // the last of train-0's devices
  api.service.publish(ended);

  const auto metrics = api.request("GET", "/v1/metrics").body;
  for (const std::string sample :
       {"# TYPE hostagent_devices_cleaning gauge\nhostagent_devices_cleaning 2\n",
        "hostagent_devices_quarantined{step=\"reset\"} 1\n",
        "# TYPE hostagent_device_cleaning_step_seconds histogram\n",
        "hostagent_device_cleaning_step_seconds_bucket{step=\"reset\",role=\"gpu\",le=\"0.1\"} 0\n",
        "hostagent_device_cleaning_step_seconds_bucket{step=\"reset\",role=\"gpu\",le=\"0.5\"} 1\n",
        "hostagent_device_cleaning_step_seconds_bucket{step=\"reset\",role=\"gpu\",le=\"5\"} 2\n",
        "hostagent_device_cleaning_step_seconds_bucket{step=\"reset\",role=\"gpu\",le=\"3600\"} 2\n",
        "hostagent_device_cleaning_step_seconds_sum{step=\"reset\",role=\"gpu\"} 2.5\n",
        "hostagent_device_cleaning_step_seconds_count{step=\"reset\",role=\"gpu\"} 2\n",
        "# TYPE hostagent_device_cleanings_total counter\n", "hostagent_device_cleanings_total{outcome=\"clean\"} 1\n",
        "hostagent_device_cleanings_total{outcome=\"quarantined\"} 1\n",
        "# TYPE hostagent_device_release_cleaning_seconds histogram\n",
        "hostagent_device_release_cleaning_seconds_bucket{le=\"30\"} 0\n",
        "hostagent_device_release_cleaning_seconds_bucket{le=\"60\"} 1\n",
        "hostagent_device_release_cleaning_seconds_sum 42.5\n",
        "hostagent_device_release_cleaning_seconds_count 1\n"}) {
    CHECK_MESSAGE(metrics.find(sample) != std::string::npos, sample << " not in\n" << metrics);
  }
  CHECK(metrics.find("step=\"scrub\"") == std::string::npos);                    // skipped: it did not run
  CHECK(metrics.find("\nhostagent_devices_quarantined ") == std::string::npos);  // no unlabelled total
}

TEST_CASE("capacity counts the devices out of placement for cleaning or quarantine, per node and in total") {
  FakeApi api;
  const auto gpus = some_gpus(api, 3);
  const auto capacity = [&] { return api.request("GET", "/v1/host/capacity").json(); };
  const auto before = capacity();
  const auto& counts = before.at("totals").at("gpus");
  CHECK(counts.at("cleaning").as_int64() == 0);
  CHECK(counts.at("quarantined").as_int64() == 0);
  const auto free_before = counts.at("free").as_int64();
  numa::HostPolicy policy;
  policy.withheld[gpus[0]] = numa::Withheld{numa::Withheld::Why::cleaning, "being cleaned"};
  policy.withheld[gpus[1]] = numa::Withheld{numa::Withheld::Why::cleaning, "being cleaned"};
  policy.withheld[gpus[2]] = numa::Withheld{numa::Withheld::Why::quarantined, "reset failed"};
  api.service.set_policy(policy);
  const auto after = capacity();
  const auto& totals = after.at("totals").at("gpus");
  CHECK(totals.at("cleaning").as_int64() == 2);
  CHECK(totals.at("quarantined").as_int64() == 1);
  CHECK(totals.at("free").as_int64() == free_before - 3);
  int64_t cleaning = 0;
  int64_t quarantined = 0;
  for (const auto& node : after.at("nodes").as_array()) {
    for (const char* kind : {"gpus", "vfs", "nvme"}) {
      CHECK(node.at(kind).at("cleaning").as_int64() >= 0);
      CHECK(node.at(kind).at("quarantined").as_int64() >= 0);
    }
    cleaning += node.at("gpus").at("cleaning").as_int64();
    quarantined += node.at("gpus").at("quarantined").as_int64();
  }
  CHECK(cleaning == 2);
  CHECK(quarantined == 1);
}

}  // namespace hostagent::testing
