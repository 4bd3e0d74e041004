// hostagentctl's views of the API's documents, from the JSON the server answers: what an operator
// reads of a device's state, its cleanings and capacity. The daemon's own answers are followed end
// to end in test_hostagentctl.cpp; here the documents are the ones a lifecycle leaves (a device
// cleaning, a step skipped, a broken evidence chain), which the simulated daemon does not make
// on demand.
#include <doctest/doctest.h>

#include <boost/json.hpp>

#include "api_views.hpp"

namespace hostagent::ctl {
namespace {

namespace json = boost::json;

// The row of `address` in a rendered table.
std::string view_row(const std::string& table, const std::string& address) {
  const auto at = table.find(address);
  REQUIRE_MESSAGE(at != std::string::npos, address << " not in\n" << table);
  return table.substr(at, table.find('\n', at) - at);
}

json::value view_device(const std::string& address, const std::string& state) {
  return json::parse(R"({"address":")" + address + R"(","role":"gpu","vendor_id":"0x10de","device_id":"0x2330",)" +
                     R"("class":"0x030200","numa_node":0,"iommu_group":12,"driver":"vfio-pci","switch":null,)" +
                     R"("physfn":null,"held_by":null,"host_use":null,"quarantine":null,"state":")" + state +
                     R"(","cleaning":null,"last_cleaning":null})");
}

json::value view_history(const std::string& broken) {
  auto value = json::parse(
      R"({"address":"0000:18:00.0","cleanings":[{"sequence":3,"address":"0000:18:00.0","role":"gpu","vm":"train-0",)"
      R"("outcome":"clean","started_at":"2026-12-05T09:00:00Z","finished_at":"2026-12-05T09:00:02Z",)"
      R"("steps":[{"name":"reset","result":"passed","detail":"flr","started_at":"a","finished_at":"b","seconds":0.25},)"
      R"({"name":"scrub","result":"skipped","detail":"not scrubbed: no scrubber configured","started_at":"b",)"
      R"("finished_at":"b","seconds":0}],"previous_sha256":"00","sha256":"ab12"}],"chain":{"whole":true,"broken":null}})");
  if (!broken.empty()) value.at("chain") = json::object{{"whole", false}, {"broken", broken}};
  return value;
}

}  // namespace

TEST_CASE("hostagentctl vm top shows CPU use between two reads, and a dash where libvirt said nothing") {
  const auto stats = [](const char* read_at, double cpu, uint64_t written) {
    return json::parse(std::string(R"({"vm":"train-0","state":"running","read_at":")") + read_at +
                       R"(","cpu_seconds":)" + std::to_string(cpu) +
                       R"(,"vcpus":16,"memory_bytes":17179869184,"memory_max_bytes":null,"rss_bytes":1073741824,)"
                       R"("blocks":[{"device":"vda","read_bytes":0,"write_bytes":)" +
                       std::to_string(written) +
                       R"(,"read_requests":0,"write_requests":1}],"interfaces":[],"devices":{"gpu":1}})");
  };
  const auto bare = json::parse(R"({"vm":"idle","state":"shut_off","read_at":"2026-12-07T05:00:05Z",)"
                                R"("cpu_seconds":null,"vcpus":null,"memory_bytes":null,"memory_max_bytes":null,)"
                                R"("rss_bytes":null,"blocks":[],"interfaces":[],"devices":{}})");
  // 8 CPU seconds in 5 s: 160% (of one CPU, as top counts).
  const std::string table = render_vm_top({{"train-0", stats("2026-12-07T05:00:00Z", 100, 0)}, {"idle", bare}},
                                          {{"train-0", stats("2026-12-07T05:00:05Z", 108, 1048576)}, {"idle", bare}});
  CHECK_MESSAGE(table.find("160.0") != std::string::npos, table);
  CHECK(table.find("16 GiB") != std::string::npos);
  CHECK(table.find("0 B/1 MiB") != std::string::npos);
  const auto idle = table.substr(table.find("idle"));
  CHECK_MESSAGE(idle.substr(0, idle.find('\n')).find("shut_off  -") != std::string::npos, table);
  // A VM seen only in the second read has no CPU figure yet.
  CHECK(render_vm_top({}, {{"train-0", stats("2026-12-07T05:00:05Z", 108, 0)}}).find("160.0") == std::string::npos);
}

TEST_CASE("hostagentctl operation show lists a create's timeline phase by phase, and none without one") {
  auto operation = json::parse(
      R"({"id":"op-x-3","kind":"create","vm":"train-0","request_id":"","state":"succeeded","step":"commit",)"
      R"("step_number":6,"step_count":6,"error":null,"submitted_at":"2026-12-05T09:00:00Z",)"
      R"("started_at":"2026-12-05T09:00:00Z","finished_at":"2026-12-05T09:00:02Z","duration_seconds":1.5,)"
      R"("timeline":[{"phase":"placement","ended_at":"2026-12-05T09:00:00.001Z","seconds":0.001,"detail":""},)"
      R"({"phase":"launch","ended_at":"2026-12-05T09:00:01.5Z","seconds":1.25,)"
      R"("detail":"1 GiB in 2 MiB pages, 1 cell, 2 allocation threads per cell"}]})");
  const auto shown = render_operation(operation);
  CHECK_MESSAGE(shown.find("\ntimeline:\n") != std::string::npos, shown);
  const auto placement = view_row(shown, "placement");
  CHECK(placement.substr(placement.find_last_not_of(' ')) == "-");  // no detail
  const auto launch = view_row(shown, "launch");
  CHECK(launch.find("1.25") != std::string::npos);
  CHECK(launch.find("2026-12-05T09:00:01.5Z") != std::string::npos);
  CHECK(launch.find("2 allocation threads per cell") != std::string::npos);
  operation.at("timeline") = json::array{};
  CHECK(render_operation(operation).find("timeline") == std::string::npos);
}

TEST_CASE("hostagentctl vm show ends with the VM's newest create or start that has a timeline") {
  const auto vm = json::parse(R"({"name":"train-0","uuid":"u","managed":true,"state":"running","operation":null,)"
                              R"("last_event":"started","record":null})");
  const auto phase = [](const std::string& seconds) {
    return R"({"phase":"launch","ended_at":"2026-12-05T09:00:01Z","seconds":)" + seconds + R"(,"detail":""})";
  };
  const auto operation = [](const std::string& id, const std::string& kind, const std::string& vm_name,
                            const std::string& timeline) {
    return R"({"id":")" + id + R"(","kind":")" + kind + R"(","vm":")" + vm_name + R"(","state":"succeeded",)" +
           R"("timeline":[)" + timeline + "]}";
  };
  // Newest first (GET /v1/vms/train-0/starts): a start cut short before its first phase, a start,
  // the create.
  const auto starts = json::parse(R"({"vm":"train-0","starts":[)" + operation("op-x-3", "start", "train-0", "") + "," +
                                  operation("op-x-2", "start", "train-0", phase("2.5")) + "," +
                                  operation("op-x-1", "create", "train-0", phase("7.25")) + "]}");
  const auto shown = render_vm_with_start(vm, starts);
  CHECK_MESSAGE(shown.find("last start: op-x-2 (start, succeeded)") != std::string::npos, shown);
  CHECK(view_row(shown, "launch").find("2.5") != std::string::npos);
  CHECK(shown.find("7.25") == std::string::npos);
  // No start kept: the VM alone.
  CHECK(render_vm_with_start(vm, json::parse(R"({"vm":"train-0","starts":[]})")) == render_vm(vm));
}

TEST_CASE("hostagentctl devices shows each device's state and what its last cleaning left undone") {
  auto held = view_device("0000:18:00.0", "held");
  held.as_object()["held_by"] = "train-0";
  held.as_object()["cleaning"] = json::parse(
      R"({"address":"0000:18:00.0","vm":"train-0","since":"2026-12-05T08:00:00Z","held_by":"train-0","step":null})");
  auto cleaning = view_device("0000:29:00.0", "cleaning");
  cleaning.as_object()["cleaning"] = json::parse(
      R"({"address":"0000:29:00.0","vm":"train-1","since":"2026-12-05T08:10:00Z","held_by":null,"step":"reset"})");
  auto quarantined = view_device("0000:3a:00.0", "quarantined");
  quarantined.as_object()["quarantine"] = json::parse(
      R"({"address":"0000:3a:00.0","step":"erase","reason":"pattern mismatch","vm":null,"since":"2026-12-05T08:20:00Z"})");
  auto unscrubbed = view_device("0000:4b:00.0", "free");
  unscrubbed.as_object()["last_cleaning"] =
      json::parse(R"({"sequence":4,"outcome":"clean","vm":"train-0","finished_at":"2026-12-05T09:00:02Z",)"
                  R"("marks":["scrub skipped: not scrubbed: no scrubber configured"]})");
  auto host = view_device("0000:07:00.0", "host");
  host.as_object()["host_use"] = "nvme0n1p1 mounted at /boot/efi";
  const auto table =
      render_devices(json::object{{"devices", json::array{held, cleaning, quarantined, unscrubbed, host}}});

  CHECK(table.rfind("ADDRESS", 0) == 0);
  CHECK(table.find("STATE") != std::string::npos);
  // Held wins: every held device is marked for cleaning, which says nothing until it is let go.
  CHECK(view_row(table, "0000:18:00.0").find("held: train-0") != std::string::npos);
  CHECK(view_row(table, "0000:18:00.0").find("CLEANING") == std::string::npos);
  CHECK(view_row(table, "0000:29:00.0").find("CLEANING: reset") != std::string::npos);
  CHECK(view_row(table, "0000:3a:00.0").find("QUARANTINED: erase failed") != std::string::npos);
  const auto unscrubbed_row = view_row(table, "0000:4b:00.0");
  CHECK(unscrubbed_row.find(" free ") != std::string::npos);
  CHECK(unscrubbed_row.ends_with("#4 clean: scrub skipped"));
  CHECK(view_row(table, "0000:07:00.0").find("host: nvme0n1p1 mounted at /boot/efi") != std::string::npos);
}

TEST_CASE("hostagentctl cleaning list shows whose device, since when, who still holds it and the step") {
  const auto table = render_cleaning(json::parse(
      R"({"devices":[{"address":"0000:18:00.0","vm":"train-0","since":"2026-12-05T08:00:00Z","held_by":"train-0",)"
      R"("step":null},{"address":"0000:29:00.0","vm":null,"since":"2026-12-05T08:10:00Z","held_by":null,)"
      R"("step":"scrub"}]})"));
  CHECK(table.rfind("ADDRESS", 0) == 0);
  CHECK(view_row(table, "0000:18:00.0") == "0000:18:00.0  2026-12-05T08:00:00Z  train-0  train-0  -");
  CHECK(view_row(table, "0000:29:00.0") == "0000:29:00.0  2026-12-05T08:10:00Z  -        -        scrub");
}

TEST_CASE("hostagentctl devices history renders each cleaning step by step") {
  const auto text = render_history(view_history(""));
  CHECK(text.rfind("0000:18:00.0: 1 cleaning on record\n", 0) == 0);
  CHECK(text.find("#3 clean  vm train-0  gpu  2026-12-05T09:00:00Z .. 2026-12-05T09:00:02Z\n") != std::string::npos);
  CHECK(text.find("  STEP   RESULT   SECONDS  DETAIL\n") != std::string::npos);
  CHECK(text.find("  reset  passed   0.25     flr\n") != std::string::npos);
  CHECK(text.find("  scrub  skipped  0        not scrubbed: no scrubber configured\n") != std::string::npos);
  CHECK(text.find("sha256 ab12") != std::string::npos);
  CHECK(text.find("BROKEN") == std::string::npos);
}

TEST_CASE("hostagentctl devices history says a broken evidence chain first and last") {
  const auto text = render_history(view_history("line 7: sha256 does not match its text"));
  const std::string loud =
      "EVIDENCE CHAIN BROKEN: line 7: sha256 does not match its text; cleanings after the break are not vouched "
      "for and not shown\n";
  CHECK_MESSAGE(text.rfind(loud, 0) == 0, text);
  CHECK(text.size() > loud.size());
  CHECK(text.substr(text.size() - loud.size()) == loud);
}

TEST_CASE("hostagentctl host capacity shows devices out of placement beside free of total") {
  const auto count = [](int total, int free, int cleaning, int quarantined) {
    return json::object{{"total", total}, {"free", free}, {"cleaning", cleaning}, {"quarantined", quarantined}};
  };
  const json::object cpus{{"total", 8}, {"free", 8}, {"housekeeping", 0}, {"held", 0}, {"offline", 0}};
  const json::object node{{"node", 0},
                          {"cpus", cpus},
                          {"gpus", count(8, 5, 2, 1)},
                          {"vfs", count(8, 8, 0, 0)},
                          {"nvme", count(2, 1, 0, 1)},
                          {"hugepages", json::array{}}};
  auto totals = node;
  totals.erase("node");
  const auto table = render_capacity(json::object{{"nodes", json::array{node}}, {"totals", totals}});
  CHECK_MESSAGE(table.find("5/8 (2 cleaning, 1 quarantined)") != std::string::npos, table);
  CHECK(table.find("1/2 (1 quarantined)") != std::string::npos);
  CHECK(table.find("8/8 ") != std::string::npos);  // nothing out: no parentheses
  CHECK(table.find("8/8 (") == std::string::npos);
}

TEST_CASE("hostagentctl events renders cleaning events: running, clean, quarantined") {
  const auto line = [](const std::string& data) { return render_event(api::ServerEvent{"41", "cleaning", data}); };
  CHECK(line(R"({"device":"0000:18:00.0","vm":"train-0","state":"cleaning","step":"reset","outcome":null,)"
             R"("sequence":null})") == "41 cleaning 0000:18:00.0 (train-0): cleaning: reset");
  CHECK(line(R"({"device":"0000:18:00.0","vm":null,"state":"free","step":null,"outcome":"clean","sequence":12})") ==
        "41 cleaning 0000:18:00.0 clean: free (#12)");
  CHECK(line(R"({"device":"0000:18:00.0","vm":"train-0","state":"quarantined","step":"erase",)"
             R"("outcome":"quarantined","sequence":13})") ==
        "41 cleaning 0000:18:00.0 (train-0) quarantined: erase failed (#13)");
}

}  // namespace hostagent::ctl
