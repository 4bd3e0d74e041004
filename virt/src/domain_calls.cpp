// virt/domain_calls: define, start, stop, undefine and read domains. Stopping and undefining are
// idempotent (the daemon's rollback repeats them); everything else reports what libvirt refused.
#include <libvirt/virterror.h>

#include <pugixml.hpp>

#include <array>
#include <cstdlib>

#include "libvirt_error.hpp"
#include "libvirt_hypervisor.hpp"

namespace hostagent::virt::detail {
namespace {

// " NAME" from the XML's <name>, so a refused definition names its domain; empty when unreadable
// (libvirt's own parse error then says why).
std::string name_for_message(const std::string& domain_xml) {
  pugi::xml_document doc;
  if (!doc.load_buffer(domain_xml.data(), domain_xml.size())) return {};
  const std::string name = doc.child("domain").child("name").text().as_string();
  return name.empty() ? std::string() : " " + name;
}

// virDomainShutdown / virDomainDestroy. A domain that is not running is already where the caller
// wants it; drivers disagree on how they refuse one (QEMU: OPERATION_INVALID "domain is not
// running"; test: INTERNAL_ERROR), so the domain's state decides, not the error code.
Status stop_domain(const Connection& connection, const std::string& name, const std::string& what,
                   int (*stop)(virDomainPtr)) {
  HA_TRY(ConnPtr conn, connection.get(what));
  HA_TRY(DomainPtr domain, find_domain(conn, name, what));
  if (stop(domain.get()) == 0) return ok_status();
  const LibvirtError error = take_last_error();
  if (classify(error) != ErrorCode::unavailable && virDomainIsActive(domain.get()) == 0) return ok_status();
  return call_error(conn.get(), error, what);
}

// Flags a driver may not know, dropped one at a time from the end: the test driver refuses NVRAM
// and CHECKPOINTS_METADATA with VIR_ERR_INVALID_ARG ("unsupported flags"), QEMU takes them all.
constexpr std::array<unsigned, 5> kUndefineFlags{
    VIR_DOMAIN_UNDEFINE_MANAGED_SAVE | VIR_DOMAIN_UNDEFINE_SNAPSHOTS_METADATA | VIR_DOMAIN_UNDEFINE_NVRAM |
        VIR_DOMAIN_UNDEFINE_CHECKPOINTS_METADATA,
    VIR_DOMAIN_UNDEFINE_MANAGED_SAVE | VIR_DOMAIN_UNDEFINE_SNAPSHOTS_METADATA | VIR_DOMAIN_UNDEFINE_NVRAM,
    VIR_DOMAIN_UNDEFINE_MANAGED_SAVE | VIR_DOMAIN_UNDEFINE_SNAPSHOTS_METADATA,
    VIR_DOMAIN_UNDEFINE_MANAGED_SAVE,
    0,
};

Status undefine_domain(const ConnPtr& conn, virDomainPtr domain, const std::string& what) {
  for (const unsigned flags : kUndefineFlags) {
    if (virDomainUndefineFlags(domain, flags) == 0) return ok_status();
    const LibvirtError error = take_last_error();
    if (error.code == VIR_ERR_NO_DOMAIN) return ok_status();  // undefined by someone else meanwhile
    if (error.code != VIR_ERR_INVALID_ARG && error.code != VIR_ERR_NO_SUPPORT)
      return call_error(conn.get(), error, what);
    if (flags == 0) return call_error(conn.get(), error, what);
  }
  return ok_status();  // not reached: the last flags are 0
}

Result<std::string> uuid_of(const ConnPtr& conn, virDomainPtr domain, const std::string& what) {
  std::array<char, VIR_UUID_STRING_BUFLEN> uuid{};
  if (virDomainGetUUIDString(domain, uuid.data()) < 0) return last_call_error(conn.get(), what);
  return std::string(uuid.data());
}

Result<std::vector<DomainPtr>> all_domains(const ConnPtr& conn, const std::string& what) {
  virDomainPtr* raw = nullptr;
  const int count =
      virConnectListAllDomains(conn.get(), &raw, VIR_CONNECT_LIST_DOMAINS_ACTIVE | VIR_CONNECT_LIST_DOMAINS_INACTIVE);
  if (count < 0) return last_call_error(conn.get(), what);
  std::vector<DomainPtr> domains;
  domains.reserve(static_cast<std::size_t>(count));
  for (int i = 0; i < count; ++i) domains.emplace_back(raw[i]);
  std::free(raw);  // NOLINT(cppcoreguidelines-no-malloc): libvirt allocated the array
  return domains;
}

// virDomainCreate*'s refusal. QEMU refuses a running domain with OPERATION_INVALID, the test
// driver with INTERNAL_ERROR: the domain's state decides, and a running one is a conflict.
Status start_refused(const ConnPtr& conn, virDomainPtr domain, const LibvirtError& error, const std::string& what) {
  if (classify(error) != ErrorCode::unavailable && virDomainIsActive(domain) == 1) {
    discard_last_error();
    return Error{ErrorCode::conflict, what + ": " + error.message};
  }
  return call_error(conn.get(), error, what);
}

// A driver that does not know a flag refuses the call before doing anything, with INVALID_ARG
// "unsupported flags (0x...) in function ..." (virCheckFlags, src/internal.h).
bool refused_flags(const LibvirtError& error) {
  return error.code == VIR_ERR_INVALID_ARG && error.message.find("unsupported flags") != std::string::npos;
}

// The guest agent's guest-shutdown first, then the ACPI power button if the agent is absent or
// fails (qemuDomainShutdownFlags): a guest that ignores the button still powers off through its
// agent. The test driver takes no flags (testDomainShutdownFlags: virCheckFlags(0)).
int shutdown_by_agent_or_acpi(virDomainPtr domain) {
  if (virDomainShutdownFlags(domain, VIR_DOMAIN_SHUTDOWN_GUEST_AGENT | VIR_DOMAIN_SHUTDOWN_ACPI_POWER_BTN) == 0)
    return 0;
  const virErrorPtr error = virGetLastError();  // left in place for stop_domain to take
  if (error == nullptr || !refused_flags({error->code, error->domain, error->message ? error->message : ""})) return -1;
  discard_last_error();
  return virDomainShutdown(domain);
}

}  // namespace

Result<std::string> LibvirtHypervisor::define(const std::string& domain_xml) {
  const std::string what = "define domain" + name_for_message(domain_xml);
  HA_TRY(ConnPtr conn, connection_->get(what));
  // VALIDATE checks the XML against libvirt's schema: a misspelt element fails instead of vanishing.
  const DomainPtr domain(virDomainDefineXMLFlags(conn.get(), domain_xml.c_str(), VIR_DOMAIN_DEFINE_VALIDATE));
  if (!domain) return last_call_error(conn.get(), what);
  return uuid_of(conn, domain.get(), what);
}

Result<std::string> LibvirtHypervisor::create_transient(const std::string& domain_xml) {
  const std::string what = "create transient domain" + name_for_message(domain_xml);
  HA_TRY(ConnPtr conn, connection_->get(what));
  const DomainPtr domain(virDomainCreateXML(conn.get(), domain_xml.c_str(), VIR_DOMAIN_START_VALIDATE));
  if (!domain) return last_call_error(conn.get(), what);
  return uuid_of(conn, domain.get(), what);
}

Status LibvirtHypervisor::start(const std::string& name) {
  const std::string what = "start domain " + name;
  HA_TRY(ConnPtr conn, connection_->get(what));
  HA_TRY(DomainPtr domain, find_domain(conn, name, what));
  if (virDomainCreate(domain.get()) == 0) return ok_status();
  return start_refused(conn, domain.get(), take_last_error(), what);
}

Status LibvirtHypervisor::start_paused(const std::string& name) {
  const std::string what = "start domain " + name + " paused";
  HA_TRY(ConnPtr conn, connection_->get(what));
  HA_TRY(DomainPtr domain, find_domain(conn, name, what));
  if (virDomainCreateWithFlags(domain.get(), VIR_DOMAIN_START_PAUSED) == 0) return ok_status();
  const LibvirtError error = take_last_error();
  if (!refused_flags(error)) return start_refused(conn, domain.get(), error, what);
  // The test driver takes no start flags (testDomainCreateWithFlags: virCheckFlags(0)). Started
  // and suspended, its domain goes through the states and events of QEMU's paused start: started
  // (booted), suspended (paused), then resumed by resume().
  if (virDomainCreate(domain.get()) < 0) return start_refused(conn, domain.get(), take_last_error(), what);
  if (virDomainSuspend(domain.get()) < 0) return last_call_error(conn.get(), what);
  return ok_status();
}

Status LibvirtHypervisor::resume(const std::string& name) {
  const std::string what = "resume domain " + name;
  HA_TRY(ConnPtr conn, connection_->get(what));
  HA_TRY(DomainPtr domain, find_domain(conn, name, what));
  if (virDomainResume(domain.get()) == 0) return ok_status();
  const LibvirtError error = take_last_error();
  // Both drivers refuse a running domain ("domain is already running", "domain '%s' not paused"):
  // resumed already is what the caller wants.
  int state = VIR_DOMAIN_NOSTATE;
  if (classify(error) != ErrorCode::unavailable && virDomainGetState(domain.get(), &state, nullptr, 0) == 0 &&
      state == VIR_DOMAIN_RUNNING) {
    return ok_status();
  }
  discard_last_error();
  return call_error(conn.get(), error, what);
}

Status LibvirtHypervisor::shutdown(const std::string& name) {
  return stop_domain(*connection_, name, "shut down domain " + name, shutdown_by_agent_or_acpi);
}

Status LibvirtHypervisor::agent_ping(const std::string& name) {
  const std::string what = "ask the guest agent of domain " + name;
  HA_TRY(ConnPtr conn, connection_->get(what));
  HA_TRY(DomainPtr domain, find_domain(conn, name, what));
  // libvirt keeps it with the running domain (agentTimeout); guest-shutdown has its own 60 s
  // (qemuAgentShutdown: VIR_DOMAIN_QEMU_AGENT_COMMAND_SHUTDOWN).
  if (virDomainAgentSetResponseTimeout(domain.get(), static_cast<int>(kAgentTimeout.count()), 0) < 0) {
    const LibvirtError error = take_last_error();
    // The test driver has no agent timeout to set, and answers the command below itself.
    if (error.code != VIR_ERR_NO_SUPPORT) return call_error(conn.get(), error, what);
  }
  // guest-get-time, which every qemu-ga answers (qemuDomainGetTime: the agent's, not QEMU's clock).
  long long seconds = 0;
  unsigned int nanoseconds = 0;
  if (virDomainGetTime(domain.get(), &seconds, &nanoseconds, 0) < 0) {
    const LibvirtError error = take_last_error();
    // QEMU: "Guest agent is not responding: QEMU guest agent is not connected"
    // (VIR_ERR_AGENT_UNRESPONSIVE), or the answer did not come within the timeout (the same code).
    if (error.code == VIR_ERR_AGENT_UNRESPONSIVE) return Error{ErrorCode::unavailable, what + ": " + error.message};
    return call_error(conn.get(), error, what);
  }
  return ok_status();
}

Status LibvirtHypervisor::destroy(const std::string& name) {
  return stop_domain(*connection_, name, "destroy domain " + name, virDomainDestroy);
}

Status LibvirtHypervisor::reboot(const std::string& name) {
  const std::string what = "reboot domain " + name;
  HA_TRY(ConnPtr conn, connection_->get(what));
  HA_TRY(DomainPtr domain, find_domain(conn, name, what));
  if (virDomainReboot(domain.get(), 0) < 0) return last_call_error(conn.get(), what);
  return ok_status();
}

Status LibvirtHypervisor::undefine(const std::string& name) {
  const std::string what = "undefine domain " + name;
  HA_TRY(ConnPtr conn, connection_->get(what));
  auto domain = find_domain(conn, name, what);
  if (!domain.ok()) {
    if (domain.error().code == ErrorCode::not_found) return ok_status();
    return std::move(domain).error();
  }
  return undefine_domain(conn, domain->get(), what);
}

Result<DomainSummary> LibvirtHypervisor::lookup(const std::string& name) {
  const std::string what = "look up domain " + name;
  HA_TRY(ConnPtr conn, connection_->get(what));
  HA_TRY(DomainPtr domain, find_domain(conn, name, what));
  return summarize(conn, domain.get(), connection_->options().metadata_namespace, what);
}

Result<std::vector<DomainSummary>> LibvirtHypervisor::list() {
  const std::string what = "list domains";
  HA_TRY(ConnPtr conn, connection_->get(what));
  HA_TRY(std::vector<DomainPtr> domains, all_domains(conn, what));
  std::vector<DomainSummary> summaries;
  summaries.reserve(domains.size());
  for (const DomainPtr& domain : domains) {
    const char* name = virDomainGetName(domain.get());
    auto summary = summarize(conn, domain.get(), connection_->options().metadata_namespace,
                             what + ": domain " + (name != nullptr ? name : "?"));
    if (summary.ok()) {
      summaries.push_back(std::move(summary).value());
    } else if (summary.error().code != ErrorCode::not_found) {  // not_found: undefined while we listed
      return std::move(summary).error();
    }
  }
  return summaries;
}

Result<std::string> LibvirtHypervisor::domain_xml(const std::string& name) {
  const std::string what = "read the XML of domain " + name;
  HA_TRY(ConnPtr conn, connection_->get(what));
  HA_TRY(DomainPtr domain, find_domain(conn, name, what));
  // Without VIR_DOMAIN_XML_INACTIVE: the live definition of a running domain, else the persistent one.
  char* xml = virDomainGetXMLDesc(domain.get(), 0);
  if (xml == nullptr) return last_call_error(conn.get(), what);
  return take_string(xml);
}

}  // namespace hostagent::virt::detail
