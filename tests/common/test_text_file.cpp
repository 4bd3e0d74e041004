// common/text_file: the end of a log that grows (read_text_tail).
#include <doctest/doctest.h>

#include <string>

#include "hostagent/common/text_file.hpp"
#include "test_support.hpp"

namespace hostagent {
namespace {

struct Log {
  testing::TempDir dir;
  std::filesystem::path path = dir.path() / "guest.log";
  explicit Log(const std::string& text) { testing::write_text_file(path, text); }
  TextTail tail(std::size_t lines, std::size_t max_bytes = 1 << 20) const {
    auto read = read_text_tail(path, lines, max_bytes);
    REQUIRE_MESSAGE(read.ok(), read.error().message);
    return std::move(read).value();
  }
};

TEST_CASE("a log's last lines, each whole, and the whole log when it has no more") {
  const Log log("one\ntwo\nthree\n");
  CHECK(log.tail(1).text == "three\n");
  CHECK(log.tail(2).text == "two\nthree\n");
  CHECK_FALSE(log.tail(2).whole);
  const auto all = log.tail(10);
  CHECK(all.text == "one\ntwo\nthree\n");
  CHECK(all.whole);
  CHECK(all.file_bytes == 14);
  CHECK(log.tail(0).text.empty());
}

TEST_CASE("a last line the guest has not ended yet counts as a line") {
  const Log log("one\ntwo\npart");
  CHECK(log.tail(1).text == "part");
  CHECK(log.tail(2).text == "two\npart");
  const Log blank("\n\nlast\n");
  CHECK(blank.tail(2).text == "\nlast\n");
  CHECK(blank.tail(3).text == "\n\nlast\n");
}

TEST_CASE("within the last bytes only: a line cut there is left out whole, and the size is the file's") {
  const Log log("first line\nsecond\nthird\n");
  const auto tail = log.tail(10, 10);  // "ond\nthird\n": "ond" is a cut line
  CHECK(tail.text == "third\n");
  CHECK_FALSE(tail.whole);
  CHECK(tail.file_bytes == 24);
}

TEST_CASE("a log not written yet is not_found, and what is not a regular file is refused") {
  const testing::TempDir dir;
  CHECK(read_text_tail(dir.path() / "absent.log", 10, 1024).error().code == ErrorCode::not_found);
  CHECK(read_text_tail(dir.path(), 10, 1024).error().code == ErrorCode::invalid_argument);
}

}  // namespace
}  // namespace hostagent
