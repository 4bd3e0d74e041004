// What the daemon adds to libvirt: create->running and delete through the daemon's service API
// (daemon::create_vm / delete_vm, begun and waited for: template, placement, journal, disk overlay,
// render, define, start), against the very domain XML the daemon defined, renamed and defined and
// started with libvirt's C API directly. The arms run interleaved in one run (one round = every arm once, the
// first arm rotating), so drift on a shared machine hits them alike; ratios are daemon median /
// baseline median. Backends: libvirt's in-process test:///default driver on the simulated vela2 host
// with the 8-GPU shape, and the machine's libvirtd (qemu:///system, TCG) with a 2-vCPU VM that sits
// in SeaBIOS (we time create->running, not a guest boot), one VM at a time.
//
// Usage: bench_daemon [TEST_ROUNDS [QEMU_ROUNDS]]   (defaults 200 and 15)
#include <fcntl.h>
#include <libvirt/libvirt.h>
#include <libvirt/virterror.h>
#include <stdlib.h>
#include <unistd.h>

#include <pugixml.hpp>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <sstream>
#include <string>
#include <vector>

#include "assembly.hpp"
#include "file_calls.hpp"
#include "hostagent/common/result.hpp"
#include "hostagent/config/daemon_config.hpp"
#include "hostagent/service/vm_service.hpp"
#include "hostagent/virt/hypervisor.hpp"
#include "samples.hpp"
#include "scratch_dir.hpp"

namespace {

using namespace hostagent;
using bench::file_calls_now;
using bench::FileCalls;
namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

int64_t ns_since(Clock::time_point start) {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now() - start).count();
}

double ms_since(Clock::time_point start) {
  return static_cast<double>(ns_since(start)) / 1e6;
}

// Everything the benchmark makes in libvirt carries this prefix, so a sweep finds it (and only it)
// after a run that was killed.
constexpr const char* kPrefix = "hostagent-bench-";
constexpr char kDaemonVm[] = "hostagent-bench-vm";
constexpr const char* kBaselineVm = "hostagent-bench-base";
constexpr const char* kRawVolume = "hostagent-bench-raw.qcow2";
constexpr const char* kOverlayVolume = "hostagent-bench-base.qcow2";
constexpr const char* kQemuPool = "hostagent-bench-pool";
constexpr char kQemuTemplate[] = "bench-2x256";
constexpr int kQemuHugepages = 128;  // 256 MiB in 2 MiB pages

// ---- small tools ------------------------------------------------------------------------------

using bench::Samples;

Error libvirt_error(const std::string& what) {
  const virErrorPtr error = virGetLastError();
  std::string message = error != nullptr && error->message != nullptr ? error->message : "no libvirt error";
  virResetLastError();
  return Error{ErrorCode::io_error, what + ": " + message};
}

struct ConnClose {
  void operator()(virConnectPtr conn) const { virConnectClose(conn); }
};
struct DomainFree {
  void operator()(virDomainPtr domain) const { virDomainFree(domain); }
};
struct PoolFree {
  void operator()(virStoragePoolPtr pool) const { virStoragePoolFree(pool); }
};
struct VolumeFree {
  void operator()(virStorageVolPtr volume) const { virStorageVolFree(volume); }
};
using ConnPtr = std::unique_ptr<virConnect, ConnClose>;
using DomainPtr = std::unique_ptr<virDomain, DomainFree>;
using PoolPtr = std::unique_ptr<virStoragePool, PoolFree>;
using VolumePtr = std::unique_ptr<virStorageVol, VolumeFree>;

std::string take_string(char* text) {
  std::string copy = text == nullptr ? "" : text;
  std::free(text);  // NOLINT(cppcoreguidelines-no-malloc): libvirt's allocation
  return copy;
}

std::string xml_text(const pugi::xml_document& doc) {
  std::ostringstream out;
  doc.save(out, "  ", pugi::format_indent | pugi::format_no_declaration, pugi::encoding_utf8);
  return out.str();
}

// The daemon logs a line per operation to stderr (its sink is private to the daemon library): into
// a file while a backend runs, so the table stays readable and a failure can show the daemon's view.
class StderrToFile {
 public:
  explicit StderrToFile(const fs::path& file) : saved_(::dup(STDERR_FILENO)) {
    const int fd = ::open(file.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
    if (fd >= 0) {
      ::dup2(fd, STDERR_FILENO);
      ::close(fd);
    }
  }
  ~StderrToFile() {
    if (saved_ < 0) return;
    ::dup2(saved_, STDERR_FILENO);
    ::close(saved_);
  }
  StderrToFile(const StderrToFile&) = delete;
  StderrToFile& operator=(const StderrToFile&) = delete;

 private:
  int saved_;
};

void write_sparse_file(const fs::path& path, uintmax_t size) {
  std::ofstream(path, std::ios::binary).close();
  fs::resize_file(path, size);
}

// ---- the daemon's hypervisor, timed and blind to the baseline ----------------------------------

// Forwards to the daemon's real hypervisor, adding up the time spent in libvirt; hides the
// baseline's domains, whose events would otherwise make the daemon resync while a baseline runs.
class TimedHypervisor final : public virt::Hypervisor {
 public:
  explicit TimedHypervisor(std::unique_ptr<virt::Hypervisor> real) : real_(std::move(real)) {}
  int64_t libvirt_ns() const { return libvirt_ns_; }

  void subscribe(virt::DomainEventSink on_domain, virt::ConnectionEventSink on_connection) override {
    if (on_domain) {
      on_domain = [sink = std::move(on_domain)](const virt::DomainEvent& event) {
        if (!hidden(event.name)) sink(event);
      };
    }
    real_->subscribe(std::move(on_domain), std::move(on_connection));
  }
  bool connected() const override { return real_->connected(); }
  // Time and calls per method so far: which of libvirt's calls the daemon's share goes to.
  std::map<std::string, std::pair<int64_t, int64_t>> by_method() const {
    const std::lock_guard lock(mutex_);
    return by_method_;
  }
  Result<std::string> define(const std::string& xml) override {
    return timed("define", [&] { return real_->define(xml); });
  }
  Status start(const std::string& name) override {
    return timed("start", [&] { return real_->start(name); });
  }
  Status start_paused(const std::string& name) override {
    return timed("start_paused", [&] { return real_->start_paused(name); });
  }
  Status resume(const std::string& name) override {
    return timed("resume", [&] { return real_->resume(name); });
  }
  Status agent_ping(const std::string& name) override {
    return timed("agent_ping", [&] { return real_->agent_ping(name); });
  }
  Result<std::string> create_transient(const std::string& xml) override {
    return timed("create_transient", [&] { return real_->create_transient(xml); });
  }
  Status shutdown(const std::string& name) override {
    return timed("shutdown", [&] { return real_->shutdown(name); });
  }
  Status destroy(const std::string& name) override {
    return timed("destroy", [&] { return real_->destroy(name); });
  }
  Status reboot(const std::string& name) override {
    return timed("reboot", [&] { return real_->reboot(name); });
  }
  Status undefine(const std::string& name) override {
    return timed("undefine", [&] { return real_->undefine(name); });
  }
  Result<virt::DomainSummary> lookup(const std::string& name) override {
    return timed("lookup", [&] { return real_->lookup(name); });
  }
  Result<std::vector<virt::DomainSummary>> list() override {
    auto all = timed("list", [&] { return real_->list(); });
    if (!all.ok()) return all;
    std::vector<virt::DomainSummary> seen;
    for (auto& domain : *all) {
      if (!hidden(domain.name)) seen.push_back(std::move(domain));
    }
    return seen;
  }
  Result<std::vector<virt::DomainStats>> all_stats() override {
    return timed("all_stats", [&] { return real_->all_stats(); });
  }
  Result<virt::StackVersions> versions() override { return real_->versions(); }
  Result<std::string> domain_xml(const std::string& name) override {
    return timed("domain_xml", [&] { return real_->domain_xml(name); });
  }
  Result<std::unique_ptr<virt::Console>> open_console(const std::string& name, bool force,
                                                      virt::ConsoleSinks sinks) override {
    return real_->open_console(name, force, std::move(sinks));
  }
  Result<std::string> volume_path(const std::string& pool, const std::string& volume) override {
    return real_->volume_path(pool, volume);
  }
  Result<std::string> create_overlay(const std::string& pool, const std::string& volume,
                                     const std::string& backing) override {
    return timed("create_overlay", [&] { return real_->create_overlay(pool, volume, backing); });
  }
  Status delete_volume(const std::string& pool, const std::string& volume) override {
    return timed("delete_volume", [&] { return real_->delete_volume(pool, volume); });
  }
  Result<std::vector<std::string>> list_volumes(const std::string& pool) override {
    return timed("list_volumes", [&] { return real_->list_volumes(pool); });
  }

 private:
  static bool hidden(const std::string& name) { return name == kBaselineVm; }

  template <typename Call>
  auto timed(const char* method, const Call& call) -> decltype(call()) {
    const auto start = Clock::now();
    auto result = call();
    const int64_t spent = ns_since(start);
    libvirt_ns_ += spent;
    const std::lock_guard lock(mutex_);
    auto& [ns, calls] = by_method_[method];
    ns += spent;
    ++calls;
    return result;
  }

  std::unique_ptr<virt::Hypervisor> real_;
  std::atomic<int64_t> libvirt_ns_{0};
  mutable std::mutex mutex_;
  std::map<std::string, std::pair<int64_t, int64_t>> by_method_;  // name -> (ns, calls)
};

// ---- what the benchmark made in libvirt, removed whatever happens ------------------------------

void remove_domain(virConnectPtr conn, const std::string& name) {
  const DomainPtr domain(virDomainLookupByName(conn, name.c_str()));
  if (domain) {
    virDomainDestroy(domain.get());
    // The test driver refuses UNDEFINE_NVRAM (VIR_ERR_INVALID_ARG); QEMU needs it for EFI guests.
    if (virDomainUndefineFlags(domain.get(), VIR_DOMAIN_UNDEFINE_NVRAM) < 0) virDomainUndefine(domain.get());
  }
  virResetLastError();
}

void remove_bench_domains(virConnectPtr conn) {
  virDomainPtr* raw = nullptr;
  const int count = virConnectListAllDomains(conn, &raw, 0);
  std::vector<std::string> names;
  for (int i = 0; i < count; ++i) {
    const DomainPtr domain(raw[i]);
    const char* name = virDomainGetName(domain.get());
    if (name != nullptr && std::string(name).rfind(kPrefix, 0) == 0) names.emplace_back(name);
  }
  std::free(raw);  // NOLINT(cppcoreguidelines-no-malloc): libvirt's allocation
  for (const auto& name : names) remove_domain(conn, name);
  virResetLastError();
}

// Volumes: the baseline's ("hostagent-bench-...") and the daemon's ("hostagent-hostagent-bench-vm...").
void remove_bench_volumes(virStoragePoolPtr pool) {
  virStoragePoolRefresh(pool, 0);
  virStorageVolPtr* raw = nullptr;
  const int count = virStoragePoolListAllVolumes(pool, &raw, 0);
  for (int i = 0; i < count; ++i) {
    const VolumePtr volume(raw[i]);
    const char* name = virStorageVolGetName(volume.get());
    if (name != nullptr && std::string(name).find(kPrefix) != std::string::npos) virStorageVolDelete(volume.get(), 0);
  }
  std::free(raw);  // NOLINT(cppcoreguidelines-no-malloc): libvirt's allocation
  virResetLastError();
}

// Sweeps at construction (what a killed run left) and at destruction; a pool it owns (transient)
// goes last.
class BenchObjects {
 public:
  BenchObjects(virConnectPtr conn, virStoragePoolPtr pool, bool own_pool)
      : conn_(conn), pool_(pool), own_pool_(own_pool) {
    sweep();
  }
  ~BenchObjects() {
    sweep();
    if (own_pool_) virStoragePoolDestroy(pool_);
    virResetLastError();
  }
  BenchObjects(const BenchObjects&) = delete;
  BenchObjects& operator=(const BenchObjects&) = delete;

 private:
  void sweep() {
    remove_bench_domains(conn_);
    remove_bench_volumes(pool_);
  }
  virConnectPtr conn_;
  virStoragePoolPtr pool_;
  bool own_pool_;
};

// The QEMU backend's disks go to a transient dir pool of its own, never the machine's pools.
Result<PoolPtr> make_own_pool(virConnectPtr conn, const fs::path& dir) {
  if (const PoolPtr old{virStoragePoolLookupByName(conn, kQemuPool)}) {  // a killed run's
    remove_bench_volumes(old.get());
    virStoragePoolDestroy(old.get());
    virStoragePoolUndefine(old.get());
  }
  virResetLastError();
  fs::create_directories(dir);
  fs::permissions(dir, fs::perms::owner_all | fs::perms::group_read | fs::perms::group_exec | fs::perms::others_read |
                           fs::perms::others_exec);
  pugi::xml_document doc;
  auto pool = doc.append_child("pool");
  pool.append_attribute("type").set_value("dir");
  pool.append_child("name").text().set(kQemuPool);
  pool.append_child("target").append_child("path").text().set(dir.c_str());
  PoolPtr made(virStoragePoolCreateXML(conn, xml_text(doc).c_str(), 0));
  if (!made) return libvirt_error(std::string("create storage pool ") + kQemuPool);
  return made;
}

// ---- the arms ----------------------------------------------------------------------------------

// One kind of daemon operation: its timings, and where the time went, summed over the rounds.
struct DaemonSplit {
  Samples samples;
  int64_t total_ns = 0, libvirt_ns = 0, fsync_ns = 0, fsyncs = 0, file_ops_ns = 0;
};

struct DaemonArm {
  DaemonSplit create, remove;
};

class SplitTimer {
 public:
  explicit SplitTimer(const TimedHypervisor& hypervisor)
      : hypervisor_(hypervisor), libvirt_(hypervisor.libvirt_ns()), files_(file_calls_now()), start_(Clock::now()) {}
  void add_to(DaemonSplit& split) const {
    const int64_t total = ns_since(start_);
    split.samples.ms.push_back(static_cast<double>(total) / 1e6);
    split.total_ns += total;
    split.libvirt_ns += hypervisor_.libvirt_ns() - libvirt_;
    const FileCalls files = file_calls_now() - files_;
    split.fsync_ns += files.fsync_ns;
    split.fsyncs += files.fsyncs;
    split.file_ops_ns += files.file_ops_ns;
  }

 private:
  const TimedHypervisor& hypervisor_;
  int64_t libvirt_;
  FileCalls files_;
  Clock::time_point start_;
};

Status daemon_round(service::VmService& service, const service::CreateVmRequest& request,
                    const TimedHypervisor& hypervisor, DaemonArm& arm) {
  const SplitTimer create(hypervisor);
  HA_TRY(const auto view, create_vm(service, request));
  create.add_to(arm.create);
  if (view.state != virt::to_string(virt::DomainState::running)) {
    return Error{ErrorCode::internal, "daemon create_vm returned " + view.name + " " + view.state + ", not running"};
  }
  const SplitTimer remove(hypervisor);
  HA_TRY_STATUS(delete_vm(service, request.name));
  remove.add_to(arm.remove);
  return ok_status();
}

// The baseline: a client of libvirt's C API that already holds its connection and pool.
struct Baseline {
  virConnectPtr conn = nullptr;
  virStoragePoolPtr pool = nullptr;
  std::string raw_xml;      // the daemon's domain, renamed, booting a volume made once
  std::string overlay_xml;  // the same, booting the overlay each round makes
  std::string volume_xml;   // that overlay, as the daemon's
};

struct BaselineArm {
  const char* create_label;
  const char* remove_label;
  bool overlay;
  bool validate;
  Samples create, remove;
};

Status baseline_round(const Baseline& baseline, BaselineArm& arm) {
  const std::string& xml = arm.overlay ? baseline.overlay_xml : baseline.raw_xml;
  auto start = Clock::now();
  VolumePtr volume;
  if (arm.overlay) {
    volume.reset(virStorageVolCreateXML(baseline.pool, baseline.volume_xml.c_str(), 0));
    if (!volume) return libvirt_error("baseline: create volume");
  }
  const DomainPtr domain(arm.validate ? virDomainDefineXMLFlags(baseline.conn, xml.c_str(), VIR_DOMAIN_DEFINE_VALIDATE)
                                      : virDomainDefineXML(baseline.conn, xml.c_str()));
  if (!domain) return libvirt_error("baseline: define");
  if (virDomainCreate(domain.get()) < 0) return libvirt_error("baseline: start");
  arm.create.ms.push_back(ms_since(start));

  start = Clock::now();
  if (virDomainDestroy(domain.get()) < 0) return libvirt_error("baseline: destroy");
  if (virDomainUndefine(domain.get()) < 0) return libvirt_error("baseline: undefine");
  if (volume && virStorageVolDelete(volume.get(), 0) < 0) return libvirt_error("baseline: delete volume");
  arm.remove.ms.push_back(ms_since(start));
  return ok_status();
}

Result<std::string> volume_path(virStoragePoolPtr pool, const std::string& xml, bool keep) {
  const VolumePtr volume(virStorageVolCreateXML(pool, xml.c_str(), 0));
  if (!volume) return libvirt_error("baseline: create volume");
  std::string path = take_string(virStorageVolGetPath(volume.get()));
  if (!keep) virStorageVolDelete(volume.get(), 0);
  return path;
}

// The overlay the daemon made for its VM, as volume XML under another name: the same request of
// libvirt (qcow2 over the same backing file).
Result<std::string> baseline_volume_xml(virStoragePoolPtr pool, const std::string& daemon_volume,
                                        const std::string& name) {
  virStoragePoolRefresh(pool, 0);
  const VolumePtr volume(virStorageVolLookupByName(pool, daemon_volume.c_str()));
  if (!volume) return libvirt_error("look up the daemon's volume " + daemon_volume);
  const std::string xml = take_string(virStorageVolGetXMLDesc(volume.get(), 0));
  pugi::xml_document in;
  if (!in.load_string(xml.c_str())) return Error{ErrorCode::parse_error, "the daemon's volume XML does not parse"};
  const auto backing = in.child("volume").child("backingStore");
  pugi::xml_document doc;
  auto out = doc.append_child("volume");
  out.append_child("name").text().set(name.c_str());
  auto capacity = out.append_child("capacity");
  capacity.append_attribute("unit").set_value("bytes");
  capacity.text().set(in.child("volume").child("capacity").text().as_string());
  out.append_child("target").append_child("format").append_attribute("type").set_value("qcow2");
  auto store = out.append_child("backingStore");
  store.append_child("path").text().set(backing.child("path").text().as_string());
  store.append_child("format").append_attribute("type").set_value(
      backing.child("format").attribute("type").as_string());
  return xml_text(doc);
}

// The daemon's definition (inactive XML, as defined), renamed, without its UUID, booting `disk`.
Result<std::string> renamed_domain(const std::string& defined, const std::string& disk) {
  pugi::xml_document doc;
  if (!doc.load_string(defined.c_str())) return Error{ErrorCode::parse_error, "the daemon's domain XML does not parse"};
  auto domain = doc.child("domain");
  domain.child("name").text().set(kBaselineVm);
  domain.remove_child("uuid");
  auto source = domain.child("devices").find_child_by_attribute("disk", "device", "disk").child("source");
  if (!source) return Error{ErrorCode::parse_error, "the daemon's domain has no boot disk"};
  source.attribute("file").set_value(disk.c_str());
  return xml_text(doc);
}

// ---- one backend -------------------------------------------------------------------------------

struct Backend {
  std::string title;
  config::DaemonConfig config;
  service::CreateVmRequest request{.name = kDaemonVm, .template_name = kQemuTemplate};
  fs::path own_pool_dir;  // empty: use config.storage_pool as it is
};

using MethodTimes = std::map<std::string, std::pair<int64_t, int64_t>>;  // name -> (ns, calls)

struct Results {
  std::size_t xml_bytes = 0;
  DaemonArm daemon;
  MethodTimes libvirt_calls;  // the daemon's, over the timed rounds
  std::vector<BaselineArm> baselines;
};

void print_row(const char* label, const Samples& samples, const Samples* daemon) {
  std::printf("    %-44s %9.2f %9.2f", label, samples.median(), samples.p90());
  if (daemon != nullptr) std::printf(" %8.2f", daemon->median() / samples.median());
  std::printf("\n");
}

void print_split(const char* what, const DaemonSplit& split, int rounds) {
  const auto share = [&](int64_t part) {
    return 100.0 * static_cast<double>(part) / static_cast<double>(split.total_ns);
  };
  std::printf(
      "  daemon %s, where the time goes (sum over rounds): libvirt calls %.0f%%, journal fsync %.0f%% "
      "(%.1f per %s), journal file create/rename/unlink %.0f%%, the rest %.0f%%\n",
      what, share(split.libvirt_ns), share(split.fsync_ns), static_cast<double>(split.fsyncs) / rounds, what,
      share(split.file_ops_ns), share(split.total_ns - split.libvirt_ns - split.fsync_ns - split.file_ops_ns));
}

void print_results(const Backend& backend, const Results& results, int rounds) {
  std::printf("\n%s: %d rounds, %zu-byte domain XML\n", backend.title.c_str(), rounds, results.xml_bytes);
  std::printf("  %-46s %9s %9s %8s\n", "create -> running (ms)", "median", "p90", "daemon/x");
  print_row("daemon create_vm", results.daemon.create.samples, nullptr);
  for (const auto& arm : results.baselines) print_row(arm.create_label, arm.create, &results.daemon.create.samples);
  std::printf("  delete (ms)\n");
  print_row("daemon delete_vm", results.daemon.remove.samples, nullptr);
  for (const auto& arm : results.baselines) {
    if (arm.remove_label != nullptr) print_row(arm.remove_label, arm.remove, &results.daemon.remove.samples);
  }
  print_split("create", results.daemon.create, rounds);
  print_split("delete", results.daemon.remove, rounds);
  std::printf("  daemon's libvirt calls per create+delete (calls, ms):");
  for (const auto& [method, spent] : results.libvirt_calls) {
    std::printf(" %s %.1f, %.2f;", method.c_str(), static_cast<double>(spent.second) / rounds,
                static_cast<double>(spent.first) / 1e6 / rounds);
  }
  std::printf("\n");
}

std::vector<BaselineArm> baseline_arms() {
  return {
      {"libvirt define+start", "libvirt destroy+undefine", false, false, {}, {}},
      {"libvirt overlay+define+start", "libvirt destroy+undefine+volume delete", true, false, {}, {}},
      // What the daemon asks of libvirt (it defines with VALIDATE); its delete is the row above's.
      {"libvirt overlay+define(VALIDATE)+start", nullptr, true, true, {}, {}},
  };
}

// Interleaved rounds after one untimed round of every arm.
Status measure(service::VmService& service, const TimedHypervisor& hypervisor, const Backend& backend,
               const Baseline& baseline, int rounds, Results& results) {
  results.baselines = baseline_arms();
  const std::size_t arms = results.baselines.size() + 1;
  const auto run_arm = [&](std::size_t arm, DaemonArm& daemon_arm) -> Status {
    if (arm == 0) return daemon_round(service, backend.request, hypervisor, daemon_arm);
    return baseline_round(baseline, results.baselines[arm - 1]);
  };
  DaemonArm warm;
  for (std::size_t arm = 0; arm < arms; ++arm) HA_TRY_STATUS(run_arm(arm, warm));
  for (auto& arm : results.baselines) {
    arm.create.ms.clear();
    arm.remove.ms.clear();
  }
  const auto before = hypervisor.by_method();
  for (int round = 0; round < rounds; ++round) {
    for (std::size_t i = 0; i < arms; ++i) HA_TRY_STATUS(run_arm((round + i) % arms, results.daemon));
  }
  for (const auto& [method, spent] : hypervisor.by_method()) {
    const auto earlier = before.find(method);
    const auto [ns, calls] = earlier == before.end() ? std::pair<int64_t, int64_t>{} : earlier->second;
    if (spent.second > calls) results.libvirt_calls[method] = {spent.first - ns, spent.second - calls};
  }
  return ok_status();
}

// One daemon create tells the baseline what to define: the daemon's domain and overlay volume.
Result<Baseline> prepare_baseline(service::VmService& service, const Backend& backend, virConnectPtr conn,
                                  virStoragePoolPtr pool, std::size_t& xml_bytes) {
  HA_TRY(const auto view, create_vm(service, backend.request));
  const DomainPtr domain(virDomainLookupByName(conn, view.name.c_str()));
  if (!domain) return libvirt_error("look up the daemon's domain " + view.name);
  const std::string defined = take_string(virDomainGetXMLDesc(domain.get(), VIR_DOMAIN_XML_INACTIVE));
  xml_bytes = defined.size();
  Baseline baseline{conn, pool, "", "", ""};
  if (!view.record) return Error{ErrorCode::internal, "the daemon's VM " + view.name + " has no record"};
  HA_TRY(baseline.volume_xml, baseline_volume_xml(pool, view.record->disk_volume, kOverlayVolume));

  HA_TRY(const auto raw_volume_xml, baseline_volume_xml(pool, view.record->disk_volume, kRawVolume));
  HA_TRY(const auto name, VmName::parse(view.name, "name"));
  HA_TRY_STATUS(delete_vm(service, name));

  HA_TRY(const auto raw_path, volume_path(pool, raw_volume_xml, true));
  HA_TRY(const auto overlay_path, volume_path(pool, baseline.volume_xml, false));
  HA_TRY(baseline.raw_xml, renamed_domain(defined, raw_path));
  HA_TRY(baseline.overlay_xml, renamed_domain(defined, overlay_path));
  return baseline;
}

Result<Results> run_backend(const Backend& backend, int rounds, const fs::path& daemon_log) {
  const StderrToFile quiet(daemon_log);
  HA_TRY(auto parts, cli::assemble_parts(backend.config));
  const ConnPtr conn(virConnectOpen(backend.config.libvirt_uri.c_str()));
  if (!conn) return libvirt_error("connect to " + backend.config.libvirt_uri);
  PoolPtr pool;
  if (backend.own_pool_dir.empty()) {
    pool.reset(virStoragePoolLookupByName(conn.get(), backend.config.storage_pool.c_str()));
    if (!pool) return libvirt_error("look up storage pool " + backend.config.storage_pool);
  } else {
    HA_TRY(pool, make_own_pool(conn.get(), backend.own_pool_dir));
  }
  const BenchObjects cleanup(conn.get(), pool.get(), !backend.own_pool_dir.empty());  // after the service stops

  auto timed = std::make_unique<TimedHypervisor>(std::move(parts.hypervisor));
  const TimedHypervisor& hypervisor = *timed;
  parts.hypervisor = std::move(timed);
  HA_TRY(const auto service, daemon::start_service(std::move(parts)));

  Results results;
  HA_TRY(const auto baseline, prepare_baseline(*service, backend, conn.get(), pool.get(), results.xml_bytes));
  HA_TRY_STATUS(measure(*service, hypervisor, backend, baseline, rounds, results));
  return results;
}

void report_failure(const char* backend, const Error& error, const fs::path& daemon_log) {
  std::fprintf(stderr, "bench_daemon: %s: %s\n", backend, error.message.c_str());
  std::ifstream log(daemon_log);
  std::vector<std::string> lines;
  for (std::string line; std::getline(log, line);) lines.push_back(line);
  if (lines.empty()) return;
  std::fprintf(stderr, "the daemon's last log lines (%s):\n", daemon_log.c_str());
  for (std::size_t i = lines.size() > 20 ? lines.size() - 20 : 0; i < lines.size(); ++i) {
    std::fprintf(stderr, "  %s\n", lines[i].c_str());
  }
}

// ---- the two backends --------------------------------------------------------------------------

Backend test_backend(const fs::path& scratch) {
  Backend backend;
  backend.title = "test:///default, simulated vela2, gx3d-160x1792x8h100 (8 GPUs, 160 vCPUs)";
  backend.config = config::embedded_default_config("vela2", scratch);
  backend.config.template_directories = {fs::path(HOSTAGENT_SOURCE_DIR) / "vmtemplates" / "templates"};
  const fs::path image = backend.config.image_directories.front() / "boot.raw";  // where a request's image may lie
  fs::create_directories(image.parent_path());
  write_sparse_file(image, 1ULL << 30);
  backend.request.name = kDaemonVm;
  backend.request.template_name = "gx3d-160x1792x8h100";
  backend.request.boot_image = image.string();
  return backend;
}

Backend qemu_backend(const fs::path& scratch) {
  const fs::path image = scratch / "boot.raw";
  write_sparse_file(image, 64ULL << 20);
  fs::create_directories(scratch / "templates");
  fs::create_directories(scratch / "console");
  // No kernel: the guest sits in SeaBIOS. boot.image makes the daemon's disk-overlay step run.
  std::ofstream(scratch / "templates" / (std::string(kQemuTemplate) + ".yaml"))
      << "name: " << kQemuTemplate << "\ndescription: bench_daemon's QEMU guest\nvcpus: 2\nmemory: 256MiB\n"
      << "hugepage_size: 2M\nguest_numa: {cells: 1}\nmachine: q35\nfirmware: bios\nboot:\n  image: " << image.string()
      << "\n";

  Backend backend;
  backend.title = "qemu:///system (TCG), this host, 2 vCPUs / 256 MiB in 2M pages, q35, SeaBIOS, no kernel";
  auto& config = backend.config;
  config.source = "<bench_daemon>";
  config.libvirt_uri = "qemu:///system";
  config.domain_type = "qemu";
  config.libvirt_connect_timeout = std::chrono::seconds(10);
  config.sysfs_root = "/";
  config.template_directories = {scratch / "templates"};
  config.storage_pool = kQemuPool;
  config.state_directory = scratch / "state";
  config.console_log_directory = scratch / "console";
  config.operation_workers = 2;
  backend.request.name = kDaemonVm;
  backend.request.template_name = kQemuTemplate;
  backend.own_pool_dir = scratch / "pool";
  return backend;
}

// Empty when qemu:///system answers and has room for the guest; else why not.
std::string qemu_unavailable() {
  const ConnPtr conn(virConnectOpen("qemu:///system"));
  if (!conn) return "libvirtd not reachable: " + libvirt_error("qemu:///system").message;
  long free_pages = 0;
  std::ifstream("/sys/kernel/mm/hugepages/hugepages-2048kB/free_hugepages") >> free_pages;
  if (free_pages < kQemuHugepages) {
    return "needs " + std::to_string(kQemuHugepages) + " free 2 MiB hugepages, " + std::to_string(free_pages) +
           " free: scripts/libvirtd.sh start";
  }
  return {};
}

void ignore_error(void* /*data*/, virErrorPtr /*error*/) {}

bool run_one(const char* name, const Backend& backend, int rounds, const fs::path& scratch) {
  const fs::path log = scratch / "daemon.log";
  const auto results = run_backend(backend, rounds, log);
  if (!results.ok()) {
    report_failure(name, results.error(), log);
    return false;
  }
  print_results(backend, *results, rounds);
  std::fflush(stdout);
  return true;
}

// QEMU runs as libvirt-qemu and must walk in to the backing image and the overlays.
void open_to_qemu(const fs::path& dir) {
  fs::permissions(dir, fs::perms::owner_all | fs::perms::group_read | fs::perms::group_exec | fs::perms::others_read |
                           fs::perms::others_exec);
}

}  // namespace

int main(int argc, char** argv) {
  const int test_rounds = argc > 1 ? std::max(1, std::atoi(argv[1])) : 200;
  const int qemu_rounds = argc > 2 ? std::max(1, std::atoi(argv[2])) : 15;
  virSetErrorFunc(nullptr, ignore_error);  // libvirt's errors are reported through Results
  std::printf("daemon create/delete against the same domain through libvirt's C API, interleaved in one run\n");
  std::printf("(ms; daemon/x = daemon median / that baseline's median)\n");
  std::fflush(stdout);
  bool ok = true;
  {
    const bench::ScratchDir scratch("daemon");
    ok = run_one("test:///", test_backend(scratch.path()), test_rounds, scratch.path()) && ok;
  }
  if (const auto why = qemu_unavailable(); !why.empty()) {
    std::printf("\nqemu: skipped (%s)\n", why.c_str());
  } else {
    const bench::ScratchDir scratch("daemon");
    open_to_qemu(scratch.path());
    ok = run_one("qemu:///system", qemu_backend(scratch.path()), qemu_rounds, scratch.path()) && ok;
  }
  return ok ? 0 : 1;
}
