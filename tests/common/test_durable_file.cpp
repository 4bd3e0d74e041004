// common/durable_file: whole replacement or none, appends that survive a crash, never through a
// link, every failure an io_error naming the path; and common/sha256, which the appended logs chain by.
#include <doctest/doctest.h>
#include <sys/stat.h>

#include <filesystem>
#include <string>

#include "hostagent/common/durable_file.hpp"
#include "hostagent/common/sha256.hpp"
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

TEST_CASE("append_file adds to the end, creates the file 0600, and never writes through a link") {
  TempDir dir;
  const auto path = dir.path() / "evidence.log";
  REQUIRE(durable::append_file(path, "one\n").ok());
  REQUIRE(durable::append_file(path, "two\n").ok());
  CHECK(read_text_file(path) == "one\ntwo\n");
  struct stat st {};
  REQUIRE(::stat(path.c_str(), &st) == 0);
  CHECK((st.st_mode & 0777) == 0600);
  const auto target = dir.path() / "target";
  write_text_file(target, "kept");
  fs::create_symlink(target, dir.path() / "planted.log");
  const auto refused = durable::append_file(dir.path() / "planted.log", "x\n");
  REQUIRE_FALSE(refused.ok());
  CHECK(refused.error().code == ErrorCode::io_error);
  CHECK(read_text_file(target) == "kept");
}

TEST_CASE("truncate_torn_tail cuts what follows the last newline, and nothing from a whole file") {
  TempDir dir;
  const auto path = dir.path() / "evidence.log";
  CHECK(durable::truncate_torn_tail(path, 1024).value() == 0);  // none yet
  write_text_file(path, "one\ntwo\n");
  CHECK(durable::truncate_torn_tail(path, 1024).value() == 0);
  CHECK(read_text_file(path) == "one\ntwo\n");
  write_text_file(path, "one\ntwo\n{\"torn");
  CHECK(durable::truncate_torn_tail(path, 1024).value() == 6);
  CHECK(read_text_file(path) == "one\ntwo\n");
  write_text_file(path, "no newline at all");
  CHECK(durable::truncate_torn_tail(path, 1024).value() == 17);
  CHECK(read_text_file(path).empty());
}

TEST_CASE("sha256_hex gives FIPS 180-4's digests, and is_sha256_hex accepts only that form") {
  // FIPS 180-4 (NIST CSRC examples): "" and "abc".
  CHECK(sha256_hex("") == "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  CHECK(sha256_hex("abc") == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  CHECK(is_sha256_hex(sha256_hex("x")));
  CHECK_FALSE(is_sha256_hex("BA7816BF8F01CFEA414140DE5DAE2223B00361A396177A9CB410FF61F20015AD"));
  CHECK_FALSE(is_sha256_hex("ba7816bf"));
}

}  // namespace
}  // namespace hostagent::testing
