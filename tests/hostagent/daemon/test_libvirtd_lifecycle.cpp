// The daemon against the real libvirtd with QEMU (TCG): a guest that really boots, pinned, in its
// own NUMA cell, on hugepages; and libvirtd restarted under a running service.
#include <doctest/doctest.h>

#include <algorithm>
#include <filesystem>
#include <map>

#include <thread>

#include <boost/asio/local/stream_protocol.hpp>
#include <boost/beast/websocket.hpp>

#include "api_server.hpp"
#include "hostagent/common/text_file.hpp"
#include "libvirtd_fixture.hpp"
#include "libvirtd_support.hpp"
#include "test_guest.hpp"

namespace hostagent::testing {
namespace {

std::unique_ptr<service::VmService> service_on(const LibvirtdFixture& fixture,
                                               std::shared_ptr<daemon::Clock> clock = nullptr) {
  auto service = fixture.start_service(std::move(clock));
  REQUIRE_MESSAGE(service.ok(), service.error().message);
  return std::move(service).value();
}

service::CreateVmRequest guest(const VmName& name) {
  return service::CreateVmRequest{.name = name, .template_name = LibvirtdFixture::kTemplate};
}

// The newest operation of that kind on the VM.
service::OperationView newest(service::VmService& service, const std::string& kind, const std::string& vm) {
  for (const auto& operation : service.operations()) {
    if (operation.kind == kind && operation.vm == vm) return operation;
  }
  FAIL("no " << kind << " of " << vm);
  return {};
}

// The operation once its guest was seen up (the last phase of its timeline, added after the
// operation ended), waiting as long as a TCG boot may take.
service::OperationView after_guest_up(service::VmService& service, const std::string& id,
                                      const std::filesystem::path& console) {
  for (int i = 0; i < 360; ++i) {
    auto operation = service.operation(id);
    REQUIRE_MESSAGE(operation.ok(), operation.error().message);
    if (!operation->timeline.empty() && operation->timeline.back().name == "up") return std::move(operation).value();
    std::this_thread::sleep_for(std::chrono::milliseconds(500));
  }
  const auto text = hostagent::read_text_file(console);  // a Result: no throw where no console was written
  FAIL("the guest of " << id << " was not seen up in 180 s; its console (" << console.string() << ") ends with \""
                       << verify::last_console_line(text.ok() ? *text : "") << "\"");
  return {};
}

// A real boot's phases: all there, in order. The operation's own are within its time; QEMU's start
// (launch: its memory zeroed and pinned) takes measurable time, and so do the guest's firmware and
// kernel (kernel: from the resume to the console's "Linux version"; up: from there to the test
// guest's agent answering).
void check_timeline(const service::OperationView& operation, std::vector<std::string> phases) {
  phases.insert(phases.end(), {"launch", "resume", "kernel", "up"});
  std::vector<std::string> names;
  double total = 0;
  for (const auto& phase : operation.timeline) {
    names.push_back(phase.name);
    CHECK(phase.seconds >= 0);
    if (phase.name != "kernel" && phase.name != "up") total += phase.seconds;
  }
  CHECK(names == phases);
  CHECK(total <= operation.duration_seconds);
  REQUIRE(operation.timeline.size() >= 4);
  const auto guest = operation.timeline.end() - 4;
  CHECK(guest[0].seconds > 0.01);  // launch
  CHECK(guest[2].seconds > 0.01);  // kernel: SeaBIOS and the kernel's load ran first
  CHECK(guest[2].detail == "console showed \"Linux version\"");
  CHECK(guest[3].seconds > 0.01);  // up: the kernel's boot, /init and qemu-ga's start
  CHECK(guest[3].detail == "guest agent answered");
  MESSAGE(operation.kind << " timeline: " << [&] {
    std::string text;
    for (const auto& phase : operation.timeline) text += " " + phase.name + " " + std::to_string(phase.seconds) + " s;";
    return text;
  }());
}

// The drain's stops as they end: the maintenance once every stop operation has ended.
service::MaintenanceView drained(service::VmService& service) {
  for (const auto& operation : service.operations()) {
    if (operation.kind == "stop") REQUIRE(service.wait(operation.id).ok());
  }
  return service.maintenance();
}

std::map<std::string, std::string> drain_states(const service::MaintenanceView& view) {
  std::map<std::string, std::string> states;
  for (const auto& vm : view.vms) states[vm.vm] = vm.state;
  return states;
}

// The VM's figures as the service reads them now.
service::VmStatsView stats_of(service::VmService& service, const std::string& name) {
  auto all = service.vm_stats();
  REQUIRE_MESSAGE(all.ok(), all.error().message);
  const auto it = std::find_if(all->begin(), all->end(), [&](const auto& vm) { return vm.vm == name; });
  REQUIRE(it != all->end());
  return *it;
}

// Issue 46: the VM's figures from a real QEMU, read as it began to boot (`booting`) and again once
// the guest is up, the service's clock moved past the cache's age: the CPU time its boot took, the
// 1 MiB the guest wrote to its disk before "up", its vCPUs and memory.
void check_stats_move(service::VmService& service, ShiftedClock& clock, const std::string& name,
                      const service::VmStatsView& booting) {
  REQUIRE(booting.cpu_seconds.has_value());
  CHECK(*booting.cpu_seconds > 0);
  clock.shift(service::kVmStatsMaxAge);
  const auto up = stats_of(service, name);
  CHECK(up.read_at != booting.read_at);  // libvirt asked again, not the cache
  REQUIRE(up.cpu_seconds.has_value());
  CHECK(*up.cpu_seconds > *booting.cpu_seconds);
  CHECK(up.vcpus == 2U);
  CHECK(up.memory_bytes.value_or(0) > 0);
  CHECK(up.rss_bytes.value_or(0) > 0);
  const auto vda = std::find_if(up.blocks.begin(), up.blocks.end(), [](const auto& b) { return b.device == "vda"; });
  REQUIRE(vda != up.blocks.end());
  CHECK(vda->write_bytes >= (1U << 20));
}

}  // namespace

// Types `command` into the console's shell until its answer, `expected`, shows (the shell may be a
// moment behind the guest's "up"); what the console showed.
std::string run_in_console(PipedConsole& console, const std::string& command, const std::string& expected) {
  std::string seen;
  for (int attempt = 0; attempt < 3 && seen.find(expected) == std::string::npos; ++attempt) {
    console.type(command + "\r");
    seen = console.read_until(expected);
  }
  return seen;
}

// A WebSocket client of the console that sends and never reads, or vanishes: Beast's own.
struct RawConsoleClient {
  boost::asio::io_context io;
  boost::beast::websocket::stream<boost::asio::local::stream_protocol::socket> ws{io};
  boost::system::error_code handshake;

  RawConsoleClient(const ApiServer& server, const std::string& target) {
    ws.next_layer().connect(boost::asio::local::stream_protocol::endpoint(server.socket_path().string()));
    ws.handshake("localhost", target, handshake);
    ws.binary(true);
  }
};

// Issue 46: the guest's serial console over the daemon's API, on a real socket: a command typed at
// the guest's shell and its answer read back; a second client refused while the first holds it; a
// client that stops reading while the guest floods its console, and one that vanishes, leave the
// guest and the daemon as they were: the next session, without a take-over, answers again.
void check_console(service::VmService& service, const VmName& name) {
  ApiServer server;
  api::ServerLimits limits;
  limits.request_timeout = std::chrono::seconds(1);  // how long a client that reads nothing is given
  limits.event_send_buffer = 4096;
  server.serve(service, api::RestApiOptions{}, limits);
  const std::string target = "/v1/vms/" + name.str() + "/console";
  {
    PipedConsole console(server, target);
    const auto seen = run_in_console(console, "echo hostagent-console-$((6 * 7))", "hostagent-console-42");
    CHECK_MESSAGE(seen.find("hostagent-console-42") != std::string::npos, seen);
    PipedConsole second(server, target);
    const auto refused = second.result();
    REQUIRE_FALSE(refused.ok());
    CHECK(refused.error().code == ErrorCode::conflict);
  }
  {
    RawConsoleClient slow(server, target);
    REQUIRE_MESSAGE(!slow.handshake, slow.handshake.message());
    // About 240 KB of output the client never reads: the daemon drops it, never the guest's console.
    slow.ws.write(
        boost::asio::buffer(std::string("i=0; while [ $i -lt 3000 ]; do echo flood-$i-"
                                        "........................................................"
                                        "...........; i=$((i + 1)); done\r")));
    RawConsoleClient vanished(server, target + "?take_over=true");
    REQUIRE_MESSAGE(!vanished.handshake, vanished.handshake.message());
    vanished.ws.next_layer().close();  // no close frame
  }
  PipedConsole after(server, target);
  const auto seen = run_in_console(after, "echo hostagent-console-after-$((6 * 7))", "hostagent-console-after-42");
  CHECK_MESSAGE(seen.find("hostagent-console-after-42") != std::string::npos,
                seen.substr(seen.size() > 2000 ? seen.size() - 2000 : 0));
  after.type("\x1d");
  const auto left = after.result();
  CHECK_MESSAGE(left.ok(), left.error().message);
  server.stop_serving();
}

TEST_CASE("a guest boots under QEMU and goes through stop, start and delete with its pins and pages") {
  auto fixture = LibvirtdFixture::make();
  if (!fixture) return;
  const VmName name = "ci-life";
  fixture->remove_domain(name);
  const uint64_t free_before = LibvirtdFixture::free_hugepages_2m();
  const auto clock = std::make_shared<ShiftedClock>();
  auto service = service_on(*fixture, clock);

  auto request = guest(name);
  request.ssh_authorized_keys = {read_text_file(fixture->authorized_keys())};
  request.ssh_authorized_keys.front().pop_back();  // the newline
  auto vm = create_vm(*service, request);          // with a cloud-init seed: QEMU must take the CD-ROM too
  REQUIRE_MESSAGE(vm.ok(), vm.error().message);
  const auto booting = stats_of(*service, name);
  CHECK(vm->state == "running");
  const auto create = after_guest_up(*service, newest(*service, "create", name).id, fixture->console_log(name));
  check_timeline(create, {"placement", "render", "disk", "seed", "prepare_devices", "define"});
  // The guest's phases reached the VM's start history too, which outlives the operation.
  const auto history = service->vm_starts(name);
  REQUIRE_MESSAGE(history.ok(), history.error().message);
  REQUIRE(history->size() == 1);
  CHECK(history->front().timeline.size() == create.timeline.size());
  // The template's 2 MiB pages in one cell, zeroed by the VM's two pinned CPUs' worth of threads.
  CHECK(create.timeline.at(6).detail == "1 GiB in 2 MiB pages, 1 cell, 2 allocation threads per cell");
  CHECK(fixture->seed_files().size() == 1);
  const auto up = fixture->wait_for_boot(name, 1, 180);
  REQUIRE_MESSAGE(!up.empty(), ("the guest did not report up; console: " + fixture->console_log(name).string()));
  const auto report = find_test_guest_report(up);
  REQUIRE(report.has_value());
  CHECK(report->cpus == 2);
  CHECK(report->nodes == 1);
  CHECK(report->power_button);
  CHECK(LibvirtdFixture::free_hugepages_2m() == free_before - kGuestHugepages2m);
  check_stats_move(*service, *clock, name, booting);
  check_console(*service, name);
  // The guest mounted its seed CD-ROM and read what cloud-init there would: this VM's instance id
  // and the key the create asked for.
  const auto console = read_text_file(fixture->console_log(name));
  const auto seed = find_test_guest_seed(console);
  REQUIRE_MESSAGE(seed.has_value(), "the guest showed no seed; console: " << fixture->console_log(name).string());
  CHECK(seed->label == "cidata");
  // The service's tail of the same log (GET /v1/vms/{name}/console/log): its last lines, as the
  // file held them when read (read again after: the guest may have printed more).
  const auto tail = service->console_log(name, 3);
  REQUIRE_MESSAGE(tail.ok(), tail.error().message);
  CHECK_FALSE(tail->text.empty());
  CHECK(std::count(tail->text.begin(), tail->text.end(), '\n') <= 3);
  CHECK(tail->file_bytes >= console.size());
  CHECK_MESSAGE(read_text_file(fixture->console_log(name)).find(tail->text) != std::string::npos, tail->text);
  CHECK(service->console_log("no-such-vm", 3).error().code == ErrorCode::not_found);
  REQUIRE(seed->files.count("meta-data") == 1);
  CHECK_MESSAGE(seed->files.at("meta-data").find("instance-id: \"" + vm->uuid + "\"") != std::string::npos,
                seed->files.at("meta-data"));
  REQUIRE(seed->files.count("user-data") == 1);
  CHECK_MESSAGE(seed->files.at("user-data").find(request.ssh_authorized_keys.front()) != std::string::npos,
                seed->files.at("user-data"));

  // What QEMU runs with, from libvirt's live XML rather than from hostagent.
  const auto xml = fixture->live_xml(name);
  for (const auto& cpu : vm->record->allocation.cpus) {
    CHECK(xml.find("cpuset='" + std::to_string(cpu) + "'") != std::string::npos);
  }
  CHECK(xml.find("<memnode cellid='0' mode='strict'") != std::string::npos);
  CHECK(xml.find("<page size='2048' unit='KiB'") != std::string::npos);
  CHECK(xml.find("<cell id='0' cpus='0-1'") != std::string::npos);
  CHECK(xml.find("<allocation mode='immediate' threads='2'/>") != std::string::npos);
  CHECK(xml.find("<channel type='unix'>") != std::string::npos);  // libvirt named the agent's socket itself
  CHECK(fixture->pool_volumes() == std::vector<std::string>{"hostagent-" + name + ".qcow2"});

  // Graceful: the guest agent's guest-shutdown, before the ACPI button (which the guest would obey
  // too: its console says which it was).
  auto stopped = stop_vm(*service, name, false);
  REQUIRE_MESSAGE(stopped.ok(), stopped.error().message);
  CHECK(stopped->state == "shut_off");
  const auto stop_console = read_text_file(fixture->console_log(name));
  CHECK_MESSAGE(stop_console.find(kTestGuestAgentShutdown) != std::string::npos, stop_console);
  CHECK(stop_console.find(kTestGuestPowerButton) == std::string::npos);
  CHECK(LibvirtdFixture::free_hugepages_2m() == free_before);

  auto started = start_vm(*service, name);
  REQUIRE_MESSAGE(started.ok(), started.error().message);
  CHECK(started->state == "running");
  check_timeline(after_guest_up(*service, newest(*service, "start", name).id, fixture->console_log(name)),
                 {"prepare_devices"});
  CHECK_FALSE(fixture->wait_for_boot(name, 2, 180).empty());

  // A drain (issue 46): the guest, its agent up again, shuts down through it, well before the deadline.
  const auto drain = service->drain("ci drain", std::chrono::seconds(120), "uid:0");
  REQUIRE_MESSAGE(drain.ok(), drain.error().message);
  const auto view = drained(*service);
  CHECK(view.mode == service::MaintenanceMode::drained);
  CHECK(drain_states(view) == std::map<std::string, std::string>{{name.str(), "stopped"}});
  const auto drain_console = read_text_file(fixture->console_log(name));
  CHECK_MESSAGE(drain_console.rfind(kTestGuestAgentShutdown) > drain_console.find(kTestGuestAgentShutdown),
                drain_console);  // a second agent shutdown: the drain's
  CHECK(drain_console.find(kTestGuestPowerButton) == std::string::npos);
  REQUIRE(service->uncordon("uid:0").ok());

  REQUIRE(delete_vm(*service, name).ok());
  CHECK_FALSE(fixture->domain_exists(name));
  CHECK(fixture->pool_volumes().empty());
  CHECK(fixture->seed_files().empty());
  CHECK(fixture->journal_files().empty());
  CHECK(LibvirtdFixture::free_hugepages_2m() == free_before);
}

// Issue 46: a guest that ignores every request to shut down (no agent, the power button ignored)
// is powered off at the drain's deadline, not before; a restart while drained starts nothing. (The
// guest that obeys its agent is drained at the end of the lifecycle test above.)
TEST_CASE("a drain powers a deaf guest off at its deadline, and a restart while drained starts nothing") {
  auto fixture = LibvirtdFixture::make();
  if (!fixture) return;
  const VmName deaf = "ci-drain-deaf";
  fixture->remove_domain(deaf);
  auto service = service_on(*fixture);
  const auto created = create_vm(*service, {.name = deaf, .template_name = LibvirtdFixture::kDeafTemplate});
  REQUIRE_MESSAGE(created.ok(), created.error().message);
  const auto up = fixture->wait_for_boot(deaf, 1, 180);
  REQUIRE_MESSAGE(!up.empty(), "console: " << fixture->console_log(deaf).string());
  CHECK(up.find("power_button=no agent=no") != std::string::npos);

  constexpr auto kGrace = std::chrono::seconds(8);
  const auto begun_at = std::chrono::steady_clock::now();
  const auto drain = service->drain("ci drain", kGrace, "uid:0");
  REQUIRE_MESSAGE(drain.ok(), drain.error().message);
  const auto view = drained(*service);
  CHECK(std::chrono::steady_clock::now() - begun_at >= kGrace);  // its whole grace, then the power-off
  CHECK(view.mode == service::MaintenanceMode::drained);
  CHECK(drain_states(view) == std::map<std::string, std::string>{{deaf.str(), "powered_off"}});
  CHECK(service->get_vm(deaf)->state == "shut_off");

  service.reset();
  service = service_on(*fixture);
  CHECK(service->maintenance().mode == service::MaintenanceMode::drained);
  CHECK(service->get_vm(deaf)->state == "shut_off");
  CHECK(service->begin_start(deaf).error().code == ErrorCode::conflict);
  REQUIRE(service->uncordon("uid:0").ok());
  CHECK(service->get_vm(deaf)->state == "shut_off");  // the uncordon starts nothing
  REQUIRE(delete_vm(*service, deaf).ok());
}

TEST_CASE("libvirtd restarted under a running daemon: it reconnects and its state stays right") {
  auto fixture = LibvirtdFixture::make();
  if (!fixture) return;
  const VmName name = "ci-restart";
  fixture->remove_domain(name);
  auto service = service_on(*fixture);
  REQUIRE(create_vm(*service, guest(name)).ok());

  restart_libvirtd();
  // Bounded wait: the service notices the loss through libvirt's close callback or keepalive.
  service::ServiceStatus status;
  for (int i = 0; i < 600; ++i) {
    status = service->status();
    if (status.libvirt_connection_losses > 0 && status.libvirt_connected && status.operations_in_flight == 0) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  CHECK(status.libvirt_connection_losses > 0);
  REQUIRE(status.libvirt_connected);
  auto vm = service->get_vm(name);
  REQUIRE(vm.ok());
  CHECK(vm->state == "running");  // QEMU outlived libvirtd, and the new libvirtd found it again

  // It still works: a stop and a delete through the new connection.
  auto stopped = stop_vm(*service, name, true);
  REQUIRE_MESSAGE(stopped.ok(), stopped.error().message);
  CHECK(stopped->state == "shut_off");
  REQUIRE(delete_vm(*service, name).ok());
  CHECK_FALSE(fixture->domain_exists(name));
}

}  // namespace hostagent::testing
