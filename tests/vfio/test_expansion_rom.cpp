// vfio/expansion_rom against the fake kernel's `rom` model: enabled, read, disabled again whatever
// the read gave; an image without the 0x55AA signature and a refused write are errors naming the
// function; a function without a ROM has none.
#include <doctest/doctest.h>

#include <cerrno>

#include "fake_host.hpp"
#include "fake_rom.hpp"
#include "hostagent/common/sha256.hpp"
#include "hostagent/vfio/expansion_rom.hpp"
#include "test_support.hpp"

namespace hostagent::vfio {
namespace {

using testing::builtin_spec;
using testing::contains;
using testing::FakeHost;

const std::string kRomGpu = "0000:01:00.0";  // the quirks host's RTX A6000

// A ROM image as a GPU carries one: the signature, then code and data.
std::string vbios(char fill) {
  std::string image = "\x55\xAA";
  image += std::string(4096, fill);
  return image;
}

std::vector<std::string> rom_writes(FakeHost& host) {
  std::vector<std::string> out;
  for (const auto& [path, value] : host.kernel().writes()) {
    if (path.ends_with("/rom")) out.push_back(value);
  }
  return out;
}

TEST_CASE("a ROM is enabled, read, hashed and disabled again") {
  FakeHost host(builtin_spec("quirks"));
  auto roms = testing::install_rom_model(host.kernel());
  roms->set(kRomGpu, vbios('a'));
  const auto rom = read_expansion_rom(host.sysfs(), host.kernel(), *PciAddress::parse(kRomGpu));
  REQUIRE_MESSAGE(rom.ok(), rom.error().message);
  REQUIRE(rom->has_value());
  CHECK((*rom)->size == 4098);
  CHECK((*rom)->sha256 == sha256_hex(vbios('a')));
  CHECK((*rom)->sha256 != sha256_hex(vbios('b')));  // another image, another digest
  CHECK(rom_writes(host) == std::vector<std::string>{"1", "0"});
  CHECK_FALSE(roms->enabled(kRomGpu));
}

TEST_CASE("a function without a ROM has none, and nothing is written") {
  FakeHost host(builtin_spec("quirks"));
  testing::install_rom_model(host.kernel());
  const auto rom = read_expansion_rom(host.sysfs(), host.kernel(), *PciAddress::parse(kRomGpu));
  REQUIRE_MESSAGE(rom.ok(), rom.error().message);
  CHECK_FALSE(rom->has_value());
  CHECK(host.kernel().writes().empty());
}

TEST_CASE("an image without the 0x55AA signature is an error naming the function, and the ROM is disabled") {
  FakeHost host(builtin_spec("quirks"));
  auto roms = testing::install_rom_model(host.kernel());
  roms->set(kRomGpu, std::string(512, '\xff'));  // what an erased flash reads as
  const auto rom = read_expansion_rom(host.sysfs(), host.kernel(), *PciAddress::parse(kRomGpu));
  REQUIRE_FALSE(rom.ok());
  CHECK(rom.error().code == ErrorCode::io_error);
  CHECK_MESSAGE(contains(rom.error().message, kRomGpu + " (512 bytes) does not begin with the 0x55AA signature"),
                rom.error().message);
  CHECK(rom_writes(host) == std::vector<std::string>{"1", "0"});
  CHECK_FALSE(roms->enabled(kRomGpu));
}

TEST_CASE("a refused enable reads nothing, and a refused disable is an error too") {
  FakeHost host(builtin_spec("quirks"));
  auto roms = testing::install_rom_model(host.kernel());
  roms->set(kRomGpu, vbios('a'));
  host.kernel().fail_write(".*/rom", EIO, 1);
  const auto refused = read_expansion_rom(host.sysfs(), host.kernel(), *PciAddress::parse(kRomGpu));
  REQUIRE_FALSE(refused.ok());
  CHECK(contains(refused.error().message, "rom"));
  CHECK_FALSE(roms->enabled(kRomGpu));

  host.kernel().fail_write(".*/rom", EIO, 2);  // the "0" after the read
  const auto undisabled = read_expansion_rom(host.sysfs(), host.kernel(), *PciAddress::parse(kRomGpu));
  REQUIRE_FALSE(undisabled.ok());
  CHECK(undisabled.error().code == ErrorCode::io_error);
}

}  // namespace
}  // namespace hostagent::vfio
