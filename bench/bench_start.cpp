// Time to a running VM (issue 20): create -> guest up through the daemon's service, on the machine's
// libvirtd (qemu:///system, TCG), for the bootable test guest (tests/support/test_guest.hpp) given
// the largest memory this machine can back with 2 MiB hugepages. Four arms, interleaved round by
// round with the first arm rotating, so a shared machine's drift hits them alike:
//   1 thread   the template's allocation_threads: 1 (QEMU zeroes the memory on one thread)
//   2 threads  allocation_threads: 2
//   2 cells    the same memory in two guest cells (guest_numa: {cells: 2}), one thread each: QEMU
//              9.0 and later zero the cells' backends at once ("initialize backend memory objects
//              in parallel"), 7.2 one after another, so against the 1-thread arm (one cell) it
//              shows what the running QEMU does with a multi-cell VM
//   libvirt    the 2-thread arm's own domain XML, renamed, defined (validated, as the daemon does)
//              and started with libvirt's C API directly: what the daemon adds to libvirt, phase
//              by phase
// Each arm's phases come from the operation's timeline (placement .. resume, then the guest's kernel
// and up, which the daemon adds after the create ended); "boot" is from the resume's end to the
// guest's "up" line on its serial console, for every arm; "create->up" is the whole, to that line.
// Medians, and the ratios 2 threads / 1 thread, 2 cells / 1 cell and daemon / libvirt; the QEMU and
// libvirt that ran them are printed first.
//
// Usage: bench_start [ROUNDS] [--connect URI] [--scratch-dir DIR]
//   ROUNDS 3 by default; each round boots four guests (about a minute a round on
// 2 cores with 5 GiB). Needs libvirtd (scripts/libvirtd.sh start), the host's kernel and busybox-static;
// says which is missing and exits 0 without them. It raises the 2 MiB pool as far as the kernel will
// (at most to half of MemAvailable), and puts it back as it was at the end.
//
// The test guest's support asserts with doctest, so this program carries doctest's implementation,
// with its own main.
#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>
#include <libvirt/libvirt.h>
#include <libvirt/virterror.h>

#include <pugixml.hpp>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "assembly.hpp"
#include "doctest_asserts.hpp"
#include "hostagent/common/sysfs_root.hpp"
#include "hostagent/common/sysfs_writer.hpp"
#include "hostagent/config/daemon_config.hpp"
#include "hostagent/service/vm_service.hpp"
#include "hostagent/virt/hypervisor.hpp"
#include "samples.hpp"
#include "scratch_dir.hpp"
#include "test_guest.hpp"

namespace {

using namespace hostagent;
namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;
using bench::Samples;

constexpr const char* kPrefix = "hostagent-bench-start-";
constexpr const char* kPoolFile = "/sys/kernel/mm/hugepages/hugepages-2048kB/nr_hugepages";
constexpr const char* kFreeFile = "/sys/kernel/mm/hugepages/hugepages-2048kB/free_hugepages";
constexpr uint64_t kPageMiB = 2;
constexpr auto kUpTimeout = std::chrono::seconds(300);

// Thrown, not exit(): main catches it after the destructors have run, so the 2 MiB pool is put back.
[[noreturn]] void fail(const std::string& why) {
  throw std::runtime_error(why);
}

double ms_since(Clock::time_point start) {
  return std::chrono::duration<double, std::milli>(Clock::now() - start).count();
}

uint64_t read_number(const std::string& file) {
  std::ifstream in(file);
  uint64_t value = 0;
  in >> value;
  return value;
}

uint64_t mem_available_mib() {
  std::ifstream in("/proc/meminfo");
  for (std::string key; in >> key;) {
    uint64_t kib = 0;
    in >> kib;
    if (key == "MemAvailable:") return kib / 1024;
    in.ignore(64, '\n');
  }
  return 0;
}

// The 2 MiB pool raised as far as the kernel gives (to at most half of MemAvailable more), and put
// back as it was when the benchmark ends.
class PoolRaise {
 public:
  PoolRaise() : before_(read_number(kPoolFile)), writer_(make_sysfs_writer("/")) {
    const uint64_t asked = before_ + mem_available_mib() / 2 / kPageMiB;
    if (auto raised = writer_->write(kPoolFile, std::to_string(asked) + "\n"); !raised.ok()) {
      std::printf("bench_start: the 2 MiB pool stays at %llu pages: %s\n", static_cast<unsigned long long>(before_),
                  raised.error().message.c_str());
    }
  }
  ~PoolRaise() { (void)writer_->write(kPoolFile, std::to_string(before_) + "\n"); }
  PoolRaise(const PoolRaise&) = delete;
  PoolRaise& operator=(const PoolRaise&) = delete;

 private:
  uint64_t before_;
  std::unique_ptr<SysfsWriter> writer_;
};

std::string read_file(const fs::path& file) {
  std::ifstream in(file, std::ios::binary);
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

// Waits for the guest's "up" line in `console` after byte `from`; the time it was seen.
Clock::time_point wait_up(const fs::path& console, std::size_t from) {
  const auto deadline = Clock::now() + kUpTimeout;
  while (Clock::now() < deadline) {
    const auto text = read_file(console);
    if (text.size() > from && text.find(hostagent::testing::kTestGuestUp, from) != std::string::npos) {
      return Clock::now();
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  fail("no \"up\" from the guest within 300 s; console: " + console.string());
}

// A name this program made, checked as a request's would be.
template <class Checked>
Checked checked(const std::string& text) {
  auto value = Checked::parse(text, "name");
  if (!value.ok()) fail(value.error().message);
  return std::move(value).value();
}

struct Arm {
  std::map<std::string, Samples> phases;  // the timeline's, then "boot" and "create->up"
  std::vector<std::string> order;         // phase names as first seen
  void add(const std::string& phase, double ms) {
    if (phases.count(phase) == 0) order.push_back(phase);
    phases[phase].ms.push_back(ms);
  }
};

// Domains an earlier run left (one that failed part way): destroyed and undefined by their prefix.
void sweep(virConnectPtr conn) {
  virDomainPtr* domains = nullptr;
  const int count = virConnectListAllDomains(conn, &domains, 0);
  for (int i = 0; i < count; ++i) {
    const std::string name = virDomainGetName(domains[i]);
    if (name.rfind(kPrefix, 0) == 0) {
      virDomainDestroy(domains[i]);
      virDomainUndefineFlags(domains[i], VIR_DOMAIN_UNDEFINE_NVRAM);
      std::printf("bench_start: removed %s, left by an earlier run\n", name.c_str());
    }
    virDomainFree(domains[i]);
  }
  std::free(domains);
}

// --connect: another libvirtd than the machine's (scripts/package.sh points it at its Debian 12
// root's, whose QEMU is 7.2); --scratch-dir: where the guest's files go, somewhere that libvirtd's
// QEMU can read them.
struct Options {
  int rounds = 3;
  std::string uri = "qemu:///system";
  fs::path scratch_parent = "/tmp";
};

Options parse_options(int argc, char** argv) {
  Options out;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--connect" && i + 1 < argc) {
      out.uri = argv[++i];
    } else if (arg == "--scratch-dir" && i + 1 < argc) {
      out.scratch_parent = argv[++i];
    } else {
      out.rounds = std::atoi(arg.c_str());
      if (out.rounds < 1) fail("ROUNDS must be a positive number, not '" + arg + "'");
    }
  }
  return out;
}

class StartBench {
 public:
  StartBench(fs::path scratch, const hostagent::testing::TestGuest& guest, uint64_t memory_mib, const std::string& uri)
      : scratch_(std::move(scratch)) {
    fs::create_directories(scratch_ / "templates");
    fs::create_directories(scratch_ / "console");
    write_template(guest, memory_mib, "1t", 1, 1);
    write_template(guest, memory_mib, "2t", 2, 1);
    write_template(guest, memory_mib, "2c", 1, 2);
    const fs::path config = scratch_ / "hostagent.yaml";
    std::ofstream(config) << "libvirt: {uri: \"" << uri << "\", domain_type: qemu}\nhost: {sysfs_root: /}\n"
                          << "templates: {directories: [\"" << (scratch_ / "templates").string() << "\"]}\n"
                          << "state_directory: " << (scratch_ / "state").string() << "\n"
                          << "console_log_directory: " << (scratch_ / "console").string() << "\n";
    auto loaded = config::load_config(config);
    if (!loaded.ok()) fail(loaded.error().message);
    auto parts = cli::assemble_parts(*loaded);
    if (!parts.ok()) fail(parts.error().message);
    auto service = daemon::start_service(std::move(parts).value());
    if (!service.ok()) fail(service.error().message);
    service_ = std::move(service).value();
    conn_ = virConnectOpen(uri.c_str());
    if (conn_ == nullptr) fail(std::string("virConnectOpen: ") + virGetLastErrorMessage());
  }
  ~StartBench() {
    if (conn_ != nullptr) virConnectClose(conn_);
  }
  StartBench(const StartBench&) = delete;
  StartBench& operator=(const StartBench&) = delete;

  // One create -> up through the daemon of the arm's template ("1t", "2t", "2c"), then its delete
  // (not timed).
  void daemon_run(Arm& arm, const std::string& key, int round) {
    const std::string name = kPrefix + key + "-" + std::to_string(round);
    const fs::path console = scratch_ / "console" / (name + ".log");
    service::CreateVmRequest request{.name = checked<VmName>(name),
                                     .template_name = checked<TemplateName>(template_name(key))};
    const auto start = Clock::now();
    auto begun = service_->begin_create(request);
    if (!begun.ok()) fail("create " + name + ": " + begun.error().message);
    auto ended = service_->wait(begun->id);
    if (!ended.ok() || ended->state != "succeeded") {
      fail("create " + name + " did not succeed" + (ended.ok() && ended->error ? ": " + ended->error->message : ""));
    }
    const auto up = wait_up(console, 0);
    // The guest's own phases reach the operation after it ended: kernel (the console's banner) and
    // up (the guest agent's first answer). They overlap "boot", which the libvirt arm has too.
    const auto timeline = guest_phases(begun->id);
    double phases_ms = 0;
    for (const auto& phase : timeline) {
      arm.add(phase.name, phase.seconds * 1000);
      if (phase.name != "kernel" && phase.name != "up") phases_ms += phase.seconds * 1000;
      if (phase.name == "launch") launch_detail_[key] = phase.detail;
    }
    const double total = std::chrono::duration<double, std::milli>(up - start).count();
    arm.add("boot", total - phases_ms);
    arm.add("create->up", total);
    if (key == "2t" && baseline_xml_.empty()) baseline_xml_ = baseline_xml(name);
    auto removal = service_->begin_delete(checked<VmName>(name));
    if (!removal.ok() || !service_->wait(removal->id).ok()) fail("delete " + name);
  }

  // The 2-thread arm's domain, defined and started with libvirt's C API directly.
  void libvirt_run(Arm& arm, int round) {
    if (baseline_xml_.empty()) return;  // the 2-thread arm has not run yet this round
    const std::string name = std::string(kPrefix) + "libvirt-" + std::to_string(round);
    const fs::path console = scratch_ / "console" / (name + ".log");
    std::string xml = baseline_xml_;
    replace_all(xml, "@NAME@", name);
    replace_all(xml, "@CONSOLE@", console.string());
    const auto start = Clock::now();
    // Validated against libvirt's schema, as the daemon's define is (virt/domain_calls).
    virDomainPtr domain = virDomainDefineXMLFlags(conn_, xml.c_str(), VIR_DOMAIN_DEFINE_VALIDATE);
    if (domain == nullptr) fail(std::string("virDomainDefineXML: ") + virGetLastErrorMessage());
    arm.add("define", ms_since(start));
    // Paused, then resumed, as the daemon starts a domain (virt/domain_calls).
    const auto launched = Clock::now();
    if (virDomainCreateWithFlags(domain, VIR_DOMAIN_START_PAUSED) != 0) {
      fail(std::string("virDomainCreateWithFlags: ") + virGetLastErrorMessage());
    }
    arm.add("launch", ms_since(launched));
    const auto resumed = Clock::now();
    if (virDomainResume(domain) != 0) fail(std::string("virDomainResume: ") + virGetLastErrorMessage());
    arm.add("resume", ms_since(resumed));
    const auto up = wait_up(console, 0);
    const double total = std::chrono::duration<double, std::milli>(up - start).count();
    arm.add("boot",
            total - arm.phases["define"].ms.back() - arm.phases["launch"].ms.back() - arm.phases["resume"].ms.back());
    arm.add("create->up", total);
    virDomainDestroy(domain);
    virDomainUndefineFlags(domain, VIR_DOMAIN_UNDEFINE_NVRAM);
    virDomainFree(domain);
    // The daemon counts a foreign domain's pinned CPUs as held until libvirt's events of its end
    // reach it: the next arm must not find them taken.
    const auto deadline = Clock::now() + std::chrono::seconds(30);
    while (!service_->usage().held.empty()) {
      if (Clock::now() > deadline) fail("the daemon still counts " + name + " 30 s after it was undefined");
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
  }

  const std::map<std::string, std::string>& launch_details() const { return launch_detail_; }

  // The stack the arms ran on: "QEMU 10.0.2, libvirt 11.3.0" (virConnectGetVersion and
  // virConnectGetLibVersion: the hypervisor's and the daemon's).
  std::string stack() const {
    unsigned long qemu = 0;
    unsigned long libvirt = 0;
    if (virConnectGetVersion(conn_, &qemu) != 0 || virConnectGetLibVersion(conn_, &libvirt) != 0) return "unknown";
    return "QEMU " + virt::Version::from_libvirt(qemu).text() + ", libvirt " +
           virt::Version::from_libvirt(libvirt).text();
  }

  // The operation's timeline once the daemon saw its guest up (at most 120 s after the console did).
  std::vector<service::TimelinePhase> guest_phases(const std::string& id) {
    const auto deadline = Clock::now() + std::chrono::seconds(120);
    for (;;) {
      const auto operation = service_->operation(id);
      if (!operation.ok()) fail("operation " + id + ": " + operation.error().message);
      if (!operation->timeline.empty() && operation->timeline.back().name == "up") return operation->timeline;
      if (Clock::now() > deadline) fail("the daemon did not see the guest of " + id + " up");
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
  }

 private:
  static std::string template_name(const std::string& key) { return "bench-start-" + key; }

  void write_template(const hostagent::testing::TestGuest& guest, uint64_t memory_mib, const std::string& key,
                      int threads, int cells) {
    const auto file = hostagent::testing::write_test_guest_template(scratch_ / "templates", template_name(key), guest);
    std::string yaml = read_file(file);
    const auto change = [&](const std::string& from, const std::string& to) {
      const auto at = yaml.find(from);
      if (at == std::string::npos) fail("the test guest's template has no \"" + from + "\" line to change");
      yaml.replace(at, from.size(), to);
    };
    change("memory: 1GiB\n",
           "memory: " + std::to_string(memory_mib) + "MiB\nallocation_threads: " + std::to_string(threads) + "\n");
    change("guest_numa: {cells: 1}\n", "guest_numa: {cells: " + std::to_string(cells) + "}\n");
    std::ofstream(file, std::ios::trunc) << yaml;
  }

  static void replace_all(std::string& text, const std::string& from, const std::string& to) {
    for (auto at = text.find(from); at != std::string::npos; at = text.find(from, at + to.size())) {
      text.replace(at, from.size(), to);
    }
  }

  // The daemon's domain as libvirt holds it, with its name, UUID, metadata and console log made
  // placeholders: the same guest, not hostagent's.
  std::string baseline_xml(const std::string& name) {
    virDomainPtr domain = virDomainLookupByName(conn_, name.c_str());
    if (domain == nullptr) fail("lookup " + name);
    char* text = virDomainGetXMLDesc(domain, VIR_DOMAIN_XML_INACTIVE);
    virDomainFree(domain);
    if (text == nullptr) fail("the XML of " + name);
    pugi::xml_document doc;
    doc.load_string(text);
    std::free(text);
    auto root = doc.child("domain");
    root.child("name").text().set("@NAME@");
    root.remove_child("uuid");
    root.remove_child("metadata");
    root.child("devices").child("serial").child("log").attribute("file").set_value("@CONSOLE@");
    std::ostringstream out;
    doc.save(out);
    return out.str();
  }

  fs::path scratch_;
  std::unique_ptr<service::VmService> service_;
  virConnectPtr conn_ = nullptr;
  std::string baseline_xml_;
  std::map<std::string, std::string> launch_detail_;
};

// The same memory in one cell (the 1-thread arm) and in two, one thread each.
void print_cells_table(const Arm& one, const Arm& cells) {
  std::printf("\n%-16s %14s %14s %8s\n", "phase (median)", "1 cell ms", "2 cells ms", "2c/1c");
  for (const char* phase : {"launch", "boot", "create->up"}) {
    if (one.phases.count(phase) == 0 || cells.phases.count(phase) == 0) continue;
    const double a = one.phases.at(phase).median();
    const double b = cells.phases.at(phase).median();
    std::printf("%-16s %14.1f %14.1f %8.2f\n", phase, a, b, a > 0 ? b / a : 0.0);
  }
}

void print_table(const Arm& one, const Arm& two, const Arm& libvirt) {
  std::printf("%-16s %14s %14s %8s %14s %10s\n", "phase (median)", "1 thread ms", "2 threads ms", "2t/1t", "libvirt ms",
              "2t/libvirt");
  for (const auto& phase : two.order) {
    const double a = one.phases.count(phase) != 0 ? one.phases.at(phase).median() : 0;
    const double b = two.phases.at(phase).median();
    const bool base = libvirt.phases.count(phase) != 0;
    const double c = base ? libvirt.phases.at(phase).median() : 0;
    std::printf("%-16s %14.1f %14.1f %8.2f", phase.c_str(), a, b, a > 0 ? b / a : 0.0);
    if (base) {
      std::printf(" %14.1f %10.2f\n", c, c > 0 ? b / c : 0.0);
    } else {
      std::printf(" %14s %10s\n", "-", "-");
    }
  }
}

}  // namespace

int run(int argc, char** argv) {
  const Options options = parse_options(argc, argv);
  const int rounds = options.rounds;
  virConnectPtr probe = virConnectOpen(options.uri.c_str());
  if (probe == nullptr) {
    std::printf("bench_start: SKIPPED: no libvirtd answers on %s (scripts/libvirtd.sh start)\n", options.uri.c_str());
    return 0;
  }
  sweep(probe);
  virConnectClose(probe);
  bench::ScratchDir scratch("bench-start", options.scratch_parent);
  fs::permissions(scratch.path(), fs::perms::owner_all | fs::perms::group_read | fs::perms::group_exec |
                                      fs::perms::others_read | fs::perms::others_exec);
  const auto guest = hostagent::testing::build_test_guest(scratch.path());
  if (!guest) {
    std::printf("bench_start: SKIPPED: the test guest cannot be built (see above)\n");
    return 0;
  }
  const PoolRaise pool;
  // The largest whole number of 64 MiB the free 2 MiB pages hold, keeping 32 pages for others.
  const uint64_t free_pages = read_number(kFreeFile);
  const uint64_t memory_mib = free_pages > 32 ? (free_pages - 32) * kPageMiB / 64 * 64 : 0;
  if (memory_mib < 256) fail("only " + std::to_string(free_pages) + " free 2 MiB pages: too few for a guest");
  std::printf(
      "bench_start: %d rounds; the test guest (2 vCPUs, one cell, or two of one vCPU) with %llu MiB in 2 MiB "
      "pages (%llu pages free), TCG; arms interleaved\n",
      rounds, static_cast<unsigned long long>(memory_mib), static_cast<unsigned long long>(free_pages));
  std::fflush(stdout);
  StartBench bench(scratch.path(), *guest, memory_mib, options.uri);
  std::printf("bench_start: on %s\n", bench.stack().c_str());
  Arm one;
  Arm two;
  Arm cells;
  Arm libvirt;
  for (int round = 0; round < rounds; ++round) {
    for (int k = 0; k < 4; ++k) {
      switch ((round + k) % 4) {
        case 0:
          bench.daemon_run(one, "1t", round);
          break;
        case 1:
          bench.daemon_run(two, "2t", round);
          break;
        case 2:
          bench.daemon_run(cells, "2c", round);
          break;
        default:
          bench.libvirt_run(libvirt, round);
          break;
      }
    }
    std::printf("bench_start: round %d of %d done\n", round + 1, rounds);
    std::fflush(stdout);
  }
  for (const auto& [key, detail] : bench.launch_details()) {
    std::printf("launch, %s arm: %s\n", key.c_str(), detail.c_str());
  }
  print_table(one, two, libvirt);
  print_cells_table(one, cells);
  std::printf("libvirt arm: %zu runs (the 2-thread arm's XML; its first round runs only once that arm has run)\n",
              libvirt.phases.count("create->up") != 0 ? libvirt.phases.at("create->up").ms.size() : 0);
  return 0;
}

int main(int argc, char** argv) {
  doctest::Context context;
  hostagent::bench::route_doctest_asserts<fail>(context);
  try {
    return run(argc, argv);
  } catch (const std::exception& error) {
    std::fprintf(stderr, "bench_start: %s\n", error.what());
    return 1;
  }
}
