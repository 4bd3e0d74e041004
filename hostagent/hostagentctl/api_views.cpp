// hostagentctl: the API's documents as tables and field blocks.
#include "api_views.hpp"

#include <algorithm>
#include <boost/json/parse.hpp>
#include <chrono>
#include <iomanip>
#include <map>
#include <optional>
#include <sstream>

#include "hostagent/common/text.hpp"
#include "hostagent/common/time_text.hpp"
#include "progress.hpp"
#include "table.hpp"

namespace hostagent::ctl {
namespace {

namespace json = boost::json;

const json::value& member(const json::value& object, const char* key) {
  static const json::value null;
  const auto* found = object.is_object() ? object.get_object().if_contains(key) : nullptr;
  return found == nullptr ? null : *found;
}

const json::array& items(const json::value& value) {
  static const json::array empty;
  return value.is_array() ? value.get_array() : empty;
}

std::uint64_t unsigned_of(const json::value& value) {
  if (value.is_uint64()) return value.get_uint64();
  if (value.is_int64() && value.get_int64() >= 0) return static_cast<std::uint64_t>(value.get_int64());
  if (value.is_double() && value.get_double() >= 0) return static_cast<std::uint64_t>(value.get_double());
  return 0;
}

std::string free_of_total(const json::value& count) {
  return display(count, "free") + "/" + display(count, "total");
}

std::int64_t count_of(const json::value& count, const char* key) {
  const auto& value = member(count, key);
  return value.is_int64() ? value.get_int64() : static_cast<std::int64_t>(unsigned_of(value));
}

// "6/8", or "6/8 (1 cleaning, 1 quarantined)": what is out of placement for now, not gone.
std::string device_count(const json::value& count) {
  std::string out;
  for (const char* key : {"cleaning", "quarantined"}) {
    if (count_of(count, key) > 0) out += (out.empty() ? "" : ", ") + std::to_string(count_of(count, key)) + " " + key;
  }
  return free_of_total(count) + (out.empty() ? "" : " (" + out + ")");
}

std::string operation_cell(const json::value& vm) {
  auto operation = display(vm, "operation");
  if (operation == "-") return operation;
  const auto step = display(vm, "step");
  return step == "-" ? operation : operation + " (" + step + ")";
}

// "512 x 1 GiB (0: 256, 1: 256)"
std::string hugepages_held(const json::value& holds) {
  const auto size = unsigned_of(member(holds, "hugepage_size_bytes"));
  const auto& by_node = member(holds, "hugepages_by_node");
  if (!by_node.is_object() || by_node.get_object().empty()) return "-";
  std::uint64_t total = 0;
  std::string nodes;
  for (const auto& [node, pages] : by_node.get_object()) {
    total += unsigned_of(pages);
    nodes += (nodes.empty() ? "" : ", ") + std::string(node) + ": " + display(pages);
  }
  return std::to_string(total) + " x " + format_bytes(size) + " (node " + nodes + ")";
}

std::string hugepage_pools(const json::value& pools) {
  std::string out;
  for (const auto& pool : items(pools)) {
    out += (out.empty() ? "" : ", ") + free_of_total(pool) + " x " +
           format_bytes(unsigned_of(member(pool, "page_size_bytes")));
  }
  return out.empty() ? "-" : out;
}

// Each NIC VF's RDMA side as the host saw it at create: "0000:19:00.1 mlx5_10 ACTIVE RoCE v2 GID 1".
std::string rdma_held(const json::value& record) {
  std::string out;
  for (const auto& vf : items(member(record, "rdma"))) {
    std::string entry = display(vf, "vf") + " " + display(vf, "host_device") + " " + display(vf, "state");
    const auto& gid = member(vf, "roce_v2_gid_index");
    if (!gid.is_null()) entry += " RoCE v2 GID " + display(vf, "roce_v2_gid_index");
    out += (out.empty() ? "" : ", ") + entry;
  }
  return out.empty() ? "-" : out;
}

}  // namespace

std::string render_vms(const json::value& vms) {
  Table table({"NAME", "STATE", "TEMPLATE", "OPERATION", "CPUS", "DEVICES", "LAST EVENT"});
  for (const auto& vm : items(vms)) {
    const auto& record = member(vm, "record");
    const bool managed = member(vm, "managed").is_bool() && member(vm, "managed").get_bool();
    const auto& holds = member(record, "holds");
    table.add_row({display(vm, "name"), display(vm, "state"), managed ? display(record, "template") : "(foreign)",
                   operation_cell(vm), display(holds, "cpus"),
                   managed ? std::to_string(items(member(holds, "devices")).size()) : "-", display(vm, "last_event")});
  }
  return table.render();
}

// Where a create's or start's time went: one row per phase, in order.
std::string timeline_table(const json::value& operation) {
  const auto& phases = items(member(operation, "timeline"));
  if (phases.empty()) return "";
  Table table({"PHASE", "SECONDS", "ENDED AT", "DETAIL"});
  for (const auto& phase : phases) {
    const auto& detail = member(phase, "detail");
    table.add_row({display(phase, "phase"), display(phase, "seconds"), display(phase, "ended_at"),
                   detail.is_string() && !detail.as_string().empty() ? display(detail) : "-"});
  }
  return "\ntimeline:\n" + table.render();
}

std::string render_vm(const json::value& vm) {
  const auto& record = member(vm, "record");
  const auto& holds = member(record, "holds");
  std::vector<std::pair<std::string, std::string>> fields = {
      {"name", display(vm, "name")},   {"uuid", display(vm, "uuid")},     {"managed", display(vm, "managed")},
      {"state", display(vm, "state")}, {"operation", operation_cell(vm)}, {"last event", display(vm, "last_event")}};
  if (record.is_object()) {
    fields.insert(fields.end(), {{"template", display(record, "template")},
                                 {"request id", display(record, "request_id")},
                                 {"created at", display(record, "created_at")},
                                 {"boot image", display(record, "boot_image")},
                                 {"disk", display(record, "disk")},
                                 {"macs", display(record, "macs")},
                                 {"cloud-init seed", display(record, "cloud_init_seed")},
                                 {"nvlink", display(record, "nvlink")},
                                 {"cpus", display(holds, "cpus")},
                                 {"hugepages", hugepages_held(holds)},
                                 {"devices", display(holds, "devices")},
                                 {"p2p ports", display(holds, "p2p_ports")},
                                 {"rdma", rdma_held(record)}});
  }
  return render_fields(fields);
}

std::string render_vm_with_start(const json::value& vm, const json::value& starts) {
  std::string out = render_vm(vm);
  const auto& name = member(vm, "name");
  // Newest first: the first create or start of this VM with phases is its last start.
  for (const auto& operation : items(member(starts, "starts"))) {
    const std::string kind = display(operation, "kind");
    if (member(operation, "vm") != name || (kind != "create" && kind != "start")) continue;
    if (items(member(operation, "timeline")).empty()) continue;
    return out + "\nlast start: " + display(operation, "id") + " (" + kind + ", " + display(operation, "state") + ")" +
           timeline_table(operation);
  }
  return out;
}

std::string render_operations(const json::value& operations) {
  Table table({"ID", "KIND", "VM", "STATE", "STEP", "SUBMITTED", "SECONDS", "ERROR"});
  for (const auto& operation : items(operations)) {
    const auto& error = member(operation, "error");
    table.add_row(
        {display(operation, "id"), display(operation, "kind"), display(operation, "vm"), display(operation, "state"),
         display(operation, "step_number") + "/" + display(operation, "step_count") + " " + display(operation, "step"),
         display(operation, "submitted_at"), display(operation, "duration_seconds"),
         error.is_object() ? display(error, "detail") : "-"});
  }
  return table.render();
}

std::string render_operation(const json::value& operation) {
  const auto& error = member(operation, "error");
  return render_fields({{"id", display(operation, "id")},
                        {"kind", display(operation, "kind")},
                        {"vm", display(operation, "vm")},
                        {"request id", display(operation, "request_id")},
                        {"state", display(operation, "state")},
                        {"progress", progress_line(operation)},
                        {"submitted at", display(operation, "submitted_at")},
                        {"started at", display(operation, "started_at")},
                        {"finished at", display(operation, "finished_at")},
                        {"duration", display(operation, "duration_seconds") + " s"},
                        {"error", error.is_object() ? display(error, "detail") : "-"}}) +
         timeline_table(operation);
}

std::string render_host(const json::value& host) {
  Table nodes({"NODE", "CPUS", "MEMORY", "FREE", "HUGEPAGES"});
  for (const auto& node : items(member(host, "numa_nodes"))) {
    const auto& memory = member(node, "memory_bytes");
    const auto& memory_free = member(node, "memory_free_bytes");
    nodes.add_row({display(node, "id"), std::to_string(items(member(node, "cpus")).size()),
                   memory.is_null() ? "-" : format_bytes(unsigned_of(memory)),
                   memory_free.is_null() ? "-" : format_bytes(unsigned_of(memory_free)),
                   hugepage_pools(member(node, "hugepages"))});
  }
  std::map<std::string, int> roles;
  for (const auto& device : items(member(host, "pci_devices"))) ++roles[display(device, "role")];
  Table devices({"ROLE", "COUNT"});
  for (const auto& [role, count] : roles) devices.add_row({role, std::to_string(count)});
  return render_fields({{"source", display(host, "source")},
                        {"cpus", std::to_string(items(member(host, "cpus")).size())},
                        {"pcie switches", std::to_string(items(member(host, "switches")).size())}}) +
         "\n" + nodes.render() + "\n" + devices.render();
}

std::string render_capacity(const json::value& capacity) {
  Table table({"NODE", "CPUS FREE", "HELD", "HOUSEKEEPING", "GPUS FREE", "VFS FREE", "NVME FREE", "HUGEPAGES FREE"});
  const auto row = [&table](const std::string& name, const json::value& node) {
    const auto& cpus = member(node, "cpus");
    table.add_row({name, free_of_total(cpus), display(cpus, "held"), display(cpus, "housekeeping"),
                   device_count(member(node, "gpus")), device_count(member(node, "vfs")),
                   device_count(member(node, "nvme")), hugepage_pools(member(node, "hugepages"))});
  };
  for (const auto& node : items(member(capacity, "nodes"))) row(display(node, "node"), node);
  row("total", member(capacity, "totals"));
  return table.render();
}

namespace {

// The VM holding a device, the host with its reason, its quarantine or its cleaning: each means no
// create gets it. A daemon from before cleaning sends no state: free is then what holds nothing.
std::string state_cell(const json::value& device) {
  const auto& host_use = member(device, "host_use");
  if (host_use.is_string()) return "host: " + std::string(host_use.as_string());
  const auto& quarantine = member(device, "quarantine");
  const auto& cleaning = member(device, "cleaning");
  const std::string held = display(device, "held_by");
  std::string cell = held == "-" ? "" : "held: " + held;
  if (quarantine.is_object()) {
    cell += std::string(cell.empty() ? "" : ", ") + "QUARANTINED: " + display(quarantine, "step") + " failed";
  } else if (cleaning.is_object() && cell.empty()) {
    const auto step = display(cleaning, "step");
    cell = "CLEANING" + (step == "-" ? "" : ": " + step);
  }
  return cell.empty() ? "free" : cell;
}

// "scrub skipped" for each step the device's last cleaning did not pass: what its next tenant
// inherits ("devices history" has the detail).
std::string cleaning_marks(const json::value& device) {
  std::string out;
  for (const auto& mark : items(member(member(device, "last_cleaning"), "marks"))) {
    const std::string text = display(mark);
    out += (out.empty() ? "" : ", ") + text.substr(0, text.find(": "));
  }
  return out;
}

}  // namespace

std::string render_devices(const json::value& devices) {
  Table table({"ADDRESS", "ROLE", "ID", "NODE", "IOMMU", "DRIVER", "SWITCH", "STATE", "LAST CLEANING"});
  for (const auto& device : items(member(devices, "devices"))) {
    const auto& last = member(device, "last_cleaning");
    std::string cleaned = last.is_object() ? "#" + display(last, "sequence") + " " + display(last, "outcome") : "-";
    if (const auto marks = cleaning_marks(device); !marks.empty()) cleaned += ": " + marks;
    table.add_row({display(device, "address"), display(device, "role"),
                   display(device, "vendor_id") + ":" + display(device, "device_id"), display(device, "numa_node"),
                   display(device, "iommu_group"), display(device, "driver"), display(device, "switch"),
                   state_cell(device), cleaned});
  }
  return table.render();
}

std::string render_cleaning(const json::value& cleaning) {
  Table table({"ADDRESS", "SINCE", "VM", "HELD BY", "STEP"});
  for (const auto& entry : items(member(cleaning, "devices"))) {
    table.add_row({display(entry, "address"), display(entry, "since"), display(entry, "vm"), display(entry, "held_by"),
                   display(entry, "step")});
  }
  return table.render();
}

namespace {

// Each line of text indented by two spaces.
std::string indented(const std::string& text) {
  std::string out;
  std::size_t start = 0;
  while (start < text.size()) {
    const std::size_t end = std::min(text.find('\n', start), text.size());
    out += "  " + text.substr(start, end - start) + "\n";
    start = end + 1;
  }
  return out;
}

std::string render_cleaning_record(const json::value& record) {
  Table steps({"STEP", "RESULT", "SECONDS", "DETAIL"});
  for (const auto& step : items(member(record, "steps"))) {
    steps.add_row({display(step, "name"), display(step, "result"), display(step, "seconds"), display(step, "detail")});
  }
  return "#" + display(record, "sequence") + " " + display(record, "outcome") + "  vm " + display(record, "vm") + "  " +
         display(record, "role") + "  " + display(record, "started_at") + " .. " + display(record, "finished_at") +
         "\n" + indented(steps.render()) + "  sha256 " + display(record, "sha256") + "\n";
}

}  // namespace

// A broken chain first and last, loud: what follows the break is not vouched for, and the operator
// must not read a short history as a clean one.
std::string render_history(const json::value& history) {
  const auto& chain = member(history, "chain");
  const auto& whole = member(chain, "whole");
  const std::string broken = whole.is_bool() && whole.get_bool()
                                 ? ""
                                 : "EVIDENCE CHAIN BROKEN: " + display(chain, "broken") +
                                       "; cleanings after the break are not vouched for and not shown\n";
  const auto& cleanings = items(member(history, "cleanings"));
  std::string out = broken + display(history, "address") + ": " + std::to_string(cleanings.size()) +
                    (cleanings.size() == 1 ? " cleaning" : " cleanings") + " on record\n";
  for (const auto& record : cleanings) out += "\n" + render_cleaning_record(record);
  return out + (broken.empty() || cleanings.empty() ? "" : "\n" + broken);
}

std::string render_quarantine(const json::value& quarantine) {
  Table table({"ADDRESS", "SINCE", "STEP", "VM", "REASON"});
  for (const auto& entry : items(member(quarantine, "devices"))) {
    table.add_row({display(entry, "address"), display(entry, "since"), display(entry, "step"), display(entry, "vm"),
                   display(entry, "reason")});
  }
  return table.render();
}

namespace {

// CPU used between two reads, in percent of one CPU; nullopt when either lacks a figure or time.
std::optional<double> cpu_percent(const json::value& before, const json::value& after) {
  const auto& b = member(before, "cpu_seconds");
  const auto& a = member(after, "cpu_seconds");
  const auto from = time_of(display(before, "read_at"));
  const auto to = time_of(display(after, "read_at"));
  if (!b.is_number() || !a.is_number() || !from || !to || *to <= *from) return std::nullopt;
  const double seconds = std::chrono::duration<double>(*to - *from).count();
  return 100.0 * (a.to_number<double>() - b.to_number<double>()) / seconds;
}

}  // namespace

std::string render_vm_top(const std::map<std::string, json::value>& before,
                          const std::map<std::string, json::value>& after) {
  Table table({"VM", "STATE", "CPU%", "VCPUS", "MEMORY", "RSS", "DISK READ/WRITTEN", "NET RX/TX"});
  for (const auto& row : after) {
    const std::string& name = row.first;
    const json::value& now = row.second;
    const auto earlier = before.find(name);
    const auto cpu = earlier == before.end() ? std::nullopt : cpu_percent(earlier->second, now);
    std::ostringstream percent;
    if (cpu) percent << std::fixed << std::setprecision(1) << *cpu;
    std::uint64_t read = 0, written = 0, rx = 0, tx = 0;
    for (const auto& block : items(member(now, "blocks"))) {
      read += unsigned_of(member(block, "read_bytes"));
      written += unsigned_of(member(block, "write_bytes"));
    }
    for (const auto& net : items(member(now, "interfaces"))) {
      rx += unsigned_of(member(net, "rx_bytes"));
      tx += unsigned_of(member(net, "tx_bytes"));
    }
    const auto bytes_or_dash = [&](const char* key) {
      const auto& value = member(now, key);
      return value.is_number() ? format_bytes(unsigned_of(value)) : std::string("-");
    };
    table.add_row({name, display(now, "state"), cpu ? percent.str() : "-", display(now, "vcpus"),
                   bytes_or_dash("memory_bytes"), bytes_or_dash("rss_bytes"),
                   format_bytes(read) + "/" + format_bytes(written), format_bytes(rx) + "/" + format_bytes(tx)});
  }
  return table.render();
}

std::string render_maintenance(const json::value& maintenance) {
  std::string out = render_fields({{"mode", display(maintenance, "mode")},
                                   {"reason", display(maintenance, "reason")},
                                   {"by", display(maintenance, "principal")},
                                   {"since", display(maintenance, "since")},
                                   {"deadline", display(maintenance, "deadline")}});
  const auto& vms = items(member(maintenance, "vms"));
  if (vms.empty()) return out;
  Table table({"VM", "DRAIN", "ERROR"});
  for (const auto& vm : vms) table.add_row({display(vm, "vm"), display(vm, "state"), display(vm, "error")});
  return out + "\n" + table.render();
}

std::string render_templates(const json::value& templates) {
  Table table({"NAME", "VCPUS", "MEMORY", "GPUS", "VFS/GPU", "NVME", "DESCRIPTION"});
  for (const auto& shape : items(member(templates, "templates"))) {
    const auto& gpus = member(shape, "gpus");
    table.add_row(
        {display(shape, "name"), display(shape, "vcpus"), format_bytes(unsigned_of(member(shape, "memory_bytes"))),
         display(gpus, "count") + (display(gpus, "model") == "-" ? "" : " " + display(gpus, "model")),
         display(member(shape, "nics"), "vfs_per_gpu"), display(shape, "nvme"), display(shape, "description")});
  }
  return table.render();
}

std::string render_template(const json::value& shape) {
  const auto& gpus = member(shape, "gpus");
  const auto& nics = member(shape, "nics");
  const auto& boot = member(shape, "boot");
  return render_fields({{"name", display(shape, "name")},
                        {"description", display(shape, "description")},
                        {"vcpus", display(shape, "vcpus")},
                        {"memory", format_bytes(unsigned_of(member(shape, "memory_bytes")))},
                        {"hugepages", format_bytes(unsigned_of(member(shape, "hugepage_size_bytes")))},
                        {"gpus", display(gpus, "count") + " " + display(gpus, "model")},
                        {"vfs per gpu", display(nics, "vfs_per_gpu")},
                        {"nic placement", display(nics, "placement")},
                        {"nvme", display(shape, "nvme")},
                        {"peer to peer", display(shape, "peer_to_peer")},
                        {"machine", display(shape, "machine")},
                        {"firmware", display(shape, "firmware")},
                        {"boot image", display(boot, "image")}});
}

std::string render_status(const json::value& status) {
  const auto& reconcile = member(status, "last_reconcile");
  std::vector<std::pair<std::string, std::string>> fields = {
      {"libvirt connected", display(status, "libvirt_connected")},
      {"libvirt connection losses", display(status, "libvirt_connection_losses")},
      {"managed VMs", display(status, "managed_vms")},
      {"foreign domains", display(status, "foreign_domains")},
      {"operations in flight", display(status, "operations_in_flight")}};
  if (member(status, "ready").is_bool()) fields.insert(fields.begin(), {"ready", display(status, "ready")});
  for (const char* key : {"adopted", "foreign", "finished", "rolled_back", "released", "problems", "repaired",
                          "host_rebooted", "boot_starts"}) {
    fields.emplace_back(std::string("last reconcile: ") + key, display(reconcile, key));
  }
  return render_fields(fields);
}

namespace {

// "0000:18:00.0 (train-0): cleaning: reset", "... clean: free (#12)", "... quarantined: erase failed (#13)".
std::string cleaning_event_line(const json::value& data) {
  const auto vm = display(data, "vm");
  const std::string device = display(data, "device") + (vm == "-" ? "" : " (" + vm + ")");
  const auto state = display(data, "state");
  const auto step = display(data, "step");
  if (state == "cleaning") return device + ": cleaning" + (step == "-" ? "" : ": " + step);
  const std::string sequence = " (#" + display(data, "sequence") + ")";
  if (state == "free") return device + " clean: free" + sequence;
  return device + " quarantined: " + (step == "-" ? "cleaning" : step) + " failed" + sequence;
}

}  // namespace

std::string render_event(const api::ServerEvent& event) {
  boost::system::error_code ec;
  const auto data = json::parse(event.data, ec);
  std::string line = text::shown(event.id) + " " + text::shown(event.event) + " ";
  if (ec || !data.is_object()) return line + text::shown(event.data);
  if (event.event == "operation") return line + display(data, "id") + " " + progress_plain(data);
  if (event.event == "vm")
    return line + display(data, "vm") + ": " + display(data, "state") + " (" + display(data, "detail") + ")";
  if (event.event == "device") {
    const auto& held = member(data, "held");
    const bool taken = held.is_bool() && held.get_bool();
    return line + display(data, "vm") + (taken ? " holds " : " released ") + display(data, "devices");
  }
  if (event.event == "cleaning") return line + cleaning_event_line(data);
  if (event.event == "quarantine") {
    const auto& quarantined = member(data, "quarantined");
    if (!quarantined.is_bool() || !quarantined.get_bool()) return line + display(data, "device") + " cleared";
    return line + display(data, "device") + " quarantined: " + display(data, "step") +
           " failed: " + display(data, "reason");
  }
  return line + text::shown(event.data);
}

}  // namespace hostagent::ctl
