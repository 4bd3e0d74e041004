// verify: build, boot, read, check (see the header). The stand-in runs as a transient
// domain: whatever happens to this process, libvirt forgets it once it stops.
#include "hostagent/verify/verify_guest.hpp"

#include <condition_variable>
#include <mutex>

#include "hostagent/cloudinit/nocloud_seed.hpp"
#include "hostagent/common/sysfs_root.hpp"
#include "hostagent/common/text.hpp"
#include "hostagent/common/text_file.hpp"

namespace hostagent::verify {
namespace {

using Clock = std::chrono::steady_clock;

// Set by libvirt's event thread when the stand-in stops.
class StopWatch {
 public:
  explicit StopWatch(std::string name) : name_(std::move(name)) {}

  void on_event(const virt::DomainEvent& event) {
    if (event.name != name_ || event.kind != virt::DomainEventKind::stopped) return;
    const std::lock_guard lock(mutex_);
    stopped_ = Clock::now();
    cv_.notify_all();
  }

  // Waits for the stop event, looking the domain up now and then in case the event was lost (a
  // transient domain that is gone has stopped).
  std::optional<Clock::time_point> wait(virt::Hypervisor& hypervisor, Clock::time_point deadline) {
    std::unique_lock lock(mutex_);
    while (!stopped_ && Clock::now() < deadline) {
      cv_.wait_until(lock, std::min(deadline, Clock::now() + std::chrono::seconds(1)));
      if (stopped_) break;
      lock.unlock();
      const auto summary = hypervisor.lookup(name_);
      const bool gone = !summary.ok() && summary.error().code == ErrorCode::not_found;
      lock.lock();
      if (gone && !stopped_) stopped_ = Clock::now();
    }
    return stopped_;
  }

 private:
  std::string name_;
  std::mutex mutex_;
  std::condition_variable cv_;
  std::optional<Clock::time_point> stopped_;
};

// The running stand-in's QEMU process against its ties. Read as soon as it runs: the guest powers
// off within seconds, and its memory is all present by then (libvirt preallocates hugepages).
TiesCheck read_back_ties(const SysfsRoot& machine, const std::string& name, const StandIn& stand_in) {
  const auto process = read_qemu_process(machine, name);
  TiesCheck out;
  if (!process.ok()) {
    out.findings.push_back("the stand-in's QEMU process could not be read: " + process.error().message);
  } else if (!process->has_value()) {
    out.unread.push_back("no QEMU process of this machine runs " + name +
                         " (a libvirt elsewhere?): its pinning and memory binding were not read back");
  } else {
    out = check_ties(stand_in, **process);
  }
  return out;
}

}  // namespace

Result<std::chrono::milliseconds> boot_to_power_off(virt::Hypervisor& hypervisor, const std::string& name,
                                                    const std::string& domain_xml, std::chrono::seconds timeout,
                                                    const std::function<void()>& running) {
  StopWatch watch(name);
  hypervisor.subscribe([&watch](const virt::DomainEvent& event) { watch.on_event(event); }, nullptr);
  const auto started = Clock::now();
  auto created = hypervisor.create_transient(domain_xml);
  if (!created.ok()) {
    hypervisor.subscribe(nullptr, nullptr);
    return std::move(created).error();
  }
  if (running) running();
  const auto stopped = watch.wait(hypervisor, started + timeout);
  hypervisor.subscribe(nullptr, nullptr);
  if (!stopped) {
    (void)hypervisor.destroy(name);
    return Error{ErrorCode::unavailable, "the stand-in " + name + " did not power off within " +
                                             std::to_string(timeout.count()) + " s and was destroyed"};
  }
  return std::chrono::duration_cast<std::chrono::milliseconds>(*stopped - started);
}

Result<VerifyReport> verify_guest(virt::Hypervisor& hypervisor, const VerifyRequest& request) {
  VerifyReport report;
  report.console_log = request.work_dir / "console.log";
  HA_TRY(auto image, build_guest_image(request.work_dir, request.image, probe_init_script()));
  StandInOptions options = request.stand_in;
  options.name = request.domain_name;
  const auto files = render::guest_files(request.rendered);
  const std::string seed_unread = files.empty() ? "" : image.seed_modules_missing;
  if (!files.empty() && seed_unread.empty()) {
    // The guest's files as the daemon's seed carries them, read back by the probe.
    cloudinit::NoCloudSeed seed;
    seed.instance_id = "hostagent-verify";
    seed.hostname = "hostagent-verify";
    for (const auto& file : files) seed.vendor_files.push_back({file.path, file.content, file.reload_module});
    options.seed_iso = request.work_dir / "seed.iso";
    HA_TRY_STATUS(cloudinit::write_nocloud_seed(options.seed_iso, seed));
    image.cmdline += " hostagent.seed=1";
  }
  options.image = std::move(image);
  options.console_log = report.console_log;
  HA_TRY(report.stand_in, make_stand_in(request.rendered.domain_xml, options));
  HA_TRY(const auto machine, SysfsRoot::open(request.machine_root));
  auto read_ties = [&] { report.ties = read_back_ties(machine, request.domain_name, report.stand_in); };
  auto booted =
      boot_to_power_off(hypervisor, request.domain_name, report.stand_in.domain_xml, request.timeout, read_ties);
  if (!booted.ok()) {
    const auto console = read_text_file(report.console_log);
    const std::string last = console.ok() ? last_console_line(*console) : "";
    return Error{booted.error().code, booted.error().message +
                                          "; its console log shows how far it got: " + report.console_log.string() +
                                          (last.empty() ? ", empty" : ", last line: " + last)};
  }
  report.start_to_power_off = *booted;
  HA_TRY(const auto console, read_text_file(report.console_log));
  auto view = parse_guest_view(console);
  if (!view.ok()) {
    return Error{view.error().code, view.error().message + "; console log: " + report.console_log.string()};
  }
  report.view = std::move(*view);
  report.check = check_guest(
      CheckInputs{request.host, request.placement, request.rendered, report.stand_in, seed_unread}, report.view);
  return report;
}

}  // namespace hostagent::verify
