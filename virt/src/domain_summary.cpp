// virt/domain_summary: a domain as DomainSummary (state, persistence, hostagent's metadata element).
#include <libvirt/virterror.h>

#include <array>

#include "libvirt_error.hpp"
#include "libvirt_hypervisor.hpp"

namespace hostagent::virt {

std::string_view to_string(DomainState state) noexcept {
  switch (state) {
    case DomainState::running:
      return "running";
    case DomainState::paused:
      return "paused";
    case DomainState::shutting_down:
      return "shutting_down";
    case DomainState::shut_off:
      return "shut_off";
    case DomainState::crashed:
      return "crashed";
    case DomainState::suspended:
      return "suspended";
    case DomainState::other:
      return "other";
  }
  return "other";
}

namespace detail {
namespace {

// nullopt for VIR_ERR_NO_DOMAIN_METADATA: a domain hostagent did not make has no element there.
Result<std::optional<std::string>> read_metadata(const ConnPtr& conn, virDomainPtr domain,
                                                 const std::string& metadata_namespace, std::string_view what) {
  if (metadata_namespace.empty()) return std::optional<std::string>();
  // AFFECT_CURRENT reads the live definition of a running domain and the persistent one otherwise.
  char* text =
      virDomainGetMetadata(domain, VIR_DOMAIN_METADATA_ELEMENT, metadata_namespace.c_str(), VIR_DOMAIN_AFFECT_CURRENT);
  if (text != nullptr) return std::optional<std::string>(take_string(text));
  const LibvirtError error = take_last_error();
  if (error.code == VIR_ERR_NO_DOMAIN_METADATA) return std::optional<std::string>();
  return call_error(conn.get(), error, std::string(what) + ": read metadata " + metadata_namespace);
}

}  // namespace

DomainState map_state(int libvirt_state) noexcept {
  switch (libvirt_state) {
    case VIR_DOMAIN_RUNNING:
    case VIR_DOMAIN_BLOCKED:  // running, waiting on a resource (Xen's notion)
      return DomainState::running;
    case VIR_DOMAIN_PAUSED:
      return DomainState::paused;
    case VIR_DOMAIN_SHUTDOWN:
      return DomainState::shutting_down;
    case VIR_DOMAIN_SHUTOFF:
      return DomainState::shut_off;
    case VIR_DOMAIN_CRASHED:
      return DomainState::crashed;
    case VIR_DOMAIN_PMSUSPENDED:
      return DomainState::suspended;
    default:
      return DomainState::other;
  }
}

Result<DomainPtr> find_domain(const ConnPtr& conn, const std::string& name, std::string_view what) {
  DomainPtr domain(virDomainLookupByName(conn.get(), name.c_str()));
  if (!domain) return last_call_error(conn.get(), what);
  return domain;
}

Result<DomainSummary> summarize(const ConnPtr& conn, virDomainPtr domain, const std::string& metadata_namespace,
                                std::string_view what) {
  DomainSummary summary;
  const char* name = virDomainGetName(domain);
  summary.name = name != nullptr ? name : "";
  std::array<char, VIR_UUID_STRING_BUFLEN> uuid{};
  if (virDomainGetUUIDString(domain, uuid.data()) < 0) return last_call_error(conn.get(), what);
  summary.uuid = uuid.data();
  int state = VIR_DOMAIN_NOSTATE;
  int reason = 0;
  if (virDomainGetState(domain, &state, &reason, 0) < 0) return last_call_error(conn.get(), what);
  summary.state = map_state(state);
  const int persistent = virDomainIsPersistent(domain);
  if (persistent < 0) return last_call_error(conn.get(), what);
  summary.persistent = persistent == 1;
  HA_TRY(summary.metadata, read_metadata(conn, domain, metadata_namespace, what));
  return summary;
}

}  // namespace detail
}  // namespace hostagent::virt
