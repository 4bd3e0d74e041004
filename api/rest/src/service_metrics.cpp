// api/rest: the metrics of docs/api.md, in the Prometheus text format.
#include "service_metrics.hpp"

#include "capacity.hpp"

namespace hostagent::api::detail {
namespace {

constexpr std::size_t kRememberedOperations = 4096;

std::vector<double> operation_bounds() {
  return {0.1, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600};
}
// A phase of a create or start: placement takes milliseconds, a launch that zeroes a TiB of
// guest memory minutes (docs/operations.md, Timeline).
std::vector<double> phase_bounds() {
  return {0.001, 0.01, 0.1, 0.5, 1, 5, 10, 30, 60, 300, 600, 1800};
}
// A cleaning step: a function-level reset takes ~0.1-1 s, a firmware check or a VF reset less, an
// NVMe sanitize or a GPU memory scrub minutes, up to an hour.
std::vector<double> cleaning_step_bounds() {
  return {0.001, 0.01, 0.1, 0.5, 1, 5, 10, 30, 60, 300, 900, 1800, 3600};
}
std::vector<double> request_bounds() {
  return {0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10};
}

// A label from the client stays within a known set: every method string would be a new series.
std::string method_label(const std::string& method) {
  for (const char* known : {"GET", "POST", "DELETE", "HEAD", "PUT", "PATCH", "OPTIONS"}) {
    if (method == known) return method;
  }
  return "other";
}

void render_vms(MetricsText& out, const std::map<std::string, int>& by_state) {
  out.family("hostagent_vms", "VMs by libvirt state, managed and foreign.", "gauge");
  for (const auto& [state, count] : by_state) out.sample("hostagent_vms", {{"state", state}}, count);
}

void render_status(MetricsText& out, const service::ServiceStatus& status) {
  out.family("hostagent_operations_in_flight", "Operations queued or running.", "gauge");
  out.sample("hostagent_operations_in_flight", {}, status.operations_in_flight);
  out.family("hostagent_libvirt_connected", "1 while the connection to libvirtd is up.", "gauge");
  out.sample("hostagent_libvirt_connected", {}, status.libvirt_connected ? 1 : 0);
  out.family("hostagent_libvirt_connection_losses_total", "Connections to libvirtd lost since the daemon started.",
             "counter");
  out.sample("hostagent_libvirt_connection_losses_total", {}, status.libvirt_connection_losses);
}

// Each VM hostagent made, labelled `vm` (cardinality: the VMs the host holds). A figure libvirt did
// not report has no sample; with libvirt away, no family at all (hostagent_libvirt_connected says).
void render_vm_stats(MetricsText& out, const std::vector<service::VmStatsView>& vms) {
  const auto each = [&](const std::string& name, const std::string& help, const std::string& type, auto emit) {
    out.family(name, help, type);
    for (const auto& vm : vms) emit(name, vm);
  };
  each("hostagent_vm_state", "1 for each VM hostagent made, labelled with its state.", "gauge",
       [&](const std::string& name, const service::VmStatsView& vm) {
         out.sample(name, {{"vm", vm.vm}, {"state", vm.state}}, 1);
       });
  each("hostagent_vm_cpu_seconds_total", "CPU time of the VM's QEMU: every vCPU and its own threads.", "counter",
       [&](const std::string& name, const service::VmStatsView& vm) {
         if (vm.cpu_seconds) out.sample(name, {{"vm", vm.vm}}, *vm.cpu_seconds);
       });
  each("hostagent_vm_vcpus", "The VM's vCPUs online.", "gauge", [&](const std::string& name, const auto& vm) {
    if (vm.vcpus) out.sample(name, {{"vm", vm.vm}}, static_cast<double>(*vm.vcpus));
  });
  each("hostagent_vm_memory_bytes",
       "The VM's memory: the balloon's size (balloon), its maximum (balloon_max), QEMU's resident set (rss).", "gauge",
       [&](const std::string& name, const service::VmStatsView& vm) {
         for (const auto& [kind, value] :
              {std::pair{"balloon", vm.memory_bytes}, std::pair{"balloon_max", vm.memory_max_bytes},
               std::pair{"rss", vm.rss_bytes}}) {
           if (value) out.sample(name, {{"vm", vm.vm}, {"kind", kind}}, static_cast<double>(*value));
         }
       });
  each("hostagent_vm_block_bytes_total", "Bytes the VM read and wrote, per disk as the guest names it.", "counter",
       [&](const std::string& name, const service::VmStatsView& vm) {
         for (const auto& b : vm.blocks) {
           out.sample(name, {{"vm", vm.vm}, {"device", b.device}, {"op", "read"}}, static_cast<double>(b.read_bytes));
           out.sample(name, {{"vm", vm.vm}, {"device", b.device}, {"op", "write"}}, static_cast<double>(b.write_bytes));
         }
       });
  each(
      "hostagent_vm_block_requests_total", "Read and write requests of the VM, per disk.", "counter",
      [&](const std::string& name, const service::VmStatsView& vm) {
        for (const auto& b : vm.blocks) {
          out.sample(name, {{"vm", vm.vm}, {"device", b.device}, {"op", "read"}}, static_cast<double>(b.read_requests));
          out.sample(name, {{"vm", vm.vm}, {"device", b.device}, {"op", "write"}},
                     static_cast<double>(b.write_requests));
        }
      });
  each("hostagent_vm_network_bytes_total", "Bytes the VM received and sent, per host interface libvirt sees.",
       "counter", [&](const std::string& name, const service::VmStatsView& vm) {
         for (const auto& n : vm.interfaces) {
           out.sample(name, {{"vm", vm.vm}, {"interface", n.interface}, {"direction", "rx"}},
                      static_cast<double>(n.rx_bytes));
           out.sample(name, {{"vm", vm.vm}, {"interface", n.interface}, {"direction", "tx"}},
                      static_cast<double>(n.tx_bytes));
         }
       });
  each("hostagent_vm_network_packets_total", "Packets the VM received and sent, per host interface.", "counter",
       [&](const std::string& name, const service::VmStatsView& vm) {
         for (const auto& n : vm.interfaces) {
           out.sample(name, {{"vm", vm.vm}, {"interface", n.interface}, {"direction", "rx"}},
                      static_cast<double>(n.rx_packets));
           out.sample(name, {{"vm", vm.vm}, {"interface", n.interface}, {"direction", "tx"}},
                      static_cast<double>(n.tx_packets));
         }
       });
  each("hostagent_vm_devices", "PCI functions the VM holds, by role.", "gauge",
       [&](const std::string& name, const service::VmStatsView& vm) {
         for (const auto& [role, count] : vm.devices) out.sample(name, {{"vm", vm.vm}, {"role", role}}, count);
       });
}

// Which VM (or foreign domain) holds each device: an info metric to join the device families on
// (`* on(device) group_left(vm) hostagent_device_holder`). Not a label of those families: a device
// changing hands would start a new series of its counters.
void render_holders(MetricsText& out, const service::HostUsage& usage) {
  out.family("hostagent_device_holder", "1 for each PCI function a VM or a foreign domain holds, labelled with it.",
             "gauge");
  for (const auto& allocation : usage.held) {
    for (const auto& address : allocation.devices) {
      const auto* function = usage.host->find(address);
      out.sample("hostagent_device_holder",
                 {{"device", address.to_string()},
                  {"role", function != nullptr ? numa::to_string(function->role) : "other"},
                  {"vm", allocation.vm}},
                 1);
    }
  }
}

// One sample per mode, 1 for the host's: an alert on "cordoned for a day" needs no absent series.
void render_maintenance(MetricsText& out, const service::MaintenanceView& maintenance) {
  out.family("hostagent_host_maintenance",
             "1 for the host's maintenance mode (in_service, cordoned, draining, drained).", "gauge");
  for (const auto mode : {service::MaintenanceMode::in_service, service::MaintenanceMode::cordoned,
                          service::MaintenanceMode::draining, service::MaintenanceMode::drained}) {
    out.sample("hostagent_host_maintenance", {{"mode", std::string(service::to_string(mode))}},
               maintenance.mode == mode ? 1 : 0);
  }
}

void render_capacity(MetricsText& out, const numa::Capacity& capacity) {
  const auto per_node = [&](const std::string& name, const std::string& help, auto value) {
    out.family(name, help, "gauge");
    for (const auto& node : capacity.nodes) out.sample(name, {{"node", std::to_string(node.node)}}, value(node));
  };
  per_node("hostagent_free_cpus", "CPUs a VM could be pinned to, per NUMA node.",
           [](const numa::NodeCapacity& n) { return n.cpus.free; });
  per_node("hostagent_free_gpus", "GPUs that could be given whole, per NUMA node.",
           [](const numa::NodeCapacity& n) { return n.gpus.free; });
  per_node("hostagent_free_vfs", "NIC VFs that could be given, per NUMA node.",
           [](const numa::NodeCapacity& n) { return n.vfs.free; });
  out.family("hostagent_free_hugepages", "Hugepages no VM holds, per NUMA node and page size in bytes.", "gauge");
  for (const auto& node : capacity.nodes) {
    for (const auto& pool : node.hugepages) {
      out.sample("hostagent_free_hugepages",
                 {{"node", std::to_string(node.node)}, {"page_size", std::to_string(pool.page_size_bytes)}},
                 static_cast<double>(pool.free));
    }
  }
}

// By the step that failed: a run of failed resets says something a single failed bind does not.
void render_quarantine(MetricsText& out, const std::vector<service::QuarantineView>& quarantined) {
  std::map<std::string, int> by_step;
  for (const auto& entry : quarantined) ++by_step[entry.step];
  out.family("hostagent_devices_quarantined",
             "Devices kept out of placement until an operator clears them, by the step that failed.", "gauge");
  for (const auto& [step, count] : by_step) out.sample("hostagent_devices_quarantined", {{"step", step}}, count);
}

void render_cleaning(MetricsText& out, const std::vector<service::CleaningView>& cleaning) {
  out.family("hostagent_devices_cleaning",
             "Tenants' devices out of placement until their cleaning passes, held by a VM or not.", "gauge");
  out.sample("hostagent_devices_cleaning", {}, static_cast<double>(cleaning.size()));
}

void render_health(MetricsText& out, const std::vector<numa::DeviceHealth>& health) {
  out.family("hostagent_device_present", "1 while the PCI device is in sysfs.", "gauge");
  for (const auto& d : health) {
    out.sample("hostagent_device_present", {{"device", d.address.to_string()}, {"role", numa::to_string(d.role)}},
               d.present ? 1 : 0);
  }
  out.family("hostagent_device_link_degraded", "1 when the PCIe link trained below its capability.", "gauge");
  for (const auto& d : health) {
    out.sample("hostagent_device_link_degraded", {{"device", d.address.to_string()}, {"role", numa::to_string(d.role)}},
               d.link_degraded ? 1 : 0);
  }
  out.family("hostagent_device_aer_errors_total", "PCIe AER errors the kernel counted, by severity.", "counter");
  for (const auto& d : health) {
    for (const numa::AerSeverity severity : numa::kAerSeverities) {
      if (numa::aer_counters(d, severity).empty()) continue;
      out.sample("hostagent_device_aer_errors_total",
                 {{"device", d.address.to_string()},
                  {"role", numa::to_string(d.role)},
                  {"severity", numa::to_string(severity)}},
                 static_cast<double>(numa::aer_total(d, severity)));
    }
  }
}

// The connection budget (docs/api.md, "Connections"): what is held now, and what was shed.
void render_connections(MetricsText& out, const ConnectionStats& stats) {
  out.family("hostagent_http_connections", "API connections holding a slot, by kind.", "gauge");
  out.sample("hostagent_http_connections", {{"slot", "general"}}, stats.open - stats.reserve);
  out.sample("hostagent_http_connections", {{"slot", "reserve"}}, stats.reserve);
  out.family("hostagent_http_event_streams", "Event streams open.", "gauge");
  out.sample("hostagent_http_event_streams", {}, stats.event_streams);
  out.family("hostagent_http_connections_shed_total",
             "Connections shed: evicted (stalled or idle, for a newer one), refused by peer or full.", "counter");
  out.sample("hostagent_http_connections_shed_total", {{"reason", "evicted"}}, static_cast<double>(stats.evicted));
  out.sample("hostagent_http_connections_shed_total", {{"reason", "peer_limit"}},
             static_cast<double>(stats.refused_peer));
  out.sample("hostagent_http_connections_shed_total", {{"reason", "full"}}, static_cast<double>(stats.refused_full));
}

}  // namespace

ServiceMetrics::ServiceMetrics() : release_cleanings_(cleaning_step_bounds()), request_durations_(request_bounds()) {}

void ServiceMetrics::on_event(const service::ServiceEvent& event) {
  if (event.release) {
    std::lock_guard lock(mutex_);
    release_cleanings_.observe(event.release->seconds);
    ++observed_version_;
  }
  if (event.kind == service::ServiceEvent::Kind::cleaning && event.cleaned) {
    on_cleaned(*event.cleaned);
    return;
  }
  if (event.kind != service::ServiceEvent::Kind::operation || !event.operation) return;
  const auto& operation = *event.operation;
  if (operation.state != "succeeded" && operation.state != "failed") return;
  std::lock_guard lock(mutex_);
  ++observed_version_;
  const auto [seen, first] = ended_.try_emplace(operation.id, 0);
  if (first) {
    ended_order_.push_back(operation.id);
    auto it = operation_durations_.find({operation.kind, operation.state});
    if (it == operation_durations_.end()) {
      it =
          operation_durations_.emplace(std::pair(operation.kind, operation.state), Histogram(operation_bounds())).first;
    }
    it->second.observe(operation.duration_seconds);
  }
  // A failed one's phases end early: they would only skew. Phases added after the end (the
  // guest's kernel and up) are observed as they come, each once.
  if (operation.state == "succeeded") {
    for (std::size_t i = seen->second; i < operation.timeline.size(); ++i) {
      const auto& phase = operation.timeline[i];
      const std::array<std::string, 3> key{operation.kind, phase.name, operation.template_name};
      auto observed = start_phases_.find(key);
      if (observed == start_phases_.end()) observed = start_phases_.emplace(key, Histogram(phase_bounds())).first;
      observed->second.observe(phase.seconds);
    }
    seen->second = std::max(seen->second, operation.timeline.size());
  }
  if (ended_order_.size() > kRememberedOperations) {
    ended_.erase(ended_order_.front());
    ended_order_.pop_front();
  }
}

// Once per record: the evidence log's sequence names a cleaning, as an id names an operation. A
// skipped step did not run: its zero would only drag the step's distribution down.
void ServiceMetrics::on_cleaned(const service::CleaningRecordView& record) {
  std::lock_guard lock(mutex_);
  if (!cleaned_.insert(record.sequence).second) return;
  ++observed_version_;
  cleaned_order_.push_back(record.sequence);
  if (cleaned_order_.size() > kRememberedOperations) {
    cleaned_.erase(cleaned_order_.front());
    cleaned_order_.pop_front();
  }
  ++cleanings_[record.outcome];
  for (const auto& step : record.steps) {
    if (step.result == "skipped") continue;
    auto it = cleaning_steps_.find({step.name, record.role});
    if (it == cleaning_steps_.end()) {
      it = cleaning_steps_.emplace(std::pair(step.name, record.role), Histogram(cleaning_step_bounds())).first;
    }
    it->second.observe(step.seconds);
  }
}

void ServiceMetrics::watch_connections(std::function<ConnectionStats()> read) {
  std::lock_guard lock(mutex_);
  connections_ = std::move(read);
}

void ServiceMetrics::on_request(const std::string& method, unsigned status, std::chrono::nanoseconds latency) {
  std::lock_guard lock(mutex_);
  ++requests_[{method_label(method), status}];
  request_durations_.observe(std::chrono::duration<double>(latency).count());
}

// One scrape computed at a time; a scrape that arrives while one runs waits for the next, which it
// shares with every other that arrived meanwhile. So each answer was computed after its request
// arrived (never stale), and a flood of scrapes costs one computation at a time, not one per
// handler thread: the rest of the API keeps the other cores.
std::string ServiceMetrics::render(service::VmService& service) {
  std::unique_lock lock(scrape_mutex_);
  const uint64_t wanted = scrapes_started_ + 1;  // the first to start after this one arrived
  while (scrapes_finished_ < wanted) {
    if (scrape_running_) {
      scrape_done_.wait(lock);
      continue;
    }
    scrape_running_ = true;
    const uint64_t number = ++scrapes_started_;
    lock.unlock();
    std::string text = compute(service);
    lock.lock();
    scrape_text_ = std::move(text);
    scrapes_finished_ = number;
    scrape_running_ = false;
    scrape_done_.notify_all();
  }
  return scrape_text_;
}

// From what the service keeps: counts, the ledger's holdings and the poller's last health reading;
// nothing here reads libvirt or sysfs. The sections that cost most are rendered again only when
// their source changed.
std::string ServiceMetrics::compute(service::VmService& service) {
  MetricsText out;
  out.reserve(last_size_ + last_size_ / 8);
  const auto status = service.status();
  render_vms(out, status.vms_by_state);
  render_status(out, status);
  render_maintenance(out, service.maintenance());
  if (const auto vms = service.vm_stats(); vms.ok()) render_vm_stats(out, *vms);
  out.append(capacity_text(service.usage()));
  render_quarantine(out, service.quarantined());
  render_cleaning(out, service.cleaning());
  out.append(health_text(service.device_health()));
  render_counted(out);
  last_size_ = out.text().size();
  return std::move(out).take();
}

// capacity() walks every function of the host, and labels are formatted per node: on vela2 that is
// most of a scrape (perf under bench_api), yet it changes only when a VM takes or gives something.
const std::string& ServiceMetrics::capacity_text(const service::HostUsage& usage) {
  if (usage.host == nullptr) {
    capacity_.reset();
    return empty_;
  }
  // The version moves with what is held and what placement withholds (service::HostUsage); the
  // kernel's free hugepages, read apart, are compared.
  if (!capacity_ || capacity_->host != usage.host || capacity_->version != usage.version ||
      capacity_->unclaimed != usage.policy.unclaimed_hugepages) {
    MetricsText out;
    render_capacity(out, numa::capacity(*usage.host, usage.held, usage.policy));
    render_holders(out, usage);
    capacity_ = CapacitySection{usage.host, usage.version, usage.policy.unclaimed_hugepages, out.text()};
  }
  return capacity_->text;
}

// A reading is a new object each time the poller reads (service::DeviceHealthReading): the same
// address, the same devices.
const std::string& ServiceMetrics::health_text(const Result<service::DeviceHealthReading>& health) {
  const service::DeviceHealthReading reading = health.ok() ? *health : nullptr;
  if (reading == nullptr || reading != health_reading_) {
    MetricsText out;
    render_health(out, reading ? *reading : std::vector<numa::DeviceHealth>{});
    health_reading_ = reading;
    health_text_ = out.text();
  }
  return health_text_;
}

void ServiceMetrics::render_observed_locked(MetricsText& out) const {
  out.family("hostagent_operation_duration_seconds", "Ended operations by kind and result, start to end.", "histogram");
  for (const auto& [key, histogram] : operation_durations_) {
    out.histogram("hostagent_operation_duration_seconds", {{"kind", key.first}, {"result", key.second}}, histogram);
  }
  out.family("hostagent_vm_start_phase_seconds",
             "Phases of creates and starts that succeeded, by kind, phase and template (docs/operations.md).",
             "histogram");
  for (const auto& [key, histogram] : start_phases_) {
    out.histogram("hostagent_vm_start_phase_seconds", {{"kind", key[0]}, {"phase", key[1]}, {"template", key[2]}},
                  histogram);
  }
  out.family("hostagent_device_cleaning_step_seconds", "Steps of ended device cleanings that ran, by step and role.",
             "histogram");
  for (const auto& [key, histogram] : cleaning_steps_) {
    out.histogram("hostagent_device_cleaning_step_seconds", {{"step", key.first}, {"role", key.second}}, histogram);
  }
  out.family("hostagent_device_release_cleaning_seconds",
             "VMs' releases, from the first device seen waiting to the last cleaned or quarantined.", "histogram");
  out.histogram("hostagent_device_release_cleaning_seconds", {}, release_cleanings_);
  out.family("hostagent_device_cleanings_total", "Device cleanings ended, by outcome (clean or quarantined).",
             "counter");
  for (const auto& [outcome, count] : cleanings_) {
    out.sample("hostagent_device_cleanings_total", {{"outcome", outcome}}, static_cast<double>(count));
  }
}

// What ended operations and cleanings observed changes far less often than a control plane
// scrapes, and its histograms are most of a scrape's formatting (perf under bench_api): their
// text is kept by a version each observation moves. The HTTP families change with every request,
// this scrape's too, and are written each time.
void ServiceMetrics::render_counted(MetricsText& out) {
  std::lock_guard lock(mutex_);
  if (observed_text_version_ != observed_version_) {
    MetricsText observed;
    render_observed_locked(observed);
    observed_text_ = std::move(observed).take();
    observed_text_version_ = observed_version_;
  }
  out.append(observed_text_);
  out.family("hostagent_http_requests_total", "HTTP requests answered, by method and status code.", "counter");
  for (const auto& [key, count] : requests_) {
    out.sample("hostagent_http_requests_total", {{"method", key.first}, {"code", std::to_string(key.second)}},
               static_cast<double>(count));
  }
  out.family("hostagent_http_request_duration_seconds", "HTTP requests, from read to the response ready.", "histogram");
  out.histogram("hostagent_http_request_duration_seconds", {}, request_durations_);
  if (connections_) render_connections(out, connections_());
}

}  // namespace hostagent::api::detail
