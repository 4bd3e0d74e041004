// Shared test helpers: scratch directories, the reference data, golden files, and running tools.
#pragma once

#include <sys/types.h>

#include <condition_variable>
#include <cstdint>
#include <filesystem>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "hostagent/common/names.hpp"

namespace hostagent::testing {

inline constexpr uint64_t kMiB = 1ULL << 20;
inline constexpr uint64_t kGiB = 1ULL << 30;

// A name a test chose at run time, checked as an edge checks it: one that breaks the rule is a bug
// in the test, and aborts naming it. (A literal converts by itself.)
inline VmName vm_name(const std::string& text) {
  return VmName::parse(text, "name").value();
}
inline TemplateName template_name(const std::string& text) {
  return TemplateName::parse(text, "template").value();
}

inline bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

// A gate a test opens once: whoever waits at it (a step, a write the test holds where it is) goes
// on once it is open.
class Gate {
 public:
  void wait() {
    std::unique_lock lock(mutex_);
    opened_.wait(lock, [this] { return open_; });
  }
  void open() {
    {
      const std::lock_guard lock(mutex_);
      open_ = true;
    }
    opened_.notify_all();
  }

 private:
  std::mutex mutex_;
  std::condition_variable opened_;
  bool open_ = false;
};

// $TMPDIR/hostagent-tests-UID (test_support.cpp says why), where every TempDir is made; $TMPDIR
// itself when that cannot be this user's directory.
const std::filesystem::path& tests_scratch_parent();

// A fresh directory under $TMPDIR, removed with everything in it when this goes out of scope.
class TempDir {
 public:
  TempDir();
  ~TempDir();
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::filesystem::path& path() const { return path_; }

 private:
  std::filesystem::path path_;
};

// The source tree and its golden files (tests/golden). Only test_support.cpp is compiled with their
// paths, so that every other test unit's command line is the same in any clone and a compiler
// cache shared between clones (scripts/lib/caches.sh) finds it.
const std::filesystem::path& source_dir();
const std::filesystem::path& golden_dir();
// The templates the project ships, in the source tree (vmtemplates/templates).
const std::filesystem::path& shipped_templates_dir();

// $HOSTAGENT_REFERENCE_DATA, or nullopt after printing "SKIPPED: ..." so CTest reports a skip.
std::optional<std::filesystem::path> reference_data_or_skip();

// Prints "SKIPPED: <why>"; the caller returns right after.
void skip(const std::string& why);
// The environment variable's value, or `fallback` when it is unset or empty.
std::string env_or(const char* name, const std::string& fallback);

// Compares text with tests/golden/<name>; HOSTAGENT_UPDATE_GOLDEN=1 rewrites the file instead.
// Returns an empty string on a match, else a unified-diff-like description for the failure.
std::string compare_golden(const std::string& name, const std::string& actual);

struct CommandResult {
  int exit_code = -1;
  std::string output;  // stdout and stderr together
};
// Runs argv (no shell) and captures its output. Tests only: production code never spawns tools.
CommandResult run_command(const std::vector<std::string>& argv, const std::vector<std::string>& extra_env = {});
// Starts argv (PATH searched) in the background with stdout and stderr appended to `log`; returns
// its pid for the caller to wait for. Fails the test when it cannot start.
pid_t spawn_logged(const std::vector<std::string>& argv, const std::filesystem::path& log);
// The path of an executable on PATH, or nullopt.
std::optional<std::filesystem::path> find_program(const std::string& name);

// Extracts a .tar.bz2 into dir (through tar) and returns dir.
std::filesystem::path extract_tarball(const std::filesystem::path& tarball, const std::filesystem::path& dir);

// A file's bytes, and a file replaced by these bytes (its directories made first); both throw
// std::runtime_error, which fails the test case, when the file cannot be read or written.
std::string read_text_file(const std::filesystem::path& path);
void write_text_file(const std::filesystem::path& path, const std::string& text);

// The entries of a directory (none when it does not exist), in no particular order.
std::vector<std::filesystem::path> files_in(const std::filesystem::path& dir);

}  // namespace hostagent::testing
