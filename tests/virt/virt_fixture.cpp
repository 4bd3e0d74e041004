// Shared by the virt suites: see virt_fixture.hpp.
#include "virt_fixture.hpp"

#include <unistd.h>

#include <doctest/doctest.h>
#include <algorithm>
#include <pugixml.hpp>
#include <sstream>

namespace hostagent::testing {

std::string domain_xml(const TestDomain& spec) {
  pugi::xml_document doc;
  pugi::xml_node domain = doc.append_child("domain");
  domain.append_attribute("type").set_value(spec.type.c_str());
  domain.append_child("name").text().set(spec.name.c_str());
  pugi::xml_node memory = domain.append_child("memory");
  memory.append_attribute("unit").set_value("MiB");
  memory.text().set(spec.memory_mib);
  domain.append_child("vcpu").text().set(1);
  pugi::xml_node os_type = domain.append_child("os").append_child("type");
  os_type.append_attribute("arch").set_value("x86_64");
  if (!spec.machine.empty()) os_type.append_attribute("machine").set_value(spec.machine.c_str());
  os_type.text().set("hvm");
  domain.append_child("on_poweroff").text().set("destroy");
  if (!spec.template_name.empty()) {
    pugi::xml_node vm = domain.append_child("metadata").append_child("hostagent:vm");
    vm.append_attribute("xmlns:hostagent").set_value(kMetadataNamespace);
    vm.append_child("hostagent:template").append_attribute("name").set_value(spec.template_name.c_str());
  }
  std::ostringstream out;
  doc.save(out, "  ", pugi::format_indent | pugi::format_no_declaration);
  return out.str();
}

std::unique_ptr<virt::Hypervisor> connect_hypervisor(const std::string& uri,
                                                     std::chrono::milliseconds reconnect_interval) {
  virt::LibvirtOptions options;
  options.uri = uri;
  options.metadata_namespace = kMetadataNamespace;
  options.connect_timeout = std::chrono::seconds(60);
  options.reconnect_interval = reconnect_interval;
  auto hypervisor = virt::connect_libvirt(options);
  REQUIRE_MESSAGE(hypervisor.ok(), hypervisor.error().message);
  return std::move(hypervisor).value();
}

std::string unique_name(const std::string& tag) {
  return "hostagent-virt-" + tag + "-" + std::to_string(getpid());
}

EventRecorder::EventRecorder() : state_(std::make_shared<State>()) {}

void EventRecorder::attach(virt::Hypervisor& hypervisor) {
  // The sinks hold the state, not the recorder: events may arrive while a test unwinds.
  hypervisor.subscribe(
      [state = state_](const virt::DomainEvent& event) {
        {
          const std::lock_guard lock(state->mutex);
          state->domain.push_back(event);
        }
        state->cv.notify_all();
      },
      [state = state_](virt::ConnectionEvent event) {
        {
          const std::lock_guard lock(state->mutex);
          state->connection.push_back(event);
        }
        state->cv.notify_all();
      });
}

std::optional<virt::DomainEvent> EventRecorder::wait_domain(const std::string& name, virt::DomainEventKind kind) {
  std::unique_lock lock(state_->mutex);
  std::optional<virt::DomainEvent> found;
  state_->cv.wait_for(lock, kEventTimeout, [&] {
    const auto it = std::find_if(state_->domain.begin(), state_->domain.end(),
                                 [&](const virt::DomainEvent& e) { return e.name == name && e.kind == kind; });
    if (it != state_->domain.end()) found = *it;
    return found.has_value();
  });
  return found;
}

bool EventRecorder::wait_connection(virt::ConnectionEvent event, std::chrono::seconds timeout) {
  std::unique_lock lock(state_->mutex);
  return state_->cv.wait_for(lock, timeout, [&] {
    return std::find(state_->connection.begin(), state_->connection.end(), event) != state_->connection.end();
  });
}

std::vector<virt::DomainEvent> EventRecorder::domain_events(const std::string& name) const {
  const std::lock_guard lock(state_->mutex);
  std::vector<virt::DomainEvent> out;
  for (const auto& e : state_->domain) {
    if (e.name == name) out.push_back(e);
  }
  return out;
}

}  // namespace hostagent::testing
