// The journal's side without journald: the structured fields a log line becomes, and the decision
// to use the journal (JOURNAL_STREAM naming stderr's device and inode, systemd.exec(5)).
#include <doctest/doctest.h>

#include <sys/stat.h>
#include <unistd.h>

#include "hostagent/systemd/journal.hpp"
#include "hostagent/systemd/log.hpp"
#include "systemd_fixture.hpp"

namespace hostagent::systemd {
namespace {

using Fields = std::vector<std::string>;

TEST_CASE("journal: MESSAGE and PRIORITY, then the VM, operation and device a line is about") {
  CHECK(journal_fields(kPriorityInfo, "created train-0 from template gx3d-160x1792x8h100",
                       {.vm = "train-0", .operation = "create"}) ==
        Fields{"MESSAGE=created train-0 from template gx3d-160x1792x8h100", "PRIORITY=6", "HOSTAGENT_VM=train-0",
               "HOSTAGENT_OPERATION=create"});
  CHECK(journal_fields(kPriorityWarning, "devices: IOMMU group 12 of 0000:3b:00.0 left as it is",
                       {.device = "0000:3b:00.0"}) ==
        Fields{"MESSAGE=devices: IOMMU group 12 of 0000:3b:00.0 left as it is", "PRIORITY=4",
               "HOSTAGENT_DEVICE=0000:3b:00.0"});
  CHECK(journal_fields(kPriorityError, "journal unreadable", {}) == Fields{"MESSAGE=journal unreadable", "PRIORITY=3"});
  // A message keeps its newlines: sd_journal_sendv sends such a field in the protocol's binary form.
  CHECK(journal_fields(kPriorityInfo, "a\nb", {.vm = "v", .operation = "delete", .device = "0000:00:01.0"}) ==
        Fields{"MESSAGE=a\nb", "PRIORITY=6", "HOSTAGENT_VM=v", "HOSTAGENT_OPERATION=delete",
               "HOSTAGENT_DEVICE=0000:00:01.0"});
}

TEST_CASE("journal: JOURNAL_STREAM names a file by DEVICE:INODE, both decimal, nothing else") {
  CHECK(journal_stream_names("8:1234", 8, 1234));
  CHECK(journal_stream_names("64769:18446744073709551615", 64769, static_cast<ino_t>(18446744073709551615ULL)));
  CHECK_FALSE(journal_stream_names("8:1235", 8, 1234));
  CHECK_FALSE(journal_stream_names("9:1234", 8, 1234));
  CHECK_FALSE(journal_stream_names(nullptr, 8, 1234));
  CHECK_FALSE(journal_stream_names("", 8, 1234));
  CHECK_FALSE(journal_stream_names("8:", 8, 1234));
  CHECK_FALSE(journal_stream_names(":1234", 8, 1234));
  CHECK_FALSE(journal_stream_names("8:1234x", 8, 1234));
  CHECK_FALSE(journal_stream_names("8-1234", 8, 1234));
  CHECK_FALSE(journal_stream_names("-8:1234", 8, 1234));
}

TEST_CASE("journal: used only while JOURNAL_STREAM is this process's stderr") {
  struct stat info {};
  REQUIRE(::fstat(STDERR_FILENO, &info) == 0);
  const std::string stream = std::to_string(info.st_dev) + ":" + std::to_string(info.st_ino);
  {
    testing::ScopedEnv env("JOURNAL_STREAM", stream);
    CHECK(stderr_is_journal());
  }
  {
    // Inherited from a parent whose stderr was the journal, but ours was redirected elsewhere.
    testing::ScopedEnv env("JOURNAL_STREAM", std::to_string(info.st_dev) + ":" + std::to_string(info.st_ino + 1));
    CHECK_FALSE(stderr_is_journal());
  }
  testing::ScopedEnv env("JOURNAL_STREAM", std::nullopt);
  CHECK_FALSE(stderr_is_journal());
}

// Issue 43, defect 15: names and text from libvirt, a request or a peer reach the log whole; a
// newline would forge a second line, an escape sequence rewrite the terminal that reads it.
TEST_CASE("log: every line is one line of shown text, its fields too, whatever a name put in it") {
  std::vector<std::pair<std::string, LogContext>> lines;
  const auto previous = set_log_sink([&lines](LogLevel, const std::string& message, const LogContext& context) {
    lines.emplace_back(message, context);
  });
  log(LogLevel::warning, "domain Evil\nhostagentd: ready\x1b]0;owned\x07 gone",
      {.vm = "Evil\n\xe2\x80\xae", .operation = "", .device = ""});
  set_log_sink(previous);
  REQUIRE(lines.size() == 1);
  CHECK(lines[0].first == "domain Evil\\nhostagentd: ready\\x1b]0;owned\\x07 gone");
  CHECK(lines[0].second.vm == "Evil\\n\\xe2\\x80\\xae");
}

}  // namespace
}  // namespace hostagent::systemd
