// common/durable_file: whole replacement or none, never through a link, every failure an io_error
// naming the path.
#include <doctest/doctest.h>
#include <sys/stat.h>

#include <filesystem>
#include <string>

#include "hostagent/common/durable_file.hpp"
#include "test_support.hpp"

namespace hostagent::testing {
namespace {

namespace fs = std::filesystem;

TEST_CASE("replace_file writes the whole contents, mode 0600, and leaves no temporary file") {
  TempDir dir;
  const auto path = dir.path() / "op-1.json";
  write_text_file(path, "old");
  REQUIRE(durable::replace_file(path, "new contents").ok());
  CHECK(read_text_file(path) == "new contents");
  struct stat st {};
  REQUIRE(::stat(path.c_str(), &st) == 0);
  CHECK((st.st_mode & 0777) == 0600);
  CHECK_FALSE(fs::exists(durable::temporary_of(path)));
  CHECK(durable::temporary_of(path) == dir.path() / "op-1.json.tmp");
}

TEST_CASE("replace_file into a missing directory is an io_error naming the path, and writes nothing") {
  TempDir dir;
  const auto path = dir.path() / "gone" / "seed.iso";
  const auto status = durable::replace_file(path, "x");
  REQUIRE_FALSE(status.ok());
  CHECK(status.error().code == ErrorCode::io_error);
  CHECK(contains(status.error().message, path.string()));
  CHECK(fs::is_empty(dir.path()));
}

TEST_CASE("replace_file never writes through a link planted as its temporary file") {
  TempDir dir;
  const auto path = dir.path() / "vm-a.devices.json";
  const auto victim = dir.path() / "victim";
  write_text_file(victim, "keep");
  fs::create_symlink(victim, durable::temporary_of(path));
  const auto status = durable::replace_file(path, "attack");
  REQUIRE_FALSE(status.ok());
  CHECK(status.error().code == ErrorCode::io_error);
  CHECK(read_text_file(victim) == "keep");
  CHECK_FALSE(fs::exists(path));
}

TEST_CASE("a failed rename removes the temporary file") {
  TempDir dir;
  const auto path = dir.path() / "seed.iso";
  fs::create_directory(path);
  fs::create_directory(path / "inside");  // rename(2) over a non-empty directory fails
  const auto status = durable::replace_file(path, "x");
  REQUIRE_FALSE(status.ok());
  CHECK(contains(status.error().message, "rename"));
  CHECK_FALSE(fs::exists(durable::temporary_of(path)));
}

TEST_CASE("remove_file removes, and a missing file is fine, and read_file refuses a file too large") {
  TempDir dir;
  const auto path = dir.path() / "op-2.json";
  write_text_file(path, "0123456789");
  auto read = durable::read_file(path, 10);
  REQUIRE(read.ok());
  CHECK(*read == "0123456789");
  const auto large = durable::read_file(path, 9);
  REQUIRE_FALSE(large.ok());
  CHECK(large.error().code == ErrorCode::parse_error);
  CHECK(contains(large.error().message, "larger than 9 bytes"));
  REQUIRE(durable::remove_file(path).ok());
  CHECK_FALSE(fs::exists(path));
  CHECK(durable::remove_file(path).ok());
  const auto missing = durable::read_file(path, 10);
  REQUIRE_FALSE(missing.ok());
  CHECK(missing.error().code == ErrorCode::io_error);
}

}  // namespace
}  // namespace hostagent::testing
