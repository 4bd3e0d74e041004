// The operations a control plane polls survive a restart of the daemon: those ended within the hour
// are found by id and listed, one the stop cut short is failed saying so, and one past the hour is
// forgotten with its file.
#include <doctest/doctest.h>

#include <algorithm>
#include <boost/json.hpp>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "daemon_fixture.hpp"
#include "hostagent/common/time_text.hpp"
#include "hostagent/state/operation_records.hpp"

namespace hostagent::testing {
namespace {

state::OperationRecords records_of(const DaemonFixture& fixture) {
  auto records = state::OperationRecords::open(fixture.config().state_directory / "operations");
  REQUIRE_MESSAGE(records.ok(), records.error().message);
  return std::move(records).value();
}

state::OperationRecord left_behind(const std::string& id, const std::string& state, const std::string& finished_at) {
  state::OperationRecord record;
  record.id = id;
  record.kind = "stop";
  record.vm = "elsewhere";
  record.state = state;
  record.submitted_at = "2026-12-01T10:00:00Z";
  record.finished_at = finished_at;
  if (state == "failed") {
    record.error_code = "conflict";
    record.error = "it was not running";
  }
  return record;
}

TEST_CASE("operations survive a restart: ended ones are found and listed, one cut short is failed saying so") {
  DaemonFixture fixture;
  std::string create_id;
  std::string stop_id;
  {
    auto service = started(fixture);
    auto created = service->begin_create(fixture.request("kept", kOneGpu));
    REQUIRE_MESSAGE(created.ok(), created.error().message);
    create_id = created->id;
    wait_for(*service, create_id);
    auto stopped = service->begin_stop(vm_name("kept"), true);
    REQUIRE(stopped.ok());
    stop_id = stopped->id;
    wait_for(*service, stop_id);
  }
  // A start the stop cut short (its file says queued), and a stop that ended two hours ago.
  auto records = records_of(fixture);
  REQUIRE(records.write(left_behind("op-earlier-7", "queued", "")).ok());
  REQUIRE(records
              .write(left_behind("op-earlier-3", "failed",
                                 rfc3339(std::chrono::system_clock::now() - std::chrono::hours(2))))
              .ok());

  auto service = started(fixture);
  const auto create = service->operation(create_id);
  REQUIRE_MESSAGE(create.ok(), create.error().message);
  CHECK(create->state == "succeeded");
  CHECK(create->vm == "kept");
  CHECK(create->template_name == kOneGpu);
  CHECK(create->step_count > 0);
  const auto stop = service->operation(stop_id);
  REQUIRE(stop.ok());
  CHECK(stop->state == "succeeded");
  CHECK(stop->kind == "stop");
  CHECK(service->wait(stop_id).ok());  // ended: a waiter returns at once

  const auto cut = service->operation("op-earlier-7");
  REQUIRE(cut.ok());
  CHECK(cut->state == "failed");
  REQUIRE(cut->error.has_value());
  CHECK(cut->error->code == ErrorCode::unavailable);
  CHECK(contains(cut->error->message, "hostagentd stopped before this operation ended"));
  CHECK_FALSE(cut->finished_at.empty());

  const auto old = service->operation("op-earlier-3");
  REQUIRE_FALSE(old.ok());
  CHECK(old.error().code == ErrorCode::not_found);
  CHECK_FALSE(std::filesystem::exists(fixture.config().state_directory / "operations" / "op-earlier-3.json"));

  // Newest first: this run's, then the earlier run's in the order they were submitted.
  auto started_now = service->begin_start(vm_name("kept"));
  REQUIRE(started_now.ok());
  wait_for(*service, started_now->id);
  const auto listed = service->operations();
  std::vector<std::string> ids(listed.size());
  std::transform(listed.begin(), listed.end(), ids.begin(), [](const auto& operation) { return operation.id; });
  CHECK(ids == std::vector<std::string>{started_now->id, stop_id, create_id, "op-earlier-7"});
}

// The stop came after QEMU's paused launch and before the resume: the VM would stay paused, with
// its memory and devices held, and nothing else would run it.
TEST_CASE("a start cut short between launch and resume is finished at the next start") {
  DaemonFixture fixture;
  {
    auto service = started(fixture);
    REQUIRE(create_vm(*service, fixture.request("halted", kOneGpu)).ok());
    REQUIRE(wait_for(*service, service->begin_stop(vm_name("halted"), true)->id).state == "succeeded");
  }
  REQUIRE(fixture.libvirt().start_paused("halted").ok());
  auto cut = left_behind("op-earlier-9", "running", "");
  cut.kind = "start";
  cut.vm = "halted";
  REQUIRE(records_of(fixture).write(cut).ok());

  auto service = started(fixture);
  const auto start = service->operation("op-earlier-9");
  REQUIRE(start.ok());
  CHECK_MESSAGE(start->state == "succeeded", (start->error ? start->error->message : ""));
  CHECK(service->get_vm(vm_name("halted"))->state == "running");
  CHECK(fixture.libvirt().lookup("halted")->state == virt::DomainState::running);
}

std::vector<std::string> phase_names(const service::OperationView& operation) {
  std::vector<std::string> names;
  for (const auto& phase : operation.timeline) names.push_back(phase.name);
  return names;
}

// Each phase ends no earlier than the one before, and lasts no longer than the operation.
void check_phases_in_order(const service::OperationView& operation) {
  REQUIRE_FALSE(operation.timeline.empty());
  double total = 0;
  for (std::size_t i = 0; i < operation.timeline.size(); ++i) {
    const auto& phase = operation.timeline[i];
    CAPTURE(phase.name);
    CHECK(phase.seconds >= 0);
    CHECK(phase.seconds <= operation.duration_seconds);
    REQUIRE(time_of(phase.ended_at).has_value());
    if (i > 0) CHECK_FALSE(timestamp_before(phase.ended_at, operation.timeline[i - 1].ended_at));
    total += phase.seconds;
  }
  CHECK(total <= operation.duration_seconds);
}

TEST_CASE("a create's and a start's timelines name every phase in order, and survive a restart") {
  DaemonFixture fixture;
  std::string create_id;
  std::string start_id;
  {
    auto service = started(fixture);
    auto created = service->begin_create(fixture.request("timed", kOneGpu));
    REQUIRE_MESSAGE(created.ok(), created.error().message);
    create_id = created->id;
    const auto create = wait_for(*service, create_id);
    REQUIRE(create.state == "succeeded");
    // The fixture's request has a boot image (disk) and its template cloud-init data (seed).
    CHECK(phase_names(create) == std::vector<std::string>{"placement", "render", "disk", "seed", "prepare_devices",
                                                          "define", "launch", "resume"});
    check_phases_in_order(create);
    // The template's 1 GiB pages on one cell, as many allocation threads as the VM's CPUs there.
    const auto& launch = create.timeline.at(6);
    CHECK(launch.name == "launch");
    CHECK_MESSAGE(contains(launch.detail, "in 1 GiB pages, 1 cell, "), launch.detail);
    CHECK_MESSAGE(contains(launch.detail, " allocation threads per cell"), launch.detail);

    REQUIRE(wait_for(*service, service->begin_stop(vm_name("timed"), true)->id).state == "succeeded");
    auto restarted = service->begin_start(vm_name("timed"));
    REQUIRE(restarted.ok());
    start_id = restarted->id;
    const auto start = wait_for(*service, start_id);
    REQUIRE(start.state == "succeeded");
    CHECK(phase_names(start) == std::vector<std::string>{"prepare_devices", "launch", "resume"});
    CHECK(start.template_name == kOneGpu);  // the VM's: its phases are observed per template
    check_phases_in_order(start);
    // Only creates and starts have one.
    CHECK(wait_for(*service, service->begin_stop(vm_name("timed"), true)->id).timeline.empty());
  }
  auto service = started(fixture);
  const auto create = service->operation(create_id);
  REQUIRE(create.ok());
  CHECK(phase_names(*create).size() == 8);
  check_phases_in_order(*create);
  const auto start = service->operation(start_id);
  REQUIRE(start.ok());
  CHECK(phase_names(*start) == std::vector<std::string>{"prepare_devices", "launch", "resume"});
}

bool has_record(const DaemonFixture& fixture, const std::string& id) {
  return std::filesystem::exists(fixture.config().state_directory / "operations" / (id + ".json"));
}

// The operations go after an hour; a VM's creates and starts stay in its history, across a
// restart, until it is deleted (GET /v1/vms/NAME/starts, hostagentctl vm show). The history is the
// operations' own records, kept: a start's end is written once.
TEST_CASE("a VM's starts outlive the operations' hour and a restart, in their own records, and go with the VM") {
  DaemonFixture fixture;
  const auto clock = std::make_shared<ManualClock>();
  std::vector<std::string> ids;
  std::string stop_id;
  {
    auto service = started(fixture, nullptr, clock);
    ids.push_back(service->begin_create(fixture.request("kept", kOneGpu))->id);
    REQUIRE(wait_for(*service, ids.back()).state == "succeeded");
    stop_id = service->begin_stop(vm_name("kept"), true)->id;
    REQUIRE(wait_for(*service, stop_id).state == "succeeded");
    ids.push_back(service->begin_start(vm_name("kept"))->id);
    REQUIRE(wait_for(*service, ids.back()).state == "succeeded");
    clock->advance_steady(std::chrono::hours(2));
    clock->advance_wall(std::chrono::hours(2));
    CHECK(service->operations().empty());  // past the hour
    CHECK_FALSE(has_record(fixture, stop_id));
    CHECK(has_record(fixture, ids[0]));
    CHECK(has_record(fixture, ids[1]));
    const auto starts = service->vm_starts(vm_name("kept"));
    REQUIRE_MESSAGE(starts.ok(), starts.error().message);
    REQUIRE(starts->size() == 2);
    CHECK(starts->at(0).id == ids[1]);
    CHECK(starts->at(1).id == ids[0]);
    CHECK(phase_names(starts->at(1)).back() == "resume");
  }
  auto service = started(fixture, nullptr, clock);
  const auto starts = service->vm_starts(vm_name("kept"));
  REQUIRE(starts.ok());
  CHECK(starts->size() == 2);
  CHECK(phase_names(starts->at(0)) == std::vector<std::string>{"prepare_devices", "launch", "resume"});
  CHECK(service->operations().empty());  // still past the hour: a history is not an operation again
  REQUIRE(delete_vm(*service, vm_name("kept")).ok());
  CHECK(service->vm_starts(vm_name("kept")).error().code == ErrorCode::not_found);
  CHECK_FALSE(has_record(fixture, ids[0]));
  CHECK_FALSE(has_record(fixture, ids[1]));
  CHECK_FALSE(std::filesystem::exists(fixture.config().state_directory / "starts"));
}

TEST_CASE("a VM's history keeps its ten newest starts, and the records of the older ones past the hour go") {
  DaemonFixture fixture;
  const auto clock = std::make_shared<ManualClock>();
  auto service = started(fixture, nullptr, clock);
  std::vector<std::string> ids{service->begin_create(fixture.request("busy", kOneGpu))->id};
  REQUIRE(wait_for(*service, ids.back()).state == "succeeded");
  for (int i = 0; i < 11; ++i) {
    clock->advance_steady(std::chrono::hours(2));  // each start's neighbours are past the hour
    REQUIRE(wait_for(*service, service->begin_stop(vm_name("busy"), true)->id).state == "succeeded");
    ids.push_back(service->begin_start(vm_name("busy"))->id);
    REQUIRE(wait_for(*service, ids.back()).state == "succeeded");
  }
  const auto starts = service->vm_starts(vm_name("busy"));
  REQUIRE(starts.ok());
  REQUIRE(starts->size() == 10);
  CHECK(starts->front().id == ids.back());
  CHECK(starts->back().id == ids[2]);
  CHECK_FALSE(has_record(fixture, ids[0]));  // the create and the first start: out of the history
  CHECK_FALSE(has_record(fixture, ids[1]));
  for (std::size_t i = 2; i < ids.size(); ++i) CHECK(has_record(fixture, ids[i]));
}

// Releases before this one kept each VM's starts apart, in starts/NAME.json, beside the records.
// The first start of this one moves them into the operation records and removes the directory.
TEST_CASE("an earlier release's start history is moved into the operation records at start, and read as before") {
  DaemonFixture fixture;
  const auto clock = std::make_shared<ManualClock>();
  const auto state_directory = fixture.config().state_directory;
  std::string create_id;
  {
    auto service = started(fixture, nullptr, clock);
    create_id = service->begin_create(fixture.request("upgraded", kOneGpu))->id;
    REQUIRE(wait_for(*service, create_id).state == "succeeded");
  }
  // As the earlier release left it: the create's record in both places, and an older start's in
  // the history alone (its operation's hour had passed).
  const std::string create_text = read_text_file(state_directory / "operations" / (create_id + ".json"));
  auto older = boost::json::parse(create_text).as_object();
  older["id"] = "op-older-7";
  older["kind"] = "start";
  older["template"] = "";
  older["submitted_at"] = older["finished_at"];
  older["started_at"] = older["finished_at"];
  write_text_file(state_directory / "starts" / "upgraded.json", R"({"vm":"upgraded","starts":[)" +
                                                                    create_text.substr(0, create_text.size() - 1) +
                                                                    "," + boost::json::serialize(older) + "]}\n");
  auto service = started(fixture, nullptr, clock);
  const auto starts = service->vm_starts(vm_name("upgraded"));
  REQUIRE_MESSAGE(starts.ok(), starts.error().message);
  REQUIRE(starts->size() == 2);
  CHECK(starts->at(0).id == "op-older-7");
  CHECK(starts->at(1).id == create_id);
  CHECK(has_record(fixture, "op-older-7"));
  CHECK_FALSE(std::filesystem::exists(state_directory / "starts"));
  REQUIRE(delete_vm(*service, vm_name("upgraded")).ok());
  CHECK(has_record(fixture, "op-older-7"));  // an operation of the last hour, as its times say
  clock->advance_steady(std::chrono::hours(2));
  CHECK(service->operations().empty());
  CHECK_FALSE(has_record(fixture, "op-older-7"));
}

// Issue 43, defect 11: a VM removed outside hostagent left its seed (the tenant's keys and user
// data) and its start history behind, and a start of a missing or foreign VM made a history.
TEST_CASE("a VM removed outside hostagent takes its seed and start history with it, running or not") {
  DaemonFixture fixture;
  const auto clock = std::make_shared<ManualClock>();
  const auto state = fixture.config().state_directory;
  const auto with_seed = [&](const std::string& name) {
    auto request = fixture.request(name, kOneGpu);
    request.ssh_authorized_keys = {"ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIFake " + name};
    return request;
  };
  std::string live_create;
  std::string down_create;
  {
    auto service = started(fixture, nullptr, clock);
    live_create = service->begin_create(with_seed("outside-live"))->id;
    down_create = service->begin_create(with_seed("outside-down"))->id;
    REQUIRE(wait_for(*service, live_create).state == "succeeded");
    REQUIRE(wait_for(*service, down_create).state == "succeeded");
    REQUIRE(std::filesystem::exists(state / "seeds" / "outside-live.iso"));
    // While the daemon runs: libvirt's event, then the sync.
    REQUIRE(fixture.libvirt().destroy("outside-live").ok());
    REQUIRE(fixture.libvirt().undefine("outside-live").ok());
    for (int i = 0; i < 1000 && std::filesystem::exists(state / "seeds" / "outside-live.iso"); ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    CHECK_FALSE(std::filesystem::exists(state / "seeds" / "outside-live.iso"));
    // Its create stays an operation for the hour, then goes: no history keeps it.
    clock->advance_steady(std::chrono::hours(2));
    clock->advance_wall(std::chrono::hours(2));
    CHECK(service->operations().empty());
    CHECK_FALSE(has_record(fixture, live_create));
    CHECK(has_record(fixture, down_create));  // outside-down's history
    // A start of a VM that is not there, or not hostagent's, is refused at once: no history.
    CHECK(service->begin_start(vm_name("outside-live")).error().code == ErrorCode::not_found);
    CHECK(service->begin_start(vm_name("test")).error().code == ErrorCode::conflict);  // the driver's own
    CHECK(service->operations().empty());
  }
  // While the daemon is down: found at the next start.
  REQUIRE(fixture.libvirt().destroy("outside-down").ok());
  REQUIRE(fixture.libvirt().undefine("outside-down").ok());
  auto service = started(fixture, nullptr, clock);
  const auto released = service->status().last_reconcile.released;
  CHECK(std::find(released.begin(), released.end(), "seed outside-down.iso") != released.end());
  CHECK(std::find(released.begin(), released.end(), "start history of outside-down") != released.end());
  CHECK_FALSE(std::filesystem::exists(state / "seeds" / "outside-down.iso"));
  CHECK_FALSE(has_record(fixture, down_create));
}

TEST_CASE("an operation record that cannot be read stops the start, naming the file") {
  DaemonFixture fixture;
  const auto directory = fixture.config().state_directory / "operations";
  std::filesystem::create_directories(directory);
  std::ofstream(directory / "op-x-1.json") << R"({"id": "op-x-1", "kind": "explode"})";
  const auto refused = fixture.start();
  REQUIRE_FALSE(refused.ok());
  CHECK(refused.error().code == ErrorCode::parse_error);
  CHECK(contains(refused.error().message, (directory / "op-x-1.json").string()));
}

}  // namespace
}  // namespace hostagent::testing
