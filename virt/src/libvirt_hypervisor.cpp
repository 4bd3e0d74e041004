// virt/libvirt_hypervisor: connect_libvirt, and what the Hypervisor delegates to its Connection.
#include "libvirt_hypervisor.hpp"

#include <utility>

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

namespace detail {

void LibvirtHypervisor::subscribe(DomainEventSink on_domain, ConnectionEventSink on_connection) {
  connection_->subscribe(std::move(on_domain), std::move(on_connection));
}

bool LibvirtHypervisor::connected() const {
  return connection_->connected();
}

}  // namespace detail
}  // namespace hostagent::virt
