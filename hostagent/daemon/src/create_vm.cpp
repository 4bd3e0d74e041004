// daemon/create_vm: template -> placement (reserved) -> guest rendered -> disk -> devices -> define -> start.

#include "daemon_log.hpp"
#include "hostagent/cloudinit/nocloud_seed.hpp"
#include "hostagent/common/names.hpp"
#include "hostagent/common/paths.hpp"
#include "hostagent/common/text.hpp"
#include "hostagent/render/guest_renderer.hpp"
#include "hostagent/vmtemplates/shape_request.hpp"
#include "operation.hpp"
#include "operations.hpp"
#include "vf_rdma.hpp"
#include "vm_steps.hpp"

namespace hostagent::daemon {
namespace {

namespace fs = std::filesystem;

Error unknown_template(const Facts& facts, const std::string& name) {
  std::string known;
  for (const auto& [template_name, shape] : facts.templates) known += (known.empty() ? "" : ", ") + template_name;
  return Error{ErrorCode::not_found, "template: no template named " + text::quoted(name) + "; known: " + known};
}

Result<vmtemplates::VmTemplate> find_template(const Facts& facts, const std::string& name) {
  const auto it = facts.templates.find(name);
  if (it != facts.templates.end()) return it->second;
  return unknown_template(facts, name);
}

// The guest's hostname: the VM's name as an RFC 1123 label ('.' and '_' become '-').
std::string hostname_of(const std::string& name) {
  std::string label = name.substr(0, 63);
  for (auto& c : label) {
    if (c == '.' || c == '_') c = '-';
  }
  while (!label.empty() && label.back() == '-') label.pop_back();
  while (!label.empty() && label.front() == '-') label.erase(0, 1);
  return label.empty() ? "vm" : label;
}

state::VmRecord new_record(VmWork& work, const service::CreateVmRequest& request,
                           const vmtemplates::VmTemplate& shape) {
  state::VmRecord record;
  record.name = request.name;
  // Chosen here, not by libvirt, so the journal knows it before libvirt does and rollback can tell
  // our domain from a same-named one.
  record.uuid = request.uuid ? *request.uuid : Uuid::parse(random_uuid(), "uuid").value();
  record.template_name = shape.name;
  record.request_id = request.request_id;
  record.created_at = rfc3339(work.recording.clock.now());
  record.inputs.boot_image = shape.boot.image;
  record.inputs.macs.assign(request.macs.begin(), request.macs.end());
  // A template MTU for VFs the guest has reaches the guest through the seed's network-config.
  const bool guest_mtu = shape.nics.vf.mtu && (shape.nics.vfs_per_gpu > 0 || shape.nics.count > 0) &&
                         shape.nics.mode == vmtemplates::NicMode::vf;
  // A guest with GPUs gets its NCCL topology file and /etc/nccl.conf through the seed's vendor-data.
  const bool nccl_files = shape.gpus.count > 0;
  if (!request.ssh_authorized_keys.empty() || !request.user_data.empty() || !shape.boot.cloud_init.empty() ||
      guest_mtu || nccl_files) {
    record.inputs.seed_iso = (work.facts.config.state_directory / "seeds" / (request.name.str() + ".iso")).string();
    record.inputs.user_data = !request.user_data.empty();
  }
  if (!shape.boot.image.empty()) {
    record.inputs.disk_pool = work.facts.config.storage_pool;
    record.inputs.disk_volume = "hostagent-" + request.name.str() + ".qcow2";
  }
  return record;
}

class CreateRun {
 public:
  CreateRun(VmWork& work, vmtemplates::VmTemplate shape, numa::Placement placement, state::VmRecord& record,
            const service::CreateVmRequest& request, Timeline& timeline)
      : work_(work),
        shape_(std::move(shape)),
        placement_(std::move(placement)),
        record_(record),
        request_(request),
        timeline_(timeline) {}

  // A create step: its journal name, whether this VM has it (nullptr: every VM), what runs it, what
  // undoes it. One table for the run, the rollback and reconcile (through create_undo).
  struct Row {
    std::string_view name;
    bool (*needed)(const state::VmRecord& record);
    Status (CreateRun::*run)();
    StepEffect undo;
  };
  static const std::vector<Row>& steps() {
    namespace s = state::step;
    // One row per step, aligned.
    // clang-format off
    static const std::vector<Row> rows = {
        {s::disk,            has_disk, &CreateRun::make_disk,       delete_disk},
        {s::seed,            has_seed, &CreateRun::make_seed,       delete_seed},
        {s::prepare_devices, nullptr,  &CreateRun::prepare_devices, release_devices},
        {s::define,          nullptr,  &CreateRun::define,          undefine_if_ours},
        {s::start,           nullptr,  &CreateRun::start,           destroy_if_ours},
    };
    // clang-format on
    return rows;
  }

  // On failure, `unfinished` says whether the journal kept the operation for reconcile.
  Status run(bool& unfinished) {
    unfinished = false;
    HA_TRY_STATUS(render_guest());
    timeline_.mark("render");
    std::vector<Step> steps;
    for (const auto& row : CreateRun::steps()) {
      if (row.needed == nullptr || row.needed(record_)) {
        steps.push_back({std::string(row.name), [this, &row] { return (this->*row.run)(); }});
      }
    }
    Operation operation(work_.recording, state::OperationKind::create, record_, &timeline_);
    auto status =
        operation.run(steps, [this](const std::string& step) { return create_undo(step)(work_.effects, record_); });
    unfinished = operation.left_for_reconcile();
    return status;
  }

 private:
  static bool has_disk(const state::VmRecord& record) { return !record.inputs.disk_volume.empty(); }
  static bool has_seed(const state::VmRecord& record) { return !record.inputs.seed_iso.empty(); }

  // The guest, rendered once, before the first step changes anything: a guest that cannot be
  // rendered is refused with nothing to undo. What it is rendered from is read, not made: where the
  // disk will lie, and the VFs' RDMA ports (read before prepare takes the VFs from their driver).
  Status render_guest() {
    if (has_disk(record_)) {
      HA_TRY(disk_path_, work_.effects.hypervisor.volume_path(record_.inputs.disk_pool, record_.inputs.disk_volume));
      shape_.boot.image = disk_path_;  // the domain boots its own overlay, never the shared image
    }
    if (work_.facts.readers.rdma_devices_of) {
      HA_TRY(record_.rdma, read_vf_rdma(work_.facts.readers.rdma_devices_of, placement_));
    }
    HA_TRY(const auto guest, render::render_guest(work_.facts.host, shape_, placement_, guest_options()));
    record_.nccl_topology = guest.nccl_topology_xml;
    guest_files_ = render::guest_files(guest);
    HA_TRY(domain_xml_, state::embed_record(guest.domain_xml, record_));
    return ok_status();
  }

  Status make_disk() {
    HA_TRY(const auto path, work_.effects.hypervisor.create_overlay(
                                record_.inputs.disk_pool, record_.inputs.disk_volume, record_.inputs.boot_image));
    if (path != disk_path_) {
      return Error{ErrorCode::internal, "disk: libvirt made " + record_.inputs.disk_volume + " at " + path +
                                            ", not at " + disk_path_ + " where the rendered guest boots from"};
    }
    return ok_status();
  }

  Status make_seed() {
    cloudinit::NoCloudSeed seed;
    seed.instance_id = record_.uuid.str();
    seed.hostname = hostname_of(record_.name);
    seed.ssh_authorized_keys = request_.ssh_authorized_keys;
    seed.user_data = request_.user_data;
    seed.template_user_data = shape_.boot.cloud_init;
    HA_TRY(const auto macs, render::vf_mac_addresses(shape_, placement_, guest_options()));
    for (const auto& [vf, mac] : macs) seed.nics.push_back({mac, shape_.nics.vf.mtu});
    for (const auto& file : guest_files_) seed.vendor_files.push_back({file.path, file.content, file.reload_module});
    const fs::path iso = record_.inputs.seed_iso;
    std::error_code ec;
    fs::create_directories(iso.parent_path(), ec);
    if (ec) return errno_error(ec.value(), "create directory", iso.parent_path().string());
    return work_.facts.readers.write_seed(iso, seed);
  }

  Status prepare_devices() {
    // Marked before any device is touched: however the VM lets them go, they are cleaned first.
    HA_TRY_STATUS(work_.effects.lifecycle.mark_used(record_.name, record_.allocation.devices));
    devices::DeviceRequest request;
    HA_TRY(request.vf_macs, render::vf_mac_addresses(shape_, placement_, guest_options()));
    request.vlan = shape_.nics.vf.vlan;
    request.trust = shape_.nics.vf.trust;
    request.spoofchk = shape_.nics.vf.spoofchk;
    request.mtu = shape_.nics.vf.mtu;
    // Each stage a phase of its own; a preparer that reports none leaves prepare_devices one phase.
    request.on_stage = [this](std::string_view stage, std::string detail) { timeline_.mark(stage, std::move(detail)); };
    return work_.effects.devices.prepare(record_.name, placement_, request);
  }

  render::GuestOptions guest_options() const {
    render::GuestOptions options;
    options.name = record_.name;
    options.uuid = record_.uuid;  // never left to libvirt: the journal knows it before the define
    options.host_id = work_.facts.host_id;
    options.domain_type = work_.facts.config.domain_type;
    options.emulator = work_.facts.config.emulator;
    options.managed_hostdevs = work_.effects.devices.libvirt_manages_hostdevs();
    options.vf_macs = record_.inputs.macs;
    options.seed_iso = record_.inputs.seed_iso;
    for (const auto& rdma : record_.rdma) {
      options.nic_rdma[rdma.vf] = {rdma.node_guid, rdma.roce_v2_gid_index, rdma.link_layer};
    }
    if (const auto console = console_log_path(work_.facts.config, record_.name))
      options.console_log = console->string();
    return options;
  }

  Status define() {
    HA_TRY(const auto uuid, work_.effects.hypervisor.define(domain_xml_));
    work_.effects.ledger.set_domain(record_.name, uuid, virt::DomainState::shut_off);
    return ok_status();
  }

  Status start() {
    HA_TRY_STATUS(work_.effects.hypervisor.start_paused(record_.name));
    timeline_.mark(kLaunchPhase, launch_detail(shape_, placement_));
    HA_TRY_STATUS(resume_watched(work_, timeline_, record_.name, shape_.boot.watch));
    work_.effects.ledger.set_domain(record_.name, "", virt::DomainState::running);
    return ok_status();
  }

  VmWork& work_;
  vmtemplates::VmTemplate shape_;
  numa::Placement placement_;
  state::VmRecord& record_;
  const service::CreateVmRequest& request_;
  std::string disk_path_;   // where the disk step makes the overlay; "" without one
  std::string domain_xml_;  // rendered before the first step, with the record in its metadata
  std::vector<render::GuestFileContent> guest_files_;  // the seed's vendor files, rendered with the guest
  Timeline& timeline_;
};

// A retried create (same request id) of a VM that exists: the VM, not a conflict.
std::optional<service::VmView> earlier_create(VmWork& work, const service::CreateVmRequest& request) {
  if (request.request_id.empty()) return std::nullopt;
  const auto entry = work.effects.ledger.find(request.name);
  if (!entry || !entry->record || entry->record->request_id != request.request_id) return std::nullopt;
  return view_of(work.facts.host, work.recording.operations, *entry);
}

}  // namespace

std::vector<std::string_view> create_step_names() {
  std::vector<std::string_view> names;
  for (const auto& row : CreateRun::steps()) names.push_back(row.name);
  return names;
}

StepEffect create_undo(std::string_view step) {
  if (step == state::step::commit) return no_effect;  // it changes nothing but the journal
  for (const auto& row : CreateRun::steps()) {
    if (row.name == step) return row.undo;
  }
  HA_ASSERT(false && "undo of a step create's table does not have");
  return no_effect;
}

// The image a request names, as the file it resolves to inside images.directories: a request
// never makes a host file (/etc/shadow, another tenant's disk) the backing image of a guest's disk.
Result<std::string> requested_image(const Facts& facts, const service::CreateVmRequest& request) {
  // An image is as large as it is; only what it is, a regular file beneath those directories, is checked.
  HA_TRY(const auto image,
         open_inside(request.boot_image, AllowedDirectories{facts.config.image_directories, "images.directories"},
                     "boot_image", FileLimits{0, false}));
  return image.path.string();
}

namespace {

// One MAC per VF the template gives the VM, or none to have them derived where the template lets
// them be: known from the template alone, so refused before anything is placed.
Status check_macs(const vmtemplates::VmTemplate& shape, const std::vector<MacAddress>& macs) {
  const auto vfs = static_cast<std::size_t>(vmtemplates::vf_count(shape));
  if (!macs.empty() && macs.size() != vfs) {
    return field_error("macs", "template " + text::quoted(shape.name) + " gives the VM " + std::to_string(vfs) +
                                   " NIC VFs and the request gives " + std::to_string(macs.size()) +
                                   " MAC addresses: give one per VF, in placement order, or none to have them derived");
  }
  if (macs.empty() && vfs > 0 && shape.nics.vf.mac == vmtemplates::MacPolicy::request) {
    return field_error("macs",
                       "template " + text::quoted(shape.name) + " takes its " + std::to_string(vfs) +
                           " VFs' MAC addresses from the request (nics.vf.mac: request): give macs, one per VF");
  }
  return ok_status();
}

}  // namespace

Status check_create_request(const Facts& facts, const service::CreateVmRequest& request) {
  if (!request.boot_image.empty()) {
    if (auto image = requested_image(facts, request); !image.ok()) return image.error();
  }
  if (!request.ssh_authorized_keys.empty() && !request.user_data.empty()) {
    return field_error("user_data", "give ssh_authorized_keys or user_data, not both; put the keys in your user data");
  }
  const auto shape = facts.templates.find(request.template_name);
  if (shape == facts.templates.end()) return unknown_template(facts, request.template_name);
  HA_TRY_STATUS(check_macs(shape->second, request.macs));
  if (!request.claim.empty() && facts.config.placement.url.empty()) {
    return field_error("placement",
                       "this host publishes to no Placement (placement.url is not set), so it has no "
                       "claim to honour; create without placement, or configure the fleet");
  }
  // The seed's user data is made now from what is given, so a part that cannot be joined with the
  // template's is refused before any step runs.
  cloudinit::NoCloudSeed seed;
  seed.user_data = request.user_data;
  seed.template_user_data = shape->second.boot.cloud_init;
  if (auto user_data = cloudinit::seed_user_data(seed); !user_data.ok()) return user_data.error();
  return ok_status();
}

Result<service::VmView> create_vm(VmWork& work, const service::CreateVmRequest& request) {
  HA_TRY_STATUS(check_create_request(work.facts, request));
  if (auto earlier = earlier_create(work, request)) return *earlier;
  HA_TRY(auto shape, find_template(work.facts, request.template_name));
  if (!request.boot_image.empty()) {
    HA_TRY(shape.boot.image, requested_image(work.facts, request));
  }
  Timeline timeline(work.recording, request.name);
  auto record = new_record(work, request, shape);
  work.recording.operations.progress(request.name, "create", "reserve");
  const ReserveClaim claim{work.facts.config.placement.host_name, &request.claim};
  HA_TRY(auto placement,
         work.effects.ledger.reserve(record, placement_request(shape), request.claim.empty() ? nullptr : &claim));
  timeline.mark("placement");
  CreateRun run(work, std::move(shape), std::move(placement), record, request, timeline);
  bool unfinished = false;
  if (auto created = run.run(unfinished); !created.ok()) {
    // Rolled back: what was reserved goes back. Rollback incomplete: it stays held until reconcile
    // has undone the rest, so nothing half-released is ever given to another VM.
    if (!unfinished) release_vm(work.effects, request.name);
    return std::move(created).error();
  }
  work.effects.ledger.set_record(record);
  work.recording.operations.idle(request.name);
  log(LogLevel::info, "created " + request.name.str() + " from template " + record.template_name,
      {.vm = request.name, .operation = "create"});
  return current_view(work, request.name);
}

}  // namespace hostagent::daemon
