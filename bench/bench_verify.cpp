// bench_verify [ROUNDS]: what `hostagentctl verify-guest` costs. For the Vela-2-like host's 2-GPU and
// 8-GPU shapes: the stand-in's boot, start to power-off, under the machine's libvirtd (QEMU TCG, the
// template's OVMF), against a bare baseline booted alternately in the same run: the same stand-in
// with its PCI tree taken out (no expander buses, ports, switches or devices; the same cells, kernel,
// initramfs and firmware). The ratio is what mirroring the host's PCIe tree adds to a boot. Then the
// in-process part (stand-in, reading the console, the check) against rendering the same guest.
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <pugixml.hpp>
#include <sstream>

#include "bench_support.hpp"
#include "hostagent/common/text_file.hpp"
#include "hostagent/program_support/install_paths.hpp"
#include "hostagent/verify/verify_guest.hpp"
#include "render_command.hpp"
#include "samples.hpp"
#include "scratch_dir.hpp"

namespace hostagent::bench {
namespace {

constexpr const char* kBench = "bench_verify";

// The stand-in without its PCI tree: pcie-root alone, no virtio-rng stand-ins.
std::string bare_of(const std::string& stand_in_xml, const std::string& name) {
  pugi::xml_document doc;
  if (!doc.load_string(stand_in_xml.c_str())) fail(kBench, "the stand-in does not parse");
  auto domain = doc.child("domain");
  domain.child("name").text().set(name.c_str());
  auto devices = domain.child("devices");
  std::vector<pugi::xml_node> gone;
  for (auto device : devices.children()) {
    const std::string model = device.attribute("model").value();
    if (std::string(device.name()) == "rng" ||
        (std::string(device.name()) == "controller" && model != "pcie-root" && model != "none")) {
      gone.push_back(device);
    }
  }
  for (auto device : gone) devices.remove_child(device);
  std::ostringstream out;
  doc.save(out);
  return out.str();
}

std::string read_console(const std::filesystem::path& file) {
  auto text = read_text_file(file);
  if (!text.ok()) fail(kBench, text.error().message);
  return std::move(*text);
}

// The check must pass on what was booted: a benchmark of a failing verification measures nothing.
verify::GuestView checked_view(const ctl::PlacedGuest& placed, const verify::StandIn& stand_in,
                               const std::filesystem::path& console) {
  auto view = verify::parse_guest_view(read_console(console));
  if (!view.ok()) fail(kBench, view.error().message);
  const auto check =
      verify::check_guest(verify::CheckInputs{placed.host, placed.placement, placed.rendered, stand_in}, *view);
  if (!check.ok()) fail(kBench, "the guest does not match: " + check.findings.front());
  return std::move(*view);
}

// make_stand_in + parse_guest_view + check_guest against render_guest of the same placement.
void run_in_process(const ctl::PlacedGuest& placed, const verify::StandInOptions& options, const std::string& console,
                    int rounds) {
  const double verify_us = median_us(rounds, 20, [&] {
    const auto stand_in = verify::make_stand_in(placed.rendered.domain_xml, options);
    const auto view = verify::parse_guest_view(console);
    if (!stand_in.ok() || !view.ok()) fail(kBench, "in-process verification failed");
    const auto check =
        verify::check_guest(verify::CheckInputs{placed.host, placed.placement, placed.rendered, *stand_in}, *view);
    if (!check.ok()) fail(kBench, "in-process check failed");
  });
  render::GuestOptions render_options;
  render_options.name = options.name;
  const double render_us = median_us(rounds, 20, [&] {
    if (!render::render_guest(placed.host, placed.shape, placed.placement, render_options).ok()) {
      fail(kBench, "render failed");
    }
  });
  std::printf("  in process: stand-in + console read + check %.0f us vs rendering the guest %.0f us: x%.2f\n",
              verify_us, render_us, verify_us / render_us);
}

double boot_ms(virt::Hypervisor& hypervisor, const std::string& name, const std::string& xml) {
  const auto booted = verify::boot_to_power_off(hypervisor, name, xml, std::chrono::seconds(300));
  if (!booted.ok()) fail(kBench, booted.error().message);
  return static_cast<double>(booted->count());
}

void run_shape(virt::Hypervisor& hypervisor, const std::string& shape, int rounds) {
  ctl::RenderArgs args;
  args.template_ref = shape;
  args.host.simulated = "vela2";
  args.name = "bench-verify-" + std::to_string(getpid());
  args.template_dirs = {program_support::shipped_template_dir()};
  std::ostringstream notes;
  const auto placed = ctl::place_and_render(args, notes);
  if (!placed.ok()) fail(kBench, placed.error().message);

  ScratchDir dir("verify", "/var/tmp");
  chmod(dir.path().c_str(), 0755);  // QEMU's user opens the kernel, initramfs and console log
  auto image = verify::build_guest_image(dir.path(), {}, verify::probe_init_script());
  if (!image.ok()) fail(kBench, image.error().message);
  verify::StandInOptions options;
  options.name = args.name;
  options.image = *image;
  options.console_log = dir.path() / "console.log";
  const auto stand_in = verify::make_stand_in(placed->rendered.domain_xml, options);
  if (!stand_in.ok()) fail(kBench, stand_in.error().message);
  const std::string bare_name = args.name + "-bare";
  const std::string bare = bare_of(stand_in->domain_xml, bare_name);

  Samples mirrored, baseline;
  for (int round = 0; round < rounds; ++round) {
    baseline.ms.push_back(boot_ms(hypervisor, bare_name, bare));
    mirrored.ms.push_back(boot_ms(hypervisor, args.name, stand_in->domain_xml));
  }
  checked_view(*placed, *stand_in, options.console_log);
  std::printf(
      "%s on vela2 (%zu guest devices, %zu cells): stand-in boot median %.1f s (p90 %.1f) vs bare %.1f s "
      "(p90 %.1f): x%.2f\n",
      shape.c_str(), stand_in->devices.size(), stand_in->cells.size(), mirrored.median() / 1000, mirrored.p90() / 1000,
      baseline.median() / 1000, baseline.p90() / 1000, mirrored.median() / baseline.median());
  run_in_process(*placed, options, read_console(options.console_log), 15);
}

}  // namespace
}  // namespace hostagent::bench

int main(int argc, char** argv) {
  namespace virt = hostagent::virt;
  const int rounds = argc > 1 ? std::max(1, std::atoi(argv[1])) : 3;
  auto hypervisor = virt::connect_libvirt(virt::LibvirtOptions{"qemu:///system", "", std::chrono::seconds(20)});
  if (!hypervisor.ok()) {
    std::printf("bench_verify: skipped: no libvirtd answers at qemu:///system (scripts/libvirtd.sh start): %s\n",
                hypervisor.error().message.c_str());
    return 0;
  }
  std::printf("bench_verify: %d round(s) per shape, stand-in and bare boots alternating\n", rounds);
  for (const char* shape : {"gx3-32x256x2h100", "gx3d-160x1792x8h100"})
    hostagent::bench::run_shape(**hypervisor, shape, rounds);
  return 0;
}
