// systemd/cpu_confinement: keeping the host's own processes off the VMs' CPUs. systemd
// sets AllowedCPUs= (the cpuset controller, systemd.resource-control(5)) on the units that hold
// every process outside the VMs (system.slice, user.slice, init.scope), through its D-Bus API:
// org.freedesktop.systemd1.Manager.SetUnitProperties(in s name, in b runtime, in a(sv) properties),
// org.freedesktop.systemd1(5). libvirt's VMs live in machine.slice, which stays as it is.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "hostagent/common/result.hpp"

namespace hostagent::systemd {

// The units confined, in the order they are set.
const std::vector<std::string>& host_process_units();

// AllowedCPUs as D-Bus carries it ("ay"): byte i bit j is CPU 8*i+j; as long as the highest CPU needs.
std::vector<uint8_t> cpu_bitmask(const std::vector<int>& cpus);

struct UnitConfinement {
  std::string unit;
  Status result;  // the D-Bus error, named, when systemd refused
};

// Sets AllowedCPUs=cpus on each of host_process_units() with runtime=true (until reboot: the
// daemon sets it again at every start, from its configuration). On the system bus (sd_bus_open_system,
// which honours $DBUS_SYSTEM_BUS_ADDRESS). Fails as a whole only when the bus cannot be reached;
// otherwise one result per unit. `cpus` must not be empty (the configuration check sees to it).
Result<std::vector<UnitConfinement>> confine_host_processes(const std::vector<int>& cpus);

}  // namespace hostagent::systemd
