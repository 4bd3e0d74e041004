// Test helper: the fake kernel's model of a PCI function's `rom` attribute (drivers/pci/pci-sysfs.c
// pci_write_rom and pci_read_rom): the attribute exists only for a function given an image; it reads
// as nothing until "1" is written to it (the kernel answers EINVAL; a reader sees no bytes either
// way), then as the image, and as nothing again after "0".
#pragma once

#include <map>
#include <memory>
#include <string>

#include "fake_kernel.hpp"

namespace hostagent::testing {

class FakeRoms {
 public:
  explicit FakeRoms(FakeKernel& kernel) : kernel_(kernel) {}
  // Gives the function (its bdf) a ROM with this image: its `rom` attribute appears, disabled.
  void set(const std::string& bdf, std::string image);
  bool enabled(const std::string& bdf) const { return enabled_.count(bdf) != 0; }

  Status on_write(const std::string& kernel_path, std::string_view value);

 private:
  FakeKernel& kernel_;
  std::map<std::string, std::string> images_;
  std::map<std::string, bool> enabled_;
};

// Registers the model for every /sys/bus/pci/devices/BDF/rom; the object it returns holds the images.
std::shared_ptr<FakeRoms> install_rom_model(FakeKernel& kernel);

}  // namespace hostagent::testing
