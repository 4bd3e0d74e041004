#include <doctest/doctest.h>

#include "hostagent/common/pci_address.hpp"

namespace hostagent {
namespace {

TEST_CASE("PCI addresses parse only in the kernel's canonical form and print back the same") {
  const auto address = PciAddress::parse("0000:1b:00.0").value();
  CHECK(address == PciAddress{0, 0x1b, 0, 0});
  CHECK(address.to_string() == "0000:1b:00.0");
  CHECK(PciAddress::parse("10000:e2:1f.7").value().to_string() == "10000:e2:1f.7");  // VMD domains
  CHECK(PciAddress::parse("0000:00:02.0").value() < PciAddress::parse("0000:00:02.1").value());
  for (const char* bad : {"", "1b:00.0", "0000:1b:00", "0000:1b:20.0", "0000:1b:00.8", "0000:1g:00.0", "000:1b:00.0",
                          "0000:1b:00.0 ", "0000:1b:000.0", "../../x"}) {
    CAPTURE(bad);
    const auto parsed = PciAddress::parse(bad);
    REQUIRE_FALSE(parsed.ok());
    CHECK(parsed.error().message.find("expected the form 0000:1b:00.0") != std::string::npos);
  }
}

}  // namespace
}  // namespace hostagent
