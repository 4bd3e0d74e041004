// verify: the proof that a rendered guest sees its host's topology. The module's entry
// point: from a placement and its rendered domain, builds the stand-in (stand_in.hpp) and the probe
// guest (guest_image.hpp), boots it through libvirt until it powers off, reads what it saw
// (guest_view.hpp) and holds that against the host and the placement (guest_check.hpp). While it
// runs, its QEMU process is read from this machine's /proc and held against the ties the stand-in
// kept: pinning and per-cell memory binding (qemu_process.hpp).
#pragma once

#include <chrono>
#include <filesystem>
#include <functional>
#include <string>

#include "hostagent/common/result.hpp"
#include "hostagent/numa/host_model.hpp"
#include "hostagent/numa/placement.hpp"
#include "hostagent/render/guest_renderer.hpp"
#include "hostagent/verify/guest_check.hpp"
#include "hostagent/verify/guest_image.hpp"
#include "hostagent/verify/guest_view.hpp"
#include "hostagent/verify/qemu_process.hpp"
#include "hostagent/verify/stand_in.hpp"
#include "hostagent/virt/hypervisor.hpp"

namespace hostagent::verify {

struct VerifyRequest {
  const numa::HostModel& host;
  const numa::Placement& placement;
  const render::RenderedGuest& rendered;
  std::string domain_name;         // the stand-in's; must not exist in libvirt
  std::filesystem::path work_dir;  // exists, QEMU's user can enter it: the image and console log
  GuestImageSources image;
  StandInOptions stand_in;                   // name, image and console_log are filled in here
  std::chrono::seconds timeout{300};         // from start to power-off
  std::filesystem::path machine_root = "/";  // where this machine's /proc is read
};

struct VerifyReport {
  StandIn stand_in;
  GuestView view;
  GuestCheck check;
  TiesCheck ties;                                   // the running QEMU process against the stand-in's ties
  std::chrono::milliseconds start_to_power_off{0};  // from the create call to libvirt's stop event
  std::filesystem::path console_log;
  bool ok() const { return check.ok() && ties.findings.empty(); }
};

// Starts domain_xml as a transient domain and waits for libvirt's stop event; returns the time from
// the create call to it. Past `timeout` the domain is destroyed and the result is an error.
// `running`, when given, is called once the domain runs, before the wait. What verify_guest boots
// with, and what bench_verify times a bare baseline with.
Result<std::chrono::milliseconds> boot_to_power_off(virt::Hypervisor& hypervisor, const std::string& name,
                                                    const std::string& domain_xml, std::chrono::seconds timeout,
                                                    const std::function<void()>& running = {});

// Errors are about the run (no kernel, libvirt refused the stand-in, the guest never powered off, it
// printed no view); a guest that booted and saw something else is a report with findings.
Result<VerifyReport> verify_guest(virt::Hypervisor& hypervisor, const VerifyRequest& request);

}  // namespace hostagent::verify
