// virt/libvirt_hypervisor: connect_libvirt, and what the Hypervisor delegates to its Connection.
#include "libvirt_hypervisor.hpp"

#include <utility>

#include "libvirt_error.hpp"

namespace hostagent::virt {

Result<std::unique_ptr<Hypervisor>> connect_libvirt(const LibvirtOptions& options) {
  if (options.uri.empty()) return Error{ErrorCode::invalid_argument, "libvirt URI is empty (e.g. qemu:///system)"};
  if (options.reconnect_interval.count() <= 0 || options.connect_timeout.count() < 0) {
    return Error{ErrorCode::invalid_argument,
                 "libvirt reconnect interval must be positive and connect timeout "
                 "not negative"};
  }
  // The event loop first: libvirt's remote driver only enables keepalive and events on connections
  // opened after an event loop implementation was registered.
  HA_TRY(auto loop, detail::EventLoop::acquire());
  auto connection = std::make_unique<detail::Connection>(options, std::move(loop));
  HA_TRY_STATUS(connection->open());
  return std::unique_ptr<Hypervisor>(std::make_unique<detail::LibvirtHypervisor>(std::move(connection)));
}

Version Version::from_libvirt(unsigned long packed) {
  return Version{static_cast<unsigned>(packed / 1000000), static_cast<unsigned>(packed / 1000 % 1000),
                 static_cast<unsigned>(packed % 1000)};
}

std::string Version::text() const {
  return std::to_string(major) + "." + std::to_string(minor) + "." + std::to_string(release);
}

namespace detail {

void LibvirtHypervisor::subscribe(DomainEventSink on_domain, ConnectionEventSink on_connection) {
  connection_->subscribe(std::move(on_domain), std::move(on_connection));
}

bool LibvirtHypervisor::connected() const {
  return connection_->connected();
}

Result<StackVersions> LibvirtHypervisor::versions() {
  const std::string what = "read libvirt's and the hypervisor's versions";
  HA_TRY(ConnPtr conn, connection_->get(what));
  unsigned long libvirt = 0;
  unsigned long hypervisor = 0;
  if (virConnectGetLibVersion(conn.get(), &libvirt) != 0 || virConnectGetVersion(conn.get(), &hypervisor) != 0) {
    return last_call_error(conn.get(), what);
  }
  return StackVersions{Version::from_libvirt(libvirt), Version::from_libvirt(hypervisor)};
}

}  // namespace detail
}  // namespace hostagent::virt
