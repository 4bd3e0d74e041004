// api/vm_json: VMs, status and reconcile reports as JSON.
#include "hostagent/api/vm_json.hpp"

#include "hostagent/common/sysfs_root.hpp"

namespace hostagent::api {
namespace {

boost::json::array strings(const std::vector<std::string>& items) {
  boost::json::array array;
  for (const auto& item : items) array.emplace_back(item);
  return array;
}

boost::json::object to_json(const numa::Allocation& allocation) {
  boost::json::array devices;
  for (const auto& device : allocation.devices) devices.emplace_back(device.to_string());
  boost::json::object hugepages;
  for (const auto& [node, pages] : allocation.hugepages) hugepages[std::to_string(node)] = pages;
  boost::json::array p2p_ports;
  for (const auto& port : allocation.p2p_ports) p2p_ports.emplace_back(port.to_string());
  return {{"cpus", format_cpu_list(allocation.cpus)},
          {"devices", std::move(devices)},
          {"hugepage_size_bytes", allocation.hugepage_size_bytes},
          {"hugepages_by_node", std::move(hugepages)},
          {"p2p_ports", std::move(p2p_ports)}};
}

boost::json::array to_json(const std::vector<service::VfRdmaView>& rdma) {
  boost::json::array array;
  for (const auto& vf : rdma) {
    boost::json::value gid_index = nullptr;
    if (vf.roce_v2_gid_index) gid_index = *vf.roce_v2_gid_index;
    array.emplace_back(boost::json::object{{"vf", vf.vf.to_string()},
                                           {"host_device", vf.host_device},
                                           {"port", vf.port},
                                           {"state", vf.state},
                                           {"link_layer", vf.link_layer},
                                           {"roce_v2_gid_index", gid_index},
                                           {"node_guid", vf.node_guid},
                                           {"port_guid", vf.port_guid}});
  }
  return array;
}

boost::json::object to_json(const service::ManagedVmView& record) {
  return {{"template", record.template_name},
          {"request_id", record.request_id},
          {"created_at", record.created_at},
          {"boot_image", record.boot_image},
          {"disk", record.disk_volume.empty() ? "" : record.disk_pool + "/" + record.disk_volume},
          {"macs", strings(record.macs)},
          {"cloud_init_seed", record.cloud_init_seed},
          {"nvlink", record.nvlink.empty() ? boost::json::value(nullptr) : boost::json::value(record.nvlink)},
          {"holds", to_json(record.allocation)},
          {"rdma", to_json(record.rdma)}};
}

}  // namespace

boost::json::value to_json(const service::VmView& vm) {
  boost::json::object object{
      {"name", vm.name},           {"uuid", vm.uuid}, {"managed", vm.managed},      {"state", vm.state},
      {"operation", vm.operation}, {"step", vm.step}, {"last_event", vm.last_event}};
  if (vm.record) object["record"] = to_json(*vm.record);
  return object;
}

boost::json::value to_json(const service::ReconcileReport& report) {
  return boost::json::object{{"adopted", strings(report.adopted)},        {"foreign", strings(report.foreign)},
                             {"finished", strings(report.finished)},      {"rolled_back", strings(report.rolled_back)},
                             {"released", strings(report.released)},      {"problems", strings(report.problems)},
                             {"repaired", strings(report.repaired)},      {"host_rebooted", report.host_rebooted},
                             {"boot_starts", strings(report.boot_starts)}};
}

boost::json::value to_json(const service::ServiceStatus& status) {
  return boost::json::object{{"ready", status.ready},
                             {"libvirt_connected", status.libvirt_connected},
                             {"libvirt_connection_losses", status.libvirt_connection_losses},
                             {"managed_vms", status.managed_vms},
                             {"foreign_domains", status.foreign_domains},
                             {"operations_in_flight", status.operations_in_flight},
                             {"last_reconcile", to_json(status.last_reconcile)}};
}

boost::json::value to_json(const service::OperationView& operation) {
  boost::json::array timeline;
  for (const auto& phase : operation.timeline) {
    timeline.push_back(boost::json::object{
        {"phase", phase.name}, {"ended_at", phase.ended_at}, {"seconds", phase.seconds}, {"detail", phase.detail}});
  }
  boost::json::value error = nullptr;
  if (operation.error) {
    error = boost::json::object{{"code", to_string(operation.error->code)}, {"message", operation.error->message}};
  }
  return boost::json::object{{"id", operation.id},
                             {"kind", operation.kind},
                             {"vm", operation.vm},
                             {"request_id", operation.request_id},
                             {"state", operation.state},
                             {"step", operation.step},
                             {"step_number", operation.step_number},
                             {"step_count", operation.step_count},
                             {"error", std::move(error)},
                             {"submitted_at", operation.submitted_at},
                             {"started_at", operation.started_at},
                             {"finished_at", operation.finished_at},
                             {"duration_seconds", operation.duration_seconds},
                             {"timeline", std::move(timeline)}};
}

namespace {

// {"device", "quarantined", "step", "reason", "vm"}: a device taken out of placement, or put back
// (quarantined false, the rest null).
boost::json::value quarantine_event_json(const service::ServiceEvent& event) {
  const auto text = [&](const std::string service::QuarantineView::*field) {
    if (!event.quarantine || ((*event.quarantine).*field).empty()) return boost::json::value(nullptr);
    return boost::json::value((*event.quarantine).*field);
  };
  return boost::json::object{{"device", event.devices.empty() ? boost::json::value(nullptr)
                                                              : boost::json::value(event.devices[0].to_string())},
                             {"quarantined", event.quarantine.has_value()},
                             {"step", text(&service::QuarantineView::step)},
                             {"reason", text(&service::QuarantineView::reason)},
                             {"vm", text(&service::QuarantineView::vm)}};
}

// The step a cleaning failed at, "" when none did.
std::string failed_step(const service::CleaningRecordView& record) {
  for (const auto& step : record.steps) {
    if (step.result == "failed") return step.name;
  }
  return "";
}

// {"device", "vm", "state", "step", "outcome", "sequence"}: a device marked for cleaning or its
// cleaning under way (state cleaning, step the one running), or its cleaning ended (state free
// when it came out clean, else quarantined; step the one that failed; the record's outcome and
// its line in the evidence log).
boost::json::value cleaning_event_json(const service::ServiceEvent& event) {
  std::optional<PciAddress> device;
  if (!event.devices.empty()) device = event.devices[0];
  std::string vm = event.vm;
  std::string state = "cleaning";
  std::string step;
  boost::json::value outcome = nullptr;
  boost::json::value sequence = nullptr;
  if (event.cleaned) {
    const auto& record = *event.cleaned;
    device = device.value_or(record.address);
    vm = vm.empty() ? record.vm : vm;
    state = record.outcome == "clean" ? "free" : "quarantined";
    step = failed_step(record);
    outcome = boost::json::value(record.outcome);
    sequence = record.sequence;
  } else if (event.cleaning) {
    device = device.value_or(event.cleaning->address);
    vm = vm.empty() ? event.cleaning->vm : vm;
    step = event.cleaning->step;
  }
  return boost::json::object{{"device", device ? boost::json::value(device->to_string()) : boost::json::value(nullptr)},
                             {"vm", text_or_null(vm)},
                             {"state", state},
                             {"step", text_or_null(step)},
                             {"outcome", std::move(outcome)},
                             {"sequence", std::move(sequence)}};
}

}  // namespace

boost::json::value to_json(const service::MaintenanceView& maintenance) {
  boost::json::array vms;
  for (const auto& vm : maintenance.vms) {
    vms.push_back(boost::json::object{{"vm", vm.vm}, {"state", vm.state}, {"error", text_or_null(vm.error)}});
  }
  return boost::json::object{
      {"mode", service::to_string(maintenance.mode)},     {"reason", text_or_null(maintenance.reason)},
      {"principal", text_or_null(maintenance.principal)}, {"since", text_or_null(maintenance.since)},
      {"deadline", text_or_null(maintenance.deadline)},   {"vms", std::move(vms)}};
}

boost::json::value to_json(const service::VmStatsView& stats) {
  const auto or_null = [](const auto& value) {
    return value ? boost::json::value(*value) : boost::json::value(nullptr);
  };
  boost::json::array blocks;
  for (const auto& b : stats.blocks) {
    blocks.push_back(boost::json::object{{"device", b.device},
                                         {"read_bytes", b.read_bytes},
                                         {"write_bytes", b.write_bytes},
                                         {"read_requests", b.read_requests},
                                         {"write_requests", b.write_requests}});
  }
  boost::json::array interfaces;
  for (const auto& n : stats.interfaces) {
    interfaces.push_back(boost::json::object{{"interface", n.interface},
                                             {"rx_bytes", n.rx_bytes},
                                             {"tx_bytes", n.tx_bytes},
                                             {"rx_packets", n.rx_packets},
                                             {"tx_packets", n.tx_packets}});
  }
  boost::json::object devices;
  for (const auto& [role, count] : stats.devices) devices[role] = count;
  return boost::json::object{{"vm", stats.vm},
                             {"state", stats.state},
                             {"read_at", stats.read_at},
                             {"cpu_seconds", or_null(stats.cpu_seconds)},
                             {"vcpus", or_null(stats.vcpus)},
                             {"memory_bytes", or_null(stats.memory_bytes)},
                             {"memory_max_bytes", or_null(stats.memory_max_bytes)},
                             {"rss_bytes", or_null(stats.rss_bytes)},
                             {"blocks", std::move(blocks)},
                             {"interfaces", std::move(interfaces)},
                             {"devices", std::move(devices)}};
}

boost::json::value to_json(const service::ServiceEvent& event) {
  switch (event.kind) {
    case service::ServiceEvent::Kind::operation:
      if (event.operation) return to_json(*event.operation);
      return boost::json::object{{"vm", event.vm}};
    case service::ServiceEvent::Kind::device: {
      boost::json::array devices;
      for (const auto& device : event.devices) devices.emplace_back(device.to_string());
      return boost::json::object{{"vm", event.vm}, {"held", event.held}, {"devices", std::move(devices)}};
    }
    case service::ServiceEvent::Kind::quarantine:
      return quarantine_event_json(event);
    case service::ServiceEvent::Kind::cleaning:
      return cleaning_event_json(event);
    case service::ServiceEvent::Kind::maintenance:
      if (event.maintenance) return to_json(*event.maintenance);
      return to_json(service::MaintenanceView{});
    case service::ServiceEvent::Kind::vm:
      break;
  }
  return boost::json::object{{"vm", event.vm}, {"state", event.vm_state}, {"detail", event.detail}};
}

const char* event_name(service::ServiceEvent::Kind kind) {
  switch (kind) {
    case service::ServiceEvent::Kind::operation:
      return "operation";
    case service::ServiceEvent::Kind::device:
      return "device";
    case service::ServiceEvent::Kind::quarantine:
      return "quarantine";
    case service::ServiceEvent::Kind::cleaning:
      return "cleaning";
    case service::ServiceEvent::Kind::maintenance:
      return "maintenance";
    case service::ServiceEvent::Kind::vm:
      break;
  }
  return "vm";
}

boost::json::value text_or_null(const std::string& text) {
  if (text.empty()) return nullptr;
  return boost::json::value(text);
}

}  // namespace hostagent::api
