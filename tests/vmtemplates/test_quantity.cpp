#include <doctest/doctest.h>

#include "hostagent/vmtemplates/quantity.hpp"

namespace hostagent::vmtemplates {
namespace {

TEST_CASE("byte sizes: binary and decimal units are distinct, and bad input says how to write it") {
  CHECK(parse_byte_size("1792GiB").value() == 1792ULL << 30);
  CHECK(parse_byte_size("1280GB").value() == 1280ULL * 1000 * 1000 * 1000);
  CHECK(parse_byte_size("1G").value() == 1ULL << 30);
  CHECK(parse_byte_size("2M").value() == 2ULL << 20);
  CHECK(parse_byte_size("4096B").value() == 4096);
  CHECK(parse_byte_size("2TiB").value() == 2ULL << 40);
  for (const char* bad : {"", "GiB", "12", "12 GiB", "-1G", "1.5G", "12gib", "99999999999999999999G", "20000000TiB"}) {
    CAPTURE(bad);
    const auto parsed = parse_byte_size(bad);
    REQUIRE_FALSE(parsed.ok());
    CHECK(parsed.error().code == ErrorCode::invalid_argument);
    CHECK(parsed.error().message.find("write it like 1792GiB") != std::string::npos);
  }
}

}  // namespace
}  // namespace hostagent::vmtemplates
