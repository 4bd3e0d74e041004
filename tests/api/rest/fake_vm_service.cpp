// Test double: a VmService in memory.
#include "fake_vm_service.hpp"

#include <doctest/doctest.h>

#include <algorithm>

#include "hostagent/common/text_file.hpp"

namespace hostagent::testing {
namespace {

// Fixed, so answers do not depend on when the test ran.
constexpr const char* kSubmittedAt = "2026-12-02T10:00:00Z";

Error unknown_operation(const std::string& id) {
  return Error{ErrorCode::not_found, "no operation " + id};
}

}  // namespace

FakeVmService::FakeVmService(numa::HostModel host, std::map<std::string, vmtemplates::VmTemplate> templates)
    : host_(std::move(host)), templates_(std::move(templates)) {
  status_.ready = true;
  status_.libvirt_connected = true;
}

void FakeVmService::refuse_next(Error error) {
  const std::lock_guard lock(mutex_);
  refusal_ = std::move(error);
}

void FakeVmService::end(const std::string& id, std::optional<Error> error) {
  service::ServiceEvent event;
  {
    const std::lock_guard lock(mutex_);
    const auto it = operations_.find(id);
    REQUIRE_MESSAGE(it != operations_.end(), ("the fake has no operation " + id));
    auto& operation = it->second;
    operation.state = error ? "failed" : "succeeded";
    operation.error = std::move(error);
    operation.started_at = kSubmittedAt;
    operation.finished_at = kSubmittedAt;
    event.kind = service::ServiceEvent::Kind::operation;
    event.vm = operation.vm;
    event.operation = operation;
  }
  ended_.notify_all();
  publish(event);
}

void FakeVmService::put_vm(service::VmView vm, std::string domain_xml) {
  const std::lock_guard lock(mutex_);
  const std::string name = vm.name;
  vms_[name] = Vm{std::move(vm), std::move(domain_xml), ""};
  ++vms_version_;
}

void FakeVmService::set_status(service::ServiceStatus status) {
  const std::lock_guard lock(mutex_);
  status_ = std::move(status);
}

void FakeVmService::set_held(std::vector<numa::Allocation> held) {
  const std::lock_guard lock(mutex_);
  held_ = std::move(held);
  ++usage_version_;
}

void FakeVmService::set_policy(numa::HostPolicy policy) {
  const std::lock_guard lock(mutex_);
  policy_ = std::move(policy);
  ++usage_version_;
}

void FakeVmService::set_device_health(std::vector<numa::DeviceHealth> health) {
  const std::lock_guard lock(mutex_);
  health_ = std::make_shared<const std::vector<numa::DeviceHealth>>(std::move(health));
}

// Under sinks_mutex_, so that unsubscribe waits for a running sink, as the interface promises.
void FakeVmService::publish(const service::ServiceEvent& event) {
  const std::lock_guard lock(sinks_mutex_);
  for (const auto& [id, sink] : sinks_) sink(event);
}

std::vector<service::CreateVmRequest> FakeVmService::creates() const {
  const std::lock_guard lock(mutex_);
  return creates_;
}

std::vector<std::string> FakeVmService::commands() const {
  const std::lock_guard lock(mutex_);
  return commands_;
}

std::optional<Error> FakeVmService::take_refusal() {
  std::optional<Error> refusal = std::move(refusal_);
  refusal_.reset();
  return refusal;
}

service::OperationView& FakeVmService::queue(const std::string& kind, const std::string& vm) {
  service::OperationView operation;
  operation.id = "op-" + std::to_string(operations_.size() + 1);
  operation.kind = kind;
  operation.vm = vm;
  operation.state = "queued";
  operation.submitted_at = kSubmittedAt;
  operation_order_.push_back(operation.id);
  return operations_[operation.id] = operation;
}

Result<service::OperationView> FakeVmService::begin_create(const service::CreateVmRequest& request) {
  const std::lock_guard lock(mutex_);
  creates_.push_back(request);
  if (auto refusal = take_refusal()) return *refusal;
  auto& operation = queue("create", request.name);
  operation.request_id = request.request_id;
  operation.template_name = request.template_name;
  return operation;
}

// The service's own checks, before any queue: a scripted refusal, then a VM that does not exist.
Result<service::OperationView> FakeVmService::known_vm_command(const std::string& kind, const std::string& name,
                                                               const std::string& worded) {
  const std::lock_guard lock(mutex_);
  commands_.push_back(worded);
  if (auto refusal = take_refusal()) return *refusal;
  if (vms_.count(name) == 0) return Error{ErrorCode::not_found, "no VM named " + name};
  return queue(kind, name);
}

Result<service::OperationView> FakeVmService::begin_start(const VmName& name) {
  return known_vm_command("start", name, "start " + name.str());
}

Result<service::OperationView> FakeVmService::begin_stop(const VmName& name, bool force) {
  return known_vm_command("stop", name, "stop " + name.str() + (force ? " force" : ""));
}

Result<service::OperationView> FakeVmService::begin_reboot(const VmName& name) {
  return known_vm_command("reboot", name, "reboot " + name.str());
}

Result<service::OperationView> FakeVmService::begin_delete(const VmName& name) {
  return known_vm_command("delete", name, "delete " + name.str());
}

Result<service::OperationView> FakeVmService::wait(const std::string& id) {
  std::unique_lock lock(mutex_);
  if (operations_.count(id) == 0) return unknown_operation(id);
  ended_.wait(lock, [&] {
    const auto& state = operations_.at(id).state;
    return state == "succeeded" || state == "failed";
  });
  return operations_.at(id);
}

Result<service::OperationView> FakeVmService::operation(const std::string& id) {
  const std::lock_guard lock(mutex_);
  const auto it = operations_.find(id);
  if (it == operations_.end()) return unknown_operation(id);
  return it->second;
}

std::vector<service::OperationView> FakeVmService::operations() {
  const std::lock_guard lock(mutex_);
  std::vector<service::OperationView> out;
  for (auto it = operation_order_.rbegin(); it != operation_order_.rend(); ++it) out.push_back(operations_.at(*it));
  return out;
}

Result<service::VmView> FakeVmService::get_vm(const VmName& name) {
  const std::lock_guard lock(mutex_);
  const auto it = vms_.find(name);
  if (it == vms_.end()) return Error{ErrorCode::not_found, "no VM named " + name.str()};
  return it->second.view;
}

Result<std::vector<service::OperationView>> FakeVmService::vm_starts(const VmName& name) {
  const std::lock_guard lock(mutex_);
  if (vms_.find(name) == vms_.end()) return Error{ErrorCode::not_found, "no VM named " + name.str()};
  std::vector<service::OperationView> out;
  for (auto it = operation_order_.rbegin(); it != operation_order_.rend(); ++it) {
    const auto& operation = operations_.at(*it);
    const bool start = operation.kind == "create" || operation.kind == "start";
    if (start && operation.vm == name.str() && !operation.finished_at.empty()) out.push_back(operation);
  }
  return out;
}

void FakeVmService::on_status(std::function<void()> hook) {
  const std::lock_guard lock(mutex_);
  status_hook_ = std::move(hook);
}

service::VmList FakeVmService::list_vms() {
  const std::lock_guard lock(mutex_);
  auto out = std::make_shared<std::vector<service::VmView>>();
  for (const auto& [name, vm] : vms_) out->push_back(vm.view);
  return {vms_version_, std::move(out)};
}

// status_ as set, with the VMs counted by state as the service counts its ledger.
service::ServiceStatus FakeVmService::status() {
  std::function<void()> hook;
  {
    const std::lock_guard lock(mutex_);
    hook = status_hook_;
  }
  if (hook) hook();
  const std::lock_guard lock(mutex_);
  auto status = status_;
  status.vms_by_state.clear();
  for (const auto& [name, vm] : vms_) ++status.vms_by_state[vm.view.state];
  return status;
}

uint64_t FakeVmService::subscribe(service::ServiceEventSink sink) {
  const std::lock_guard lock(sinks_mutex_);
  const uint64_t id = next_sink_++;
  sinks_[id] = std::move(sink);
  return id;
}

void FakeVmService::unsubscribe(uint64_t id) {
  const std::lock_guard lock(sinks_mutex_);
  sinks_.erase(id);
}

void FakeVmService::quarantine(service::QuarantineView entry) {
  const std::lock_guard lock(mutex_);
  quarantined_.push_back(std::move(entry));
}

std::vector<service::QuarantineView> FakeVmService::quarantined() {
  const std::lock_guard lock(mutex_);
  return quarantined_;
}

Result<service::QuarantineView> FakeVmService::clear_quarantine(const PciAddress& address,
                                                                const std::string& principal) {
  const std::lock_guard lock(mutex_);
  commands_.push_back("clear-quarantine " + address.to_string() + " by " + principal);
  const auto it = std::find_if(quarantined_.begin(), quarantined_.end(),
                               [&](const service::QuarantineView& q) { return q.address == address; });
  if (it == quarantined_.end())
    return Error{ErrorCode::not_found, "device " + address.to_string() + " is not quarantined"};
  auto cleared = *it;
  quarantined_.erase(it);
  return cleared;
}

void FakeVmService::mark_cleaning(service::CleaningView entry) {
  const std::lock_guard lock(mutex_);
  cleaning_.push_back(std::move(entry));
}

void FakeVmService::set_history(service::DeviceHistoryView history) {
  const std::lock_guard lock(mutex_);
  const PciAddress address = history.address;
  histories_.insert_or_assign(address, std::move(history));
}

std::vector<service::CleaningView> FakeVmService::cleaning() {
  const std::lock_guard lock(mutex_);
  return cleaning_;
}

Result<service::CleaningView> FakeVmService::clean_device(const PciAddress& address, const std::string& principal) {
  const std::lock_guard lock(mutex_);
  commands_.push_back("clean-device " + address.to_string() + " by " + principal);
  if (auto refusal = take_refusal()) return *refusal;
  if (host_.find(address) == nullptr) {
    return Error{ErrorCode::not_found, "device: no device at " + address.to_string() + " to clean"};
  }
  for (const auto& allocation : held_) {
    if (std::find(allocation.devices.begin(), allocation.devices.end(), address) != allocation.devices.end()) {
      return Error{ErrorCode::conflict, "device " + address.to_string() + " is held by " + allocation.vm +
                                            "; it is cleaned when the VM lets it go"};
    }
  }
  if (std::any_of(cleaning_.begin(), cleaning_.end(), [&](const auto& c) { return c.address == address; })) {
    return Error{ErrorCode::conflict, "device " + address.to_string() + " is already being cleaned"};
  }
  cleaning_.push_back(service::CleaningView{address, "", kSubmittedAt, "", ""});
  return cleaning_.back();
}

Result<service::DeviceHistoryView> FakeVmService::device_history(const PciAddress& address) {
  const std::lock_guard lock(mutex_);
  if (const auto it = histories_.find(address); it != histories_.end()) return it->second;
  if (host_.find(address) == nullptr) {
    return Error{ErrorCode::not_found, "device: no device at " + address.to_string() + " and no cleaning of one"};
  }
  return service::DeviceHistoryView{address, {}, ""};
}

std::map<PciAddress, service::CleaningRecordView> FakeVmService::last_cleanings() {
  const std::lock_guard lock(mutex_);
  std::map<PciAddress, service::CleaningRecordView> last;
  for (const auto& [address, history] : histories_) {
    if (!history.cleanings.empty()) last.emplace(address, history.cleanings.back());
  }
  return last;
}

service::HostUsage FakeVmService::usage() {
  const std::lock_guard lock(mutex_);
  return service::HostUsage{&host_, held_, usage_version_, policy_};
}

const std::map<std::string, vmtemplates::VmTemplate>& FakeVmService::templates() const {
  return templates_;
}

Result<std::string> FakeVmService::domain_xml(const VmName& name) {
  const std::lock_guard lock(mutex_);
  const auto it = vms_.find(name);
  if (it == vms_.end() || !it->second.view.managed) return Error{ErrorCode::not_found, "no VM named " + name.str()};
  return it->second.domain_xml;
}

Result<std::string> FakeVmService::nccl_topology(const VmName& name) {
  const std::lock_guard lock(mutex_);
  const auto it = vms_.find(name);
  if (it == vms_.end() || !it->second.view.record) return Error{ErrorCode::not_found, "no VM named " + name.str()};
  return it->second.view.record->nccl_topology;
}

Result<service::ConsoleLogView> FakeVmService::console_log(const VmName& name, std::size_t lines) {
  const std::lock_guard lock(mutex_);
  const auto it = vms_.find(name);
  if (it == vms_.end() || !it->second.view.managed) return Error{ErrorCode::not_found, "no VM named " + name.str()};
  const std::string& log = it->second.console_log;
  const auto tail = last_lines(log, lines);  // the service's rule (common/text_file)
  return service::ConsoleLogView{std::string(tail), log.size(), tail.size() == log.size()};
}

void FakeVmService::set_console_log(const std::string& vm, std::string text) {
  const std::lock_guard lock(mutex_);
  vms_.at(vm).console_log = std::move(text);
}

std::string EchoConsole::take() {
  const std::lock_guard lock(mutex_);
  return std::exchange(output_, "");
}

std::size_t EchoConsole::put(std::string_view bytes) {
  std::unique_lock lock(mutex_);
  if (ended_) return 0;
  typed_.append(bytes);
  output_.append(bytes);
  if (output_.size() > service::kConsoleOutputBytes) output_.erase(0, output_.size() - service::kConsoleOutputBytes);
  wake_locked(lock);
  return bytes.size();
}

void EchoConsole::wait(std::function<void()> wake) {
  std::unique_lock lock(mutex_);
  wake_ = std::move(wake);
  if (!output_.empty() || ended_) wake_locked(lock);
}

std::optional<std::string> EchoConsole::ended() {
  const std::lock_guard lock(mutex_);
  return ended_;
}

void EchoConsole::end(std::string reason) {
  std::unique_lock lock(mutex_);
  ended_ = std::move(reason);
  wake_locked(lock);
}

std::string EchoConsole::typed() const {
  const std::lock_guard lock(mutex_);
  return typed_;
}

void EchoConsole::wake_locked(std::unique_lock<std::mutex>& lock) {
  auto wake = std::exchange(wake_, nullptr);
  lock.unlock();
  if (wake) wake();
}

Result<std::shared_ptr<service::ConsoleSession>> FakeVmService::open_console(const VmName& name, bool take_over,
                                                                             const std::string& principal) {
  ConsoleOpener opener;
  {
    const std::lock_guard lock(mutex_);
    const auto it = vms_.find(name);
    if (it == vms_.end() || !it->second.view.managed) return Error{ErrorCode::not_found, "no VM named " + name.str()};
    commands_.push_back("console " + name.str() + " by " + principal + (take_over ? " take_over" : ""));
    opener = console_opener_;
  }
  if (!opener) return Error{ErrorCode::unsupported, "the fake service was given no console"};
  return opener(name, take_over);
}

void FakeVmService::set_console(ConsoleOpener opener) {
  const std::lock_guard lock(mutex_);
  console_opener_ = std::move(opener);
}

Result<service::DeviceHealthReading> FakeVmService::device_health() {
  const std::lock_guard lock(mutex_);
  return health_;
}

numa::HostModel FakeVmService::host_now() {
  return host_;
}

Result<std::vector<service::VmStatsView>> FakeVmService::vm_stats() {
  const std::lock_guard lock(mutex_);
  return vm_stats_;
}

void FakeVmService::set_vm_stats(std::vector<service::VmStatsView> stats) {
  const std::lock_guard lock(mutex_);
  vm_stats_ = std::move(stats);
}

service::MaintenanceView FakeVmService::maintenance() {
  const std::lock_guard lock(mutex_);
  return maintenance_;
}

Result<service::MaintenanceView> FakeVmService::cordon(const std::string& reason, const std::string& principal) {
  const std::lock_guard lock(mutex_);
  if (auto refused = take_refusal()) return *refused;
  commands_.push_back("cordon " + reason + " by " + principal);
  if (maintenance_.mode == service::MaintenanceMode::draining ||
      maintenance_.mode == service::MaintenanceMode::drained) {
    return Error{ErrorCode::conflict, "cordon: the host is draining"};
  }
  maintenance_ = {service::MaintenanceMode::cordoned, reason, principal, "2026-12-07T05:00:00Z", "", {}};
  return maintenance_;
}

Result<service::MaintenanceView> FakeVmService::drain(const std::string& reason, std::chrono::seconds grace,
                                                      const std::string& principal) {
  const std::lock_guard lock(mutex_);
  if (auto refused = take_refusal()) return *refused;
  commands_.push_back("drain " + reason + " " + std::to_string(grace.count()) + "s by " + principal);
  maintenance_ = {
      service::MaintenanceMode::draining, reason, principal, "2026-12-07T05:00:00Z", "2026-12-07T05:05:00Z", {}};
  return maintenance_;
}

Result<service::MaintenanceView> FakeVmService::uncordon(const std::string& principal) {
  const std::lock_guard lock(mutex_);
  if (auto refused = take_refusal()) return *refused;
  commands_.push_back("uncordon by " + principal);
  maintenance_ = {service::MaintenanceMode::in_service, "", principal, "2026-12-07T05:10:00Z", "", {}};
  return maintenance_;
}

}  // namespace hostagent::testing
