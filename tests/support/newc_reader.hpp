// Test helper: reads a cpio "newc" archive back, checking its framing as it goes, for the tests of
// the archive writer (verify/guest_image) and of the initramfs images built with it.
#pragma once

#include <doctest/doctest.h>

#include <cstdint>
#include <map>
#include <string>

namespace hostagent::testing {

struct NewcRecord {
  uint32_t ino = 0, mode = 0, nlink = 0, size = 0, rdev_major = 0, rdev_minor = 0;
  std::string data;
};

// Each record is "070701", 13 fields of 8 hex digits, the name with its NUL padded so that header
// and name end on 4 bytes, the data padded likewise; "TRAILER!!!" ends it. Written from the
// format's description (the kernel's Documentation/driver-api/early-userspace/buffer-format.rst),
// not from the writer.
inline std::map<std::string, NewcRecord> parse_newc(const std::string& archive) {
  std::map<std::string, NewcRecord> records;
  std::size_t at = 0;
  const auto field = [&](std::size_t i) {
    return static_cast<uint32_t>(std::stoul(archive.substr(at + 6 + i * 8, 8), nullptr, 16));
  };
  const auto align = [](std::size_t n) { return (n + 3) / 4 * 4; };
  while (true) {
    REQUIRE(at + 110 <= archive.size());
    REQUIRE(archive.compare(at, 6, "070701") == 0);
    CHECK(at % 4 == 0);
    NewcRecord r{field(0), field(1), field(4), field(6), field(9), field(10), {}};
    CHECK(field(2) == 0);   // uid
    CHECK(field(3) == 0);   // gid
    CHECK(field(12) == 0);  // check
    const uint32_t name_size = field(11);
    const std::string name = archive.substr(at + 110, name_size - 1);
    REQUIRE(archive[at + 110 + name_size - 1] == '\0');
    const std::size_t data_at = align(at + 110 + name_size);
    for (std::size_t i = at + 110 + name_size; i < data_at; ++i) CHECK(archive[i] == '\0');
    if (name == "TRAILER!!!") {
      CHECK(align(data_at) == archive.size());
      return records;
    }
    r.data = archive.substr(data_at, r.size);
    at = align(data_at + r.size);
    records[name] = r;
  }
}

}  // namespace hostagent::testing
