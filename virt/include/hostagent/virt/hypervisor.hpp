// virt: the hypervisor as the daemon sees it. One interface over libvirt's C API, so the
// daemon's operations never touch a virConnectPtr and tests can count what reached libvirt.
// libvirt errors (virErrorPtr) are translated into Result here and nowhere else.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "hostagent/common/result.hpp"

namespace hostagent::virt {

enum class DomainState { running, paused, shutting_down, shut_off, crashed, suspended, other };
std::string_view to_string(DomainState state) noexcept;

// A version as libvirt gives them (major * 1,000,000 + minor * 1,000 + release), split.
struct Version {
  unsigned major = 0;
  unsigned minor = 0;
  unsigned release = 0;
  static Version from_libvirt(unsigned long packed);
  std::string text() const;                          // "10.0.2"
  auto operator<=>(const Version&) const = default;  // NOLINT(modernize-use-nullptr): clang-tidy 14 misreads <=>
};

// The libvirt daemon that answers and the hypervisor it drives.
struct StackVersions {
  Version libvirt;  // virConnectGetLibVersion: the daemon's, over a remote connection
  Version qemu;     // virConnectGetVersion: the QEMU binary's (the test driver reports its own)
};

struct DomainSummary {
  std::string name;
  std::string uuid;
  DomainState state = DomainState::other;
  bool persistent = false;
  // The domain's metadata element in the namespace given at connect, as XML text; nullopt when the
  // domain has none (a domain hostagent did not make).
  std::optional<std::string> metadata;
};

// agent_connected / agent_disconnected: the guest opened or closed the QEMU guest agent's channel
// (VIR_DOMAIN_EVENT_ID_AGENT_LIFECYCLE); the others are lifecycle events (VIR_DOMAIN_EVENT_ID_LIFECYCLE).
enum class DomainEventKind {
  defined,
  undefined,
  started,
  suspended,
  resumed,
  stopped,
  shutdown,
  crashed,
  agent_connected,
  agent_disconnected,
  other
};
std::string_view to_string(DomainEventKind kind) noexcept;

struct DomainEvent {
  std::string name;
  std::string uuid;
  DomainEventKind kind = DomainEventKind::other;
  // libvirt's detail worded: "destroyed", "shutdown", "crashed", "failed", "booted", ...; for the
  // agent's: "domain started" (found connected as QEMU started or libvirtd reconnected), "channel"
  // (the guest opened or closed it).
  std::string detail;
};

enum class ConnectionEvent { connected, lost };

// One domain's figures from virConnectGetAllDomainStats, as far as its driver reports them (QEMU:
// all; libvirt's test driver: the state alone). Counters are since the domain's QEMU started.
struct BlockStats {
  std::string name;  // the guest's target ("vda")
  uint64_t read_bytes = 0, write_bytes = 0, read_requests = 0, write_requests = 0;
  bool operator==(const BlockStats&) const = default;
};
struct NetStats {
  std::string name;  // the host's interface ("vnet3")
  uint64_t rx_bytes = 0, tx_bytes = 0, rx_packets = 0, tx_packets = 0;
  bool operator==(const NetStats&) const = default;
};
struct DomainStats {
  std::string name;
  DomainState state = DomainState::other;
  std::optional<uint64_t> cpu_time_ns;      // cpu.time: every vCPU and QEMU's own threads
  std::optional<uint64_t> vcpus;            // vcpu.current
  std::optional<uint64_t> balloon_kib;      // balloon.current: what the guest has now
  std::optional<uint64_t> balloon_max_kib;  // balloon.maximum
  std::optional<uint64_t> rss_kib;          // balloon.rss: QEMU's resident set
  std::vector<BlockStats> blocks;
  std::vector<NetStats> nets;
  bool operator==(const DomainStats&) const = default;
};

// A typed parameter of a stats record, as libvirt hands it (virTypedParameter): the field's name
// and its value; strings for names, numbers for the rest.
struct StatField {
  std::string field;
  std::variant<uint64_t, int64_t, double, std::string> value;
};
// The record's fields read into DomainStats (libvirt's documented names: state.state, cpu.time,
// vcpu.current, balloon.*, block.N.*, net.N.*); fields it does not know are skipped, as a newer
// libvirt adds them. Pure, for its tests.
DomainStats domain_stats_of(std::string name, const std::vector<StatField>& fields);

// The longest agent_ping waits for the guest agent's answer (libvirt's default is forever,
// VIR_DOMAIN_AGENT_RESPONSE_TIMEOUT_BLOCK).
inline constexpr std::chrono::seconds kAgentTimeout{5};

// What an open serial console tells its user, on libvirt's event thread: each must be quick, and
// none may call back into the Hypervisor or the Console (a Console is destroyed elsewhere).
struct ConsoleSinks {
  std::function<void(std::string_view bytes)> output;  // what the guest wrote, as it comes
  // Once, when the console ends: the guest stopped, another client forced it open, libvirtd went.
  std::function<void(const std::string& reason)> ended;
  std::function<void()> writable;  // input that was queued has gone to the guest: send() has room again
  // Once the Console is destroyed and libvirt has let go of its stream (the only sink called after
  // the destructor): from then on, an open without `force` finds the console free.
  std::function<void()> released;
};

// The most input a Console queues for the guest before send() takes no more (a guest that does not
// read its serial port holds this much of its user's typing, then the user waits).
inline constexpr std::size_t kConsoleInputBytes = std::size_t{64} << 10U;

// A domain's serial console, open on a non-blocking stream (virDomainOpenConsole): the guest's
// output reaches the sinks as it comes, whatever its user does, so the guest never waits on them.
class Console {
 public:
  virtual ~Console() = default;  // closes the stream (virStreamAbort); the guest is untouched
  // Queues bytes for the guest; returns how many it took (0 once ended or full). Never blocks.
  virtual std::size_t send(std::string_view bytes) = 0;
};

// Called on libvirt's event thread: must be quick and must not call back into the Hypervisor.
using DomainEventSink = std::function<void(const DomainEvent&)>;
using ConnectionEventSink = std::function<void(ConnectionEvent)>;

// Every call blocks until libvirt answers. Callers are operation threads, never a network loop.
// Every call is safe from any thread. When the connection is down, calls fail with
// ErrorCode::unavailable (and the implementation keeps reconnecting in the background).
class Hypervisor {
 public:
  virtual ~Hypervisor() = default;

  // Sinks replace the previous ones; events from before the call are not replayed.
  virtual void subscribe(DomainEventSink on_domain, ConnectionEventSink on_connection) = 0;
  virtual bool connected() const = 0;

  // Defines (or redefines) a persistent domain; returns its UUID. The metadata inside the XML is
  // written with the definition, in one step.
  virtual Result<std::string> define(const std::string& domain_xml) = 0;
  virtual Status start(const std::string& name) = 0;
  // Starts the domain with its vCPUs stopped (VIR_DOMAIN_START_PAUSED): returns once QEMU runs with
  // the guest's memory allocated and pinned and its devices attached, before the guest's first
  // instruction, so a caller can time QEMU's start apart from the guest's. resume() runs it.
  virtual Status start_paused(const std::string& name) = 0;
  // Runs a paused domain's vCPUs (virDomainResume). Already running: ok.
  virtual Status resume(const std::string& name) = 0;
  // A command the guest agent must answer, waited for at most kAgentTimeout: ok means the agent in
  // the guest runs and answers. unavailable when it is not connected or did not answer in time.
  virtual Status agent_ping(const std::string& name) = 0;
  // Starts a domain that exists only while it runs (virDomainCreateXML): once it stops, libvirt
  // forgets it, so a caller that dies leaves no definition behind. Returns its UUID.
  virtual Result<std::string> create_transient(const std::string& domain_xml) = 0;
  // Asks the guest to power off: through its guest agent when one answers, else the ACPI power
  // button. Returns once asked, not once off. Not running: ok.
  virtual Status shutdown(const std::string& name) = 0;
  // Pulls the plug. Not running: ok.
  virtual Status destroy(const std::string& name) = 0;
  virtual Status reboot(const std::string& name) = 0;
  // Removes the definition with its NVRAM and managed save. Not defined: ok.
  virtual Status undefine(const std::string& name) = 0;

  // ErrorCode::not_found when no domain has that name.
  virtual Result<DomainSummary> lookup(const std::string& name) = 0;
  virtual Result<std::vector<DomainSummary>> list() = 0;
  // Every domain's figures in one call (virConnectGetAllDomainStats: state, CPU, vCPUs, balloon,
  // block and interface counters), never one call per domain.
  virtual Result<std::vector<DomainStats>> all_stats() = 0;
  // The live XML of a running domain, the persistent one otherwise.
  virtual Result<std::string> domain_xml(const std::string& name) = 0;
  // What the host runs: what a host check holds each template's needs against.
  virtual Result<StackVersions> versions() = 0;
  // The running domain's first serial console (virDomainOpenConsole). Without `force`, a console
  // another client holds is ErrorCode::conflict; with it, that client's stream is ended (libvirt's
  // VIR_DOMAIN_CONSOLE_FORCE). A domain not running: ErrorCode::conflict.
  virtual Result<std::unique_ptr<Console>> open_console(const std::string& name, bool force, ConsoleSinks sinks) = 0;

  // Where a volume of that name in `pool` lies, before it exists, so a guest can be rendered before
  // anything is made: the pool's target path and the name, which is what libvirt gives a new volume
  // in a dir, fs or netfs pool (storage_backend_fs.c, and the test driver's pools). Other pool types
  // name volumes otherwise: unsupported, saying so.
  virtual Result<std::string> volume_path(const std::string& pool, const std::string& volume) = 0;
  // A qcow2 volume in `pool` backed by `backing_path` (copy-on-write): a VM's own disk over a shared
  // image. Returns the volume's path. An existing volume of that name is ErrorCode::conflict.
  virtual Result<std::string> create_overlay(const std::string& pool, const std::string& volume,
                                             const std::string& backing_path) = 0;
  // Absent volume: ok.
  virtual Status delete_volume(const std::string& pool, const std::string& volume) = 0;
  virtual Result<std::vector<std::string>> list_volumes(const std::string& pool) = 0;
};

struct LibvirtOptions {
  std::string uri;                 // "qemu:///system", "test:///default", ...
  std::string metadata_namespace;  // the URI of the metadata element DomainSummary::metadata reads
  // The first connect retries until this long has passed: libvirtd's first start can spend several
  // seconds probing QEMU before it answers.
  std::chrono::milliseconds connect_timeout{30000};
  // After the connection is lost, reconnect attempts are this far apart.
  std::chrono::milliseconds reconnect_interval{1000};
  // libvirt's keepalive: a libvirtd that stops answering is declared lost after interval x count.
  int keepalive_interval_s = 5;
  int keepalive_count = 3;
};

// Connects (retrying up to connect_timeout) and starts libvirt's event loop on its own thread.
// ErrorCode::unavailable when libvirtd never answered; invalid_argument for a malformed URI.
Result<std::unique_ptr<Hypervisor>> connect_libvirt(const LibvirtOptions& options);

}  // namespace hostagent::virt
