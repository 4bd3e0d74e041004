// Test helper: the fake `rom` attribute (see fake_rom.hpp).
#include "fake_rom.hpp"

#include <cerrno>

namespace hostagent::testing {
namespace {

const std::string kRomDevices = "/sys/bus/pci/devices/";

std::string rom_bdf_of(const std::string& kernel_path) {
  const auto start = kRomDevices.size();
  return kernel_path.substr(start, kernel_path.find('/', start) - start);
}

}  // namespace

void FakeRoms::set(const std::string& bdf, std::string image) {
  images_[bdf] = std::move(image);
  enabled_.erase(bdf);
  kernel_.store(kRomDevices + bdf + "/rom", "");
}

// pci_write_rom: "0" disables, anything else enables; a function without a ROM has no attribute to
// write (the tests never write one: read_expansion_rom looks for it first).
Status FakeRoms::on_write(const std::string& kernel_path, std::string_view value) {
  const std::string bdf = rom_bdf_of(kernel_path);
  const auto image = images_.find(bdf);
  if (image == images_.end()) return kernel_.refuse(ENOENT, kernel_path, value);
  if (value == "0" || value == "0\n") {
    enabled_.erase(bdf);
    kernel_.store(kernel_path, "");
  } else {
    enabled_[bdf] = true;
    kernel_.store(kernel_path, image->second);
  }
  return ok_status();
}

std::shared_ptr<FakeRoms> install_rom_model(FakeKernel& kernel) {
  auto roms = std::make_shared<FakeRoms>(kernel);
  kernel.model(kRomDevices + "[^/]+/rom", [roms](FakeKernel&, const std::string& path, std::string_view value) {
    return roms->on_write(path, value);
  });
  return roms;
}

}  // namespace hostagent::testing
