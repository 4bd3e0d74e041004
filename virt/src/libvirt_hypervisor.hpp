// virt/libvirt_hypervisor: the Hypervisor over libvirt's C API. Its calls are spread over
// domain_calls.cpp and storage_calls.cpp; the connection they share lives in connection.hpp.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "connection.hpp"
#include "handles.hpp"
#include "hostagent/virt/hypervisor.hpp"

namespace hostagent::virt::detail {

class LibvirtHypervisor final : public Hypervisor {
 public:
  explicit LibvirtHypervisor(std::unique_ptr<Connection> connection) : connection_(std::move(connection)) {}

  void subscribe(DomainEventSink on_domain, ConnectionEventSink on_connection) override;
  bool connected() const override;

  Result<std::string> define(const std::string& domain_xml) override;
  Status start(const std::string& name) override;
  Status start_paused(const std::string& name) override;
  Status resume(const std::string& name) override;
  Status agent_ping(const std::string& name) override;
  Result<std::string> create_transient(const std::string& domain_xml) override;
  Status shutdown(const std::string& name) override;
  Status destroy(const std::string& name) override;
  Status reboot(const std::string& name) override;
  Status undefine(const std::string& name) override;

  Result<DomainSummary> lookup(const std::string& name) override;
  Result<std::vector<DomainSummary>> list() override;
  Result<std::vector<DomainStats>> all_stats() override;
  Result<std::string> domain_xml(const std::string& name) override;
  Result<StackVersions> versions() override;
  Result<std::unique_ptr<Console>> open_console(const std::string& name, bool force, ConsoleSinks sinks) override;

  Result<std::string> volume_path(const std::string& pool, const std::string& volume) override;
  Result<std::string> create_overlay(const std::string& pool, const std::string& volume,
                                     const std::string& backing_path) override;
  Status delete_volume(const std::string& pool, const std::string& volume) override;
  Result<std::vector<std::string>> list_volumes(const std::string& pool) override;

 private:
  std::unique_ptr<Connection> connection_;
};

// A domain by name: not_found ("WHAT: Domain not found: ...") when there is none.
Result<DomainPtr> find_domain(const ConnPtr& conn, const std::string& name, std::string_view what);

// Name, UUID, state, persistence and the metadata element in `metadata_namespace` (nullopt when the
// domain has none, or when the namespace is empty).
Result<DomainSummary> summarize(const ConnPtr& conn, virDomainPtr domain, const std::string& metadata_namespace,
                                std::string_view what);

DomainState map_state(int libvirt_state) noexcept;

}  // namespace hostagent::virt::detail
