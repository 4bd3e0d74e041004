// The guest side of the real-kernel harness: helpers over the live tree (see guest_host.hpp).
#include "guest_host.hpp"

#include <doctest/doctest.h>
#include <fcntl.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <thread>

namespace hostagent::testing::guest {
namespace {

namespace fs = std::filesystem;

std::string hex4(uint16_t value) {
  char text[8];
  std::snprintf(text, sizeof text, "%04x", value);
  return text;
}

}  // namespace

const SysfsRoot& sysfs() {
  static const SysfsRoot root = SysfsRoot::open("/").value();
  return root;
}

SysfsWriter& writer() {
  static const std::unique_ptr<SysfsWriter> real = make_sysfs_writer("/");
  return *real;
}

std::string pci_path(const PciAddress& device, const std::string& attribute) {
  std::string path = "/sys/bus/pci/devices/" + device.to_string();
  return attribute.empty() ? path : path + "/" + attribute;
}

std::vector<PciAddress> pci_functions(uint16_t vendor, uint16_t device) {
  std::vector<PciAddress> found;
  const auto names = sysfs().list("/sys/bus/pci/devices", false).value();
  for (const auto& name : names) {
    const auto address = PciAddress::parse(name).value();
    if (sysfs().read(pci_path(address, "vendor")).value() == "0x" + hex4(vendor) &&
        sysfs().read(pci_path(address, "device")).value() == "0x" + hex4(device)) {
      found.push_back(address);
    }
  }
  return found;
}

std::optional<std::string> driver_of(const PciAddress& device) {
  return sysfs().read_link_name(pci_path(device, "driver")).value();
}

int iommu_group_of(const PciAddress& device) {
  const auto group = sysfs().read_link_name(pci_path(device, "iommu_group")).value();
  return group ? std::stoi(*group) : -1;
}

std::vector<PciAddress> group_members(int group) {
  const std::string dir = "/sys/kernel/iommu_groups/" + std::to_string(group) + "/devices";
  const auto names = sysfs().list(dir, false).value();
  std::vector<PciAddress> members;
  members.reserve(names.size());
  for (const auto& name : names) members.push_back(PciAddress::parse(name).value());
  return members;
}

std::optional<PciAddress> parent_bridge(const PciAddress& device) {
  // /sys/bus/pci/devices/B links into /sys/devices/pci0000:20/0000:20:00.0/.../B: the directory
  // above B is its bridge, or the root bus "pci0000:20".
  const fs::path real = fs::canonical(pci_path(device));
  auto parent = PciAddress::parse(real.parent_path().filename().string());
  if (!parent) return std::nullopt;
  return *parent;
}

std::optional<int> ext_capability(const PciAddress& device, int cap_id) {
  const std::string config = sysfs().read_binary(pci_path(device, "config")).value();
  REQUIRE_MESSAGE(config.size() == 4096, pci_path(device, "config")
                                             << " is " << config.size() << " bytes: not a PCIe function, or not root");
  const auto dword = [&](int at) {
    uint32_t value = 0;
    for (int i = 3; i >= 0; --i) value = (value << 8) | static_cast<uint8_t>(config[at + i]);
    return value;
  };
  // PCIe Base Spec 7.6: extended capabilities are a list from 0x100, each header
  // ID (16 bits), version (4), next offset (12); a zero header ends an empty list.
  for (int at = 0x100, hops = 0; at >= 0x100 && hops < 480; ++hops) {
    const uint32_t header = dword(at);
    if (header == 0 || header == 0xffffffff) break;
    if (static_cast<int>(header & 0xffff) == cap_id) return at;
    at = static_cast<int>(header >> 20) & 0xffc;
  }
  return std::nullopt;
}

uint16_t read_config16(const PciAddress& device, int offset) {
  const std::string path = pci_path(device, "config");
  const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  REQUIRE_MESSAGE(fd >= 0, "open " << path);
  uint8_t bytes[2] = {0, 0};
  const ssize_t n = pread(fd, bytes, 2, offset);
  close(fd);
  REQUIRE_MESSAGE(n == 2, "pread " << path << " at " << offset);
  return static_cast<uint16_t>(bytes[0] | (bytes[1] << 8));
}

void write_config16(const PciAddress& device, int offset, uint16_t value) {
  const std::string path = pci_path(device, "config");
  const int fd = open(path.c_str(), O_WRONLY | O_CLOEXEC);
  REQUIRE_MESSAGE(fd >= 0, "open " << path);
  const uint8_t bytes[2] = {static_cast<uint8_t>(value & 0xff), static_cast<uint8_t>(value >> 8)};
  const ssize_t n = pwrite(fd, bytes, 2, offset);
  close(fd);
  REQUIRE_MESSAGE(n == 2, "pwrite " << path << " at " << offset);
}

std::string netdevsim_netdev(int id) {
  const auto names = sysfs().list("/sys/bus/netdevsim/devices/netdevsim" + std::to_string(id) + "/net", true).value();
  return names.empty() ? "" : names.front();
}

bool wait_until(const std::function<bool()>& done, std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (!done()) {
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return true;
}

void require_ok(const Status& status, const std::string& what) {
  REQUIRE_MESSAGE(status.ok(), what << ": " << (status.ok() ? "" : status.error().message));
}

}  // namespace hostagent::testing::guest
